package elastic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/elastic/estest"
)

// cause is one error object of an Elasticsearch answer.
func cause(typ, reason string) *sources.Doc { return sources.D("type", typ, "reason", reason) }

// shardFailures is a search_phase_execution_exception of status whose
// shards failed with causes, one shard each, as Elasticsearch writes it:
// the causes as root causes and as the shards' reasons. rootCauses, when
// set, replaces the root causes (Elasticsearch names the innermost
// error there, which may differ from the shard's reason).
func shardFailures(status int64, rootCauses []*sources.Doc, causes ...*sources.Doc) string {
	var roots, shards []any
	for i, c := range causes {
		roots = append(roots, c.Clone())
		shards = append(shards, sources.D("shard", int64(i), "index", "superdesk_archive", "node", "dKzpvp0QTNqKlPOs8xBOrw", "reason", c.Clone()))
	}
	if rootCauses != nil {
		roots = nil
		for _, c := range rootCauses {
			roots = append(roots, c)
		}
	}
	e := sources.D("root_cause", roots, "type", "search_phase_execution_exception", "reason", "all shards failed",
		"phase", "query", "grouped", true, "failed_shards", shards)
	return string(codec.AppendJSON(nil, sources.D("error", e, "status", status)))
}

// TestRefusalOrOutage covers, answer by answer, what an error from
// Elasticsearch means for the client: a 400 is the client's (ErrInvalid)
// only when every error it names says the query is wrong; a node that is
// closing, overloaded, blocked or gone is unavailable, whatever its
// status.
func TestRefusalOrOutage(t *testing.T) {
	t.Parallel()
	body := func(status int, typ, reason string) string {
		return string(estest.ErrorBody(status, typ, reason, nil))
	}
	for _, tc := range []struct {
		name  string
		reply estest.Reply
		want  error
	}{
		// Elasticsearch's verdicts on the query (bodies as 7.10 writes them).
		{"unknown query type", estest.Reply{Status: 400, Body: string(estest.ParsingError("unknown query [foo]"))}, sources.ErrInvalid},
		{"wildcard on a number", estest.Reply{Status: 400, Body: string(estest.ShardError("superdesk_archive",
			"Can only use wildcard queries on keyword, text and wildcard fields - not on [urgency] which is of type [long]"))}, sources.ErrInvalid},
		{"sort on a text field", estest.Reply{Status: 400, Body: string(estest.FieldData("superdesk_archive", "headline"))}, sources.ErrInvalid},
		{"a date that does not parse", estest.Reply{Status: 400, Body: shardFailures(400,
			[]*sources.Doc{cause("parse_exception", "failed to parse date field [x] with format [strict_date_optional_time||epoch_millis]")},
			cause("query_shard_exception", "failed to create query: failed to parse date field [x]"))}, sources.ErrInvalid},
		{"a size that is not a number", estest.Reply{Status: 400, Body: body(400, "number_format_exception", `For input string: "abc"`)}, sources.ErrInvalid},
		{"a value of the wrong shape", estest.Reply{Status: 400, Body: body(400, "x_content_parse_exception",
			"[1:78] [date_histogram] failed to parse field [calendar_interval]")}, sources.ErrInvalid},
		{"not JSON", estest.Reply{Status: 400, Body: body(400, "json_parse_exception", "Unexpected character ('n' (code 110))")}, sources.ErrInvalid},
		{"an unknown time zone", estest.Reply{Status: 400, Body: body(400, "illegal_argument_exception",
			"java.time.zone.ZoneRulesException: Unknown time-zone ID: Bad/Zone")}, sources.ErrInvalid},
		{"validation", estest.Reply{Status: 400, Body: body(400, "action_request_validation_exception",
			"Validation Failed: 1: from must be positive;")}, sources.ErrInvalid},
		{"request too large", estest.Reply{Status: 413, Body: ""}, sources.ErrInvalid},

		// 400s that are not about the query.
		{"closed index", estest.Reply{Status: 400, Body: body(400, "index_closed_exception", "closed")}, sources.ErrUnavailable},
		{"a task cancelled as its node leaves", estest.Reply{Status: 400, Body: body(400, "task_cancelled_exception", "task cancelled [shutdown]")}, sources.ErrUnavailable},
		{"one shard refused the query, one was cancelled", estest.Reply{Status: 400, Body: shardFailures(400, nil,
			cause("query_shard_exception", "failed to create query"), cause("task_cancelled_exception", "cancelled"))}, sources.ErrUnavailable},
		{"shard failures naming nothing", estest.Reply{Status: 400, Body: shardFailures(400, nil)}, sources.ErrUnavailable},
		{"a shard failure without a type", estest.Reply{Status: 400, Body: shardFailures(400, nil, sources.D("reason", "?"))}, sources.ErrUnavailable},
		{"a proxy's page", estest.Reply{Status: 400, Body: "<html><body>400 Bad Request</body></html>"}, sources.ErrUnavailable},
		{"an error as a string", estest.Reply{Status: 400, Body: `{"error":"bad request","status":400}`}, sources.ErrUnavailable},
		{"our media types", estest.Reply{Status: 400, Body: body(400, "media_type_header_exception",
			"Invalid media-type value on headers [Accept, Content-Type]")}, sources.ErrUnavailable},

		// Overloaded, blocked, closing, gone.
		{"rejected execution", estest.Reply{Status: 429, Body: string(estest.Rejected())}, sources.ErrUnavailable},
		{"circuit breaker", estest.Reply{Status: 429, Body: body(429, "circuit_breaking_exception", "[parent] Data too large")}, sources.ErrUnavailable},
		{"read blocked", estest.Reply{Status: 403, Body: body(403, "cluster_block_exception",
			"index [superdesk_archive] blocked by: [FORBIDDEN/7/index read (api)];")}, sources.ErrUnavailable},
		{"cluster not recovered", estest.Reply{Status: 503, Body: body(503, "cluster_block_exception",
			"blocked by: [SERVICE_UNAVAILABLE/1/state not recovered / initialized];")}, sources.ErrUnavailable},
		{"no master", estest.Reply{Status: 503, Body: body(503, "master_not_discovered_exception", "")}, sources.ErrUnavailable},
		{"node closed", estest.Reply{Status: 500, Body: shardFailures(500, nil, cause("node_closed_exception", "node closed"))}, sources.ErrUnavailable},
		{"node disconnected", estest.Reply{Status: 503, Body: shardFailures(503, nil, cause("node_disconnected_exception", "disconnected"))}, sources.ErrUnavailable},
		{"no shards", estest.Reply{Status: 503, Body: string(estest.NoShards())}, sources.ErrUnavailable},
		{"connection reset", estest.Reply{Reset: true}, sources.ErrUnavailable},

		// Time.
		{"request timeout", estest.Reply{Status: 408, Body: ""}, sources.ErrTimeout},
		{"gateway timeout", estest.Reply{Status: 504, Body: ""}, sources.ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, estest.Options{}, 30*time.Second)
			f.fake.Fail(2, tc.reply) // the first answer and the client's one retry
			_, err := f.store.Find(t.Context(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Find: %v, want %v", err, tc.want)
			}
			if _, ok := errors.AsType[*essrc.Error](err); !ok {
				t.Errorf("error %T, want *elastic.Error", err)
			}
		})
	}
}
