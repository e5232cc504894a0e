package sandbox

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/grammar"
)

var searchNow = time.Date(2019, 9, 11, 12, 0, 0, 0, time.UTC)

func searchCorpus(t testing.TB) []*sources.Doc {
	return []*sources.Doc{
		jdoc(t, `{"_id": "1", "headline": "Brett Favre retires", "first_name": "Brett",
			"body_html": "<p>The <b>quarterback</b> &amp; legend</p>", "urgency": 3, "state": "published",
			"tags": ["sport", "nfl"], "date": {"$date": "2019-09-10T15:00:00Z"}, "dstr": "2019-09-10T15:00:00+0000",
			"coverages": [{"type": "text", "status": "draft"}, {"type": "photo", "status": "done"}],
			"task": {"desk": `+oidA+`}}`),
		jdoc(t, `{"_id": "2", "headline": "Mayor opens bridge", "first_name": "Anna", "urgency": "4", "state": "in_progress",
			"tags": ["city"], "date": {"$date": "2019-09-11T10:00:00Z"}, "dstr": "2019-09-11T10:00:00.000Z",
			"coverages": [{"type": "text", "status": "done"}], "task": {"desk": "5d76113ab3af37dea3a2eb92"}}`),
		jdoc(t, `{"_id": `+oidB+`, "headline": "Bridge closed", "urgency": 1, "state": "published",
			"tags": [], "date": null, "flag": true, "_resource": "archive"}`),
	}
}

const idB = "5d76113ab3af37dea3a2eb92"

func hitIDs(docs []*sources.Doc) []string {
	out := []string{}
	for _, d := range docs {
		id, _ := d.Get("_id")
		s, _ := sources.IDString(id)
		out = append(out, s)
	}
	return out
}

func TestSearchQueries(t *testing.T) {
	corpus := searchCorpus(t)
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		// The text-analysis rule.
		{"term token", `{"term": {"headline": {"value": "brett"}}}`, []string{"1"}},
		{"term upper-case is not a token", `{"term": {"headline": {"value": "Brett"}}}`, []string{}},
		{"term whole value", `{"term": {"first_name": {"value": "Brett"}}}`, []string{"1"}},
		{"term lower-case token of one word", `{"term": {"first_name": {"value": "brett"}}}`, []string{"1"}},
		{"term keyword lower-case", `{"term": {"first_name.keyword": {"value": "brett"}}}`, []string{}},
		{"term keyword exact", `{"term": {"first_name.keyword": {"value": "Brett"}}}`, []string{"1"}},
		{"term raw exact", `{"term": {"headline.raw": {"value": "Bridge closed"}}}`, []string{idB}},
		{"term keyword case_insensitive", `{"term": {"first_name.keyword": {"value": "brett", "case_insensitive": true}}}`, []string{"1"}},
		{"term case_insensitive token", `{"term": {"headline": {"value": "BRIDGE", "case_insensitive": true}}}`, []string{"2", idB}},
		{"terms upstream test", `{"terms": {"first_name": ["brett"]}}`, []string{"1"}},
		{"terms any", `{"terms": {"state": ["published", "nope"]}}`, []string{"1", idB}},
		{"term split token", `{"term": {"state": {"value": "progress"}}}`, []string{"2"}},
		{"term number vs numeric string", `{"term": {"urgency": {"value": 4}}}`, []string{"2"}},
		{"term numeric string vs number", `{"term": {"urgency": {"value": "3"}}}`, []string{"1"}},
		{"term bool", `{"term": {"flag": {"value": true}}}`, []string{idB}},
		{"term bool string", `{"term": {"flag": {"value": "true"}}}`, []string{idB}},
		{"term date day", `{"term": {"date": {"value": "2019-09-10"}}}`, []string{"1"}},
		{"term date string field", `{"term": {"dstr": {"value": "2019-09-10T15:00:00.000Z"}}}`, []string{"1"}},
		{"term ObjectID field", `{"term": {"task.desk": {"value": "5d76113ab3af37dea3a2eb91"}}}`, []string{"1"}},
		{"terms ObjectID and string fields", `{"terms": {"task.desk": ["5d76113ab3af37dea3a2eb91", "5d76113ab3af37dea3a2eb92"]}}`, []string{"1", "2"}},
		{"term short form", `{"term": {"state": "published"}}`, []string{"1", idB}},
		{"term _id", `{"term": {"_id": {"value": "1"}}}`, []string{"1"}},
		{"ids", `{"ids": {"values": ["2", "5d76113ab3af37dea3a2eb92", "nope"]}}`, []string{"2", idB}},
		{"term _resource", `{"term": {"_resource": {"value": "archive"}}}`, []string{idB}},

		// Full-text queries.
		{"match or", `{"match": {"headline": {"query": "bridge mayor"}}}`, []string{"2", idB}},
		{"match and", `{"match": {"headline": {"query": "Bridge Mayor", "operator": "and"}}}`, []string{"2"}},
		{"match msm percent", `{"match": {"headline": {"query": "bridge mayor", "minimum_should_match": "100%"}}}`, []string{"2"}},
		{"match msm negative", `{"match": {"headline": {"query": "bridge mayor", "minimum_should_match": -1}}}`, []string{"2", idB}},
		{"match msm too many", `{"match": {"headline": {"query": "bridge", "minimum_should_match": 2}}}`, []string{}},
		{"match short form", `{"match": {"headline": "FAVRE"}}`, []string{"1"}},
		{"match html stripped", `{"match": {"body_html": {"query": "quarterback"}}}`, []string{"1"}},
		{"match tag name is not text", `{"match": {"body_html": {"query": "b"}}}`, []string{}},
		{"match entity decoded", `{"match": {"body_html": {"query": "amp"}}}`, []string{}},
		{"match keyword whole", `{"match": {"headline.keyword": {"query": "Bridge closed"}}}`, []string{idB}},
		{"match keyword part", `{"match": {"headline.keyword": {"query": "Bridge"}}}`, []string{}},
		{"match number field", `{"match": {"urgency": {"query": "1"}}}`, []string{idB}},
		{"match number field lenient", `{"match": {"urgency": {"query": "high"}}}`, []string{}},
		{"match zero terms", `{"match": {"headline": {"query": "!!"}}}`, []string{}},
		{"match zero terms all", `{"match": {"headline": {"query": "!!", "zero_terms_query": "all"}}}`, []string{"1", "2", idB}},
		{"match array field", `{"match": {"tags": {"query": "nfl city"}}}`, []string{"1", "2"}},
		{"match_phrase", `{"match_phrase": {"headline": {"query": "opens bridge"}}}`, []string{"2"}},
		{"match_phrase order", `{"match_phrase": {"headline": {"query": "bridge opens"}}}`, []string{}},
		{"match_phrase slop", `{"match_phrase": {"headline": {"query": "mayor bridge", "slop": 1}}}`, []string{"2"}},
		{"match_phrase no slop", `{"match_phrase": {"headline": {"query": "mayor bridge"}}}`, []string{}},
		{"match_phrase_prefix", `{"match_phrase_prefix": {"headline": {"query": "mayor op"}}}`, []string{"2"}},
		{"multi_match", `{"multi_match": {"query": "closed anna", "fields": ["headline^2", "first_name"]}}`, []string{"2", idB}},
		{"multi_match and per field", `{"multi_match": {"query": "bridge anna", "fields": ["headline", "first_name"], "operator": "and"}}`, []string{}},
		{"multi_match cross_fields", `{"multi_match": {"query": "bridge anna", "fields": ["headline", "first_name"], "operator": "and", "type": "cross_fields"}}`, []string{"2"}},
		{"multi_match phrase", `{"multi_match": {"query": "bridge closed", "fields": ["head*"], "type": "phrase"}}`, []string{idB}},
		{"match_all", `{"match_all": {}}`, []string{"1", "2", idB}},
		{"match_none", `{"match_none": {}}`, []string{}},

		// Range.
		{"range numbers and numeric strings", `{"range": {"urgency": {"gte": 3}}}`, []string{"1", "2"}},
		{"range lt", `{"range": {"urgency": {"lt": 3}}}`, []string{idB}},
		{"range date gte day", `{"range": {"date": {"gte": "2019-09-11"}}}`, []string{"2"}},
		{"range date lte day rounds up", `{"range": {"date": {"lte": "2019-09-10"}}}`, []string{"1"}},
		{"range date gt day rounds up", `{"range": {"date": {"gt": "2019-09-10"}}}`, []string{"2"}},
		{"range date lt day", `{"range": {"date": {"lt": "2019-09-11"}}}`, []string{"1"}},
		{"range now-1d", `{"range": {"date": {"gte": "now-1d"}}}`, []string{"1", "2"}},
		{"range now-1h", `{"range": {"date": {"gte": "now-3h"}}}`, []string{"2"}},
		{"range now/d", `{"range": {"date": {"gte": "now/d"}}}`, []string{"2"}},
		{"range now-1d/d lte rounds up", `{"range": {"date": {"lte": "now-1d/d"}}}`, []string{"1"}},
		{"range anchor math", `{"range": {"date": {"gte": "2019-09-10||+1d"}}}`, []string{"2"}},
		{"range format", `{"range": {"date": {"gte": "11/09/2019", "format": "dd/MM/yyyy"}}}`, []string{"2"}},
		{"range time_zone", `{"range": {"date": {"gte": "2019-09-11T11:30:00", "time_zone": "+02:00"}}}`, []string{"2"}},
		{"range time_zone excludes", `{"range": {"date": {"gte": "2019-09-11T11:30:00", "time_zone": "-02:00"}}}`, []string{}},
		{"range epoch millis", `{"range": {"date": {"gte": 1568160000000}}}`, []string{"2"}},
		{"range date strings", `{"range": {"dstr": {"gte": "2019-09-10T00:00:00Z", "lt": "2019-09-11T00:00:00Z"}}}`, []string{"1"}},
		{"range date string vs date math", `{"range": {"dstr": {"gt": "now-1d"}}}`, []string{"1", "2"}},
		{"range strings", `{"range": {"first_name": {"gte": "B"}}}`, []string{"1"}},
		{"range open end", `{"range": {"urgency": {"gte": null, "lte": 1}}}`, []string{idB}},

		// Presence and patterns.
		{"exists array", `{"exists": {"field": "tags"}}`, []string{"1", "2"}},
		{"exists null", `{"exists": {"field": "date"}}`, []string{"1", "2"}},
		{"exists through array", `{"exists": {"field": "coverages.type"}}`, []string{"1", "2"}},
		{"exists object", `{"exists": {"field": "task"}}`, []string{"1", "2"}},
		{"exists keyword", `{"exists": {"field": "first_name.keyword"}}`, []string{"1", "2"}},
		{"prefix token", `{"prefix": {"headline": {"value": "bri"}}}`, []string{"2", idB}},
		{"prefix exact value", `{"prefix": {"headline": {"value": "Bri"}}}`, []string{idB}},
		{"prefix keyword", `{"prefix": {"headline.keyword": {"value": "Mayor"}}}`, []string{"2"}},
		{"prefix keyword case", `{"prefix": {"headline.keyword": {"value": "mayor"}}}`, []string{}},
		{"prefix case_insensitive", `{"prefix": {"headline.keyword": {"value": "mayor", "case_insensitive": true}}}`, []string{"2"}},
		{"wildcard", `{"wildcard": {"headline": {"value": "br*e"}}}`, []string{"2", idB}},
		{"wildcard ?", `{"wildcard": {"headline": {"value": "?ayor"}}}`, []string{"2"}},
		{"wildcard keyword", `{"wildcard": {"headline.keyword": {"value": "*closed"}}}`, []string{idB}},

		// Compound.
		{"bool should only", `{"bool": {"should": [{"term": {"tags": {"value": "nfl"}}}, {"term": {"tags": {"value": "city"}}}]}}`, []string{"1", "2"}},
		{"bool must makes should optional", `{"bool": {"must": [{"term": {"state": {"value": "published"}}}], "should": [{"term": {"tags": {"value": "nfl"}}}]}}`, []string{"1", idB}},
		{"bool msm with must", `{"bool": {"must": [{"term": {"state": {"value": "published"}}}], "should": [{"term": {"tags": {"value": "nfl"}}}], "minimum_should_match": 1}}`, []string{"1"}},
		{"bool msm 2", `{"bool": {"should": [{"term": {"tags": {"value": "nfl"}}}, {"term": {"tags": {"value": "sport"}}}, {"term": {"tags": {"value": "city"}}}], "minimum_should_match": 2}}`, []string{"1"}},
		{"bool msm percent", `{"bool": {"should": [{"term": {"tags": {"value": "nfl"}}}, {"term": {"tags": {"value": "city"}}}], "minimum_should_match": "50%"}}`, []string{"1", "2"}},
		{"bool must_not only", `{"bool": {"must_not": [{"term": {"state": {"value": "published"}}}]}}`, []string{"2"}},
		{"bool filter", `{"bool": {"filter": [{"range": {"urgency": {"gt": 1}}}], "must_not": [{"exists": {"field": "flag"}}]}}`, []string{"1", "2"}},
		{"bool single clause object", `{"bool": {"must": {"term": {"flag": {"value": false}}}}}`, []string{}},
		{"bool empty", `{"bool": {}}`, []string{"1", "2", idB}},
		{"constant_score", `{"constant_score": {"filter": {"term": {"flag": {"value": true}}}, "boost": 2}}`, []string{idB}},
		{"dis_max", `{"dis_max": {"queries": [{"term": {"tags": {"value": "nfl"}}}, {"term": {"flag": {"value": true}}}]}}`, []string{"1", idB}},
		{"nested one element", `{"nested": {"path": "coverages", "query": {"bool": {"must": [{"term": {"coverages.type": {"value": "text"}}}, {"term": {"coverages.status": {"value": "done"}}}]}}}}`, []string{"2"}},
		{"not nested: across elements", `{"bool": {"must": [{"term": {"coverages.type": {"value": "text"}}}, {"term": {"coverages.status": {"value": "done"}}}]}}`, []string{"1", "2"}},
		{"nested sees only its path", `{"nested": {"path": "coverages", "query": {"term": {"state": {"value": "published"}}}}}`, []string{}},

		// query_string.
		{"qs AND", `{"query_string": {"query": "bridge AND mayor"}}`, []string{"2"}},
		{"qs OR default", `{"query_string": {"query": "favre mayor"}}`, []string{"1", "2"}},
		{"qs default AND", `{"query_string": {"query": "bridge mayor", "default_operator": "AND"}}`, []string{"2"}},
		{"qs minus", `{"query_string": {"query": "bridge -mayor"}}`, []string{idB}},
		{"qs plus", `{"query_string": {"query": "+bridge closed"}}`, []string{"2", idB}},
		{"qs NOT alone", `{"query_string": {"query": "NOT bridge"}}`, []string{"1"}},
		{"qs field", `{"query_string": {"query": "headline:brett"}}`, []string{"1"}},
		{"qs field AND NOT field", `{"query_string": {"query": "state:published AND NOT urgency:1"}}`, []string{"1"}},
		{"qs _exists_", `{"query_string": {"query": "_exists_:flag"}}`, []string{idB}},
		{"qs phrase", `{"query_string": {"query": "\"opens bridge\""}}`, []string{"2"}},
		{"qs field phrase", `{"query_string": {"query": "headline:\"bridge closed\""}}`, []string{idB}},
		{"qs range", `{"query_string": {"query": "urgency:[2 TO 3]"}}`, []string{"1"}},
		{"qs range exclusive", `{"query_string": {"query": "urgency:{1 TO 3]"}}`, []string{"1"}},
		{"qs range open", `{"query_string": {"query": "urgency:[* TO 1]"}}`, []string{idB}},
		{"qs compare", `{"query_string": {"query": "urgency:>=3"}}`, []string{"1", "2"}},
		{"qs date range", `{"query_string": {"query": "date:[now-1d/d TO now]"}}`, []string{"1", "2"}},
		{"qs wildcard", `{"query_string": {"query": "BRID*"}}`, []string{"2", idB}},
		{"qs field group", `{"query_string": {"query": "tags:(nfl OR city)"}}`, []string{"1", "2"}},
		{"qs parentheses", `{"query_string": {"query": "(bridge OR brett) AND published"}}`, []string{"1", idB}},
		{"qs default_field", `{"query_string": {"query": "anna", "default_field": "headline"}}`, []string{}},
		{"qs fields", `{"query_string": {"query": "anna OR closed", "fields": ["first_name", "headline"]}}`, []string{"2", idB}},
		{"qs hyphenated word", `{"query_string": {"query": "in-progress"}}`, []string{"2"}},
		{"qs && ||", `{"query_string": {"query": "bridge && (mayor || closed)"}}`, []string{"2", idB}},
		{"qs escaped colon", `{"query_string": {"query": "headline\\:brett"}}`, []string{"1"}},
		{"qs keyword field", `{"query_string": {"query": "first_name.keyword:Anna"}}`, []string{"2"}},
		{"qs number", `{"query_string": {"query": "urgency:4"}}`, []string{"2"}},
		{"qs match all", `{"query_string": {"query": "*:*"}}`, []string{"1", "2", idB}},
		{"sqs and", `{"simple_query_string": {"query": "bridge + mayor"}}`, []string{"2"}},
		{"sqs or", `{"simple_query_string": {"query": "favre | closed"}}`, []string{"1", idB}},
		{"sqs not", `{"simple_query_string": {"query": "bridge -closed"}}`, []string{"2"}},
		{"sqs prefix", `{"simple_query_string": {"query": "qua*", "fields": ["body_html"]}}`, []string{"1"}},
		{"sqs phrase", `{"simple_query_string": {"query": "\"favre retires\""}}`, []string{"1"}},
		{"sqs AND is a word", `{"simple_query_string": {"query": "bridge AND", "default_operator": "and"}}`, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := jdoc(t, `{"query": `+tc.query+`, "size": 100}`)
			res, err := Search(corpus, body, searchNow)
			if err != nil {
				t.Fatalf("Search(%s): %v", tc.query, err)
			}
			got := hitIDs(res.Docs)
			slices.Sort(got)
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Search(%s) (-got +want):\n%s", tc.query, diff)
			}
			if res.Total != len(tc.want) {
				t.Errorf("Total = %d, want %d", res.Total, len(tc.want))
			}
		})
	}
}

func TestSearchSortPageSource(t *testing.T) {
	corpus := searchCorpus(t)
	for _, tc := range []struct {
		name, body string
		want       []string
		total      int
	}{
		{"date asc, missing last", `{"sort": [{"date": {"order": "asc"}}]}`, []string{"1", "2", idB}, 3},
		{"date desc, missing last", `{"sort": [{"date": {"order": "desc"}}]}`, []string{"2", "1", idB}, 3},
		{"missing first", `{"sort": [{"date": {"order": "asc", "missing": "_first"}}]}`, []string{idB, "1", "2"}, 3},
		{"missing value", `{"sort": [{"date": {"order": "asc", "missing": 1568160000000}}]}`, []string{"1", idB, "2"}, 3},
		{"date strings sort as dates", `{"sort": [{"dstr": {"order": "desc"}}]}`, []string{"2", "1", idB}, 3},
		{"array min asc", `{"sort": [{"tags": {"order": "asc"}}]}`, []string{"2", "1", idB}, 3},
		{"array max desc", `{"sort": [{"tags": {"order": "desc"}}]}`, []string{"1", "2", idB}, 3},
		{"array mode max asc", `{"sort": [{"tags": {"order": "asc", "mode": "max"}}]}`, []string{"2", "1", idB}, 3},
		{"keyword desc", `{"sort": [{"headline.keyword": {"order": "desc"}}]}`, []string{"2", idB, "1"}, 3},
		{"numbers before strings", `{"sort": [{"urgency": {"order": "asc"}}]}`, []string{idB, "1", "2"}, 3},
		{"short forms", `{"sort": ["state", {"urgency": "desc"}]}`, []string{"2", "1", idB}, 3},
		{"two keys", `{"sort": [{"state.keyword": {"order": "asc"}}, {"urgency": {"order": "desc"}}]}`, []string{"2", "1", idB}, 3},
		{"_doc", `{"sort": [{"_doc": {"order": "asc"}}]}`, []string{"1", "2", idB}, 3},
		{"_score", `{"query": {"match": {"headline": {"query": "bridge mayor"}}}, "sort": [{"_score": {"order": "desc"}}]}`, []string{"2", idB}, 2},
		{"default sort is _score", `{"query": {"bool": {"should": [{"match": {"headline": "closed"}}, {"match": {"headline": "bridge"}}]}}}`, []string{idB, "2"}, 2},
		{"ties by _id", `{"sort": [{"state.keyword": {"order": "asc"}}]}`, []string{"2", "1", idB}, 3},
		{"nested sort", `{"sort": [{"coverages.status": {"order": "asc", "nested": {"path": "coverages", "filter": {"term": {"coverages.type": {"value": "photo"}}}}}}]}`, []string{"1", "2", idB}, 3},
		{"mode sum", `{"sort": [{"urgency": {"order": "desc", "mode": "sum"}}], "query": {"exists": {"field": "flag"}}}`, []string{idB}, 1},
		{"size", `{"sort": [{"_doc": {"order": "asc"}}], "size": 2}`, []string{"1", "2"}, 3},
		{"from", `{"sort": [{"_doc": {"order": "asc"}}], "from": 2}`, []string{idB}, 3},
		{"from beyond", `{"from": 5}`, []string{}, 3},
		{"size 0", `{"size": 0}`, []string{}, 3},
		{"track_total_hits saturates", `{"track_total_hits": 2, "size": 1, "sort": [{"_doc": {"order": "asc"}}]}`, []string{"1"}, 2},
		{"track_total_hits true", `{"track_total_hits": true, "size": 1, "sort": [{"_doc": {"order": "asc"}}]}`, []string{"1"}, 3},
		{"post_filter", `{"post_filter": {"term": {"state": {"value": "published"}}}, "sort": [{"_doc": {"order": "asc"}}]}`, []string{"1", idB}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Search(corpus, jdoc(t, tc.body), searchNow)
			if err != nil {
				t.Fatalf("Search(%s): %v", tc.body, err)
			}
			if diff := cmp.Diff(hitIDs(res.Docs), tc.want); diff != "" {
				t.Errorf("Search(%s) (-got +want):\n%s", tc.body, diff)
			}
			if res.Total != tc.total {
				t.Errorf("Total = %d, want %d", res.Total, tc.total)
			}
		})
	}
}

func TestSearchTotalSaturates(t *testing.T) {
	docs := make([]*sources.Doc, sources.MaxTotal+5)
	for i := range docs {
		docs[i] = sources.D("_id", string(rune('a'+i%26))+string(rune('0'+i%10)), "n", int64(i))
	}
	res, err := Search(docs, jdoc(t, `{"size": 1, "track_total_hits": 10000}`), searchNow)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != sources.MaxTotal {
		t.Errorf("Total = %d, want %d", res.Total, sources.MaxTotal)
	}
}

func TestSearchHits(t *testing.T) {
	corpus := searchCorpus(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"ObjectIDs become strings, _resource removed, _id last",
			`{"query": {"ids": {"values": ["5d76113ab3af37dea3a2eb92"]}}}`,
			`{"headline": "Bridge closed", "urgency": 1, "state": "published", "tags": [], "date": null, "flag": true, "_id": "5d76113ab3af37dea3a2eb92"}`},
		{"includes",
			`{"query": {"ids": {"values": ["1"]}}, "_source": {"includes": ["headline", "task.*"]}}`,
			`{"headline": "Brett Favre retires", "task": {"desk": "5d76113ab3af37dea3a2eb91"}, "_id": "1"}`},
		{"excludes inside arrays",
			`{"query": {"ids": {"values": ["2"]}}, "_source": {"excludes": ["coverages.status", "t*", "d*", "body_html", "urgency", "state", "first_name"]}}`,
			`{"headline": "Mayor opens bridge", "coverages": [{"type": "text"}], "_id": "2"}`},
		{"includes through arrays",
			`{"query": {"ids": {"values": ["1"]}}, "_source": ["coverages.type"]}`,
			`{"coverages": [{"type": "text"}, {"type": "photo"}], "_id": "1"}`},
		{"include and exclude",
			`{"query": {"ids": {"values": ["1"]}}, "_source": {"includes": ["coverages"], "excludes": ["*.status"]}}`,
			`{"coverages": [{"type": "text"}, {"type": "photo"}], "_id": "1"}`},
		{"disabled",
			`{"query": {"ids": {"values": ["1"]}}, "_source": false}`,
			`{"_id": "1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Search(corpus, jdoc(t, tc.body), searchNow)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Docs) != 1 {
				t.Fatalf("got %d hits, want 1", len(res.Docs))
			}
			got := string(codec.AppendJSON(nil, res.Docs[0]))
			want := string(codec.AppendJSON(nil, jdoc(t, tc.want)))
			if got != want {
				t.Errorf("hit\n got %s\nwant %s", got, want)
			}
		})
	}
	// Hits are copies.
	res, err := Search(corpus, jdoc(t, `{"query": {"ids": {"values": ["1"]}}}`), searchNow)
	if err != nil {
		t.Fatal(err)
	}
	res.Docs[0].Set("headline", "changed")
	cov, _ := res.Docs[0].Get("coverages")
	cov.([]any)[0].(*sources.Doc).Set("type", "changed")
	if h, _ := corpus[0].String("headline"); h != "Brett Favre retires" {
		t.Errorf("stored headline changed to %q", h)
	}
	cov, _ = corpus[0].Get("coverages")
	if ty, _ := cov.([]any)[0].(*sources.Doc).String("type"); ty != "text" {
		t.Errorf("stored coverage changed to %q", ty)
	}
}

func TestSearchAggregations(t *testing.T) {
	corpus := searchCorpus(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"terms on an array field, ties by key",
			`{"aggs": {"tags": {"terms": {"field": "tags"}}}}`,
			`{"tags": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "city", "doc_count": 1}, {"key": "nfl", "doc_count": 1}, {"key": "sport", "doc_count": 1}]}}`},
		{"size and other",
			`{"aggs": {"tags": {"terms": {"field": "tags", "size": 1}}}}`,
			`{"tags": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 2, "buckets": [{"key": "city", "doc_count": 1}]}}`},
		{"count desc",
			`{"aggs": {"s": {"terms": {"field": "state.keyword"}}}}`,
			`{"s": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "published", "doc_count": 2}, {"key": "in_progress", "doc_count": 1}]}}`},
		{"order by key desc",
			`{"aggs": {"s": {"terms": {"field": "state.keyword", "order": {"_key": "desc"}}}}}`,
			`{"s": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "published", "doc_count": 2}, {"key": "in_progress", "doc_count": 1}]}}`},
		{"order by count asc",
			`{"aggs": {"s": {"terms": {"field": "state.keyword", "order": {"_count": "asc"}}}}}`,
			`{"s": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "in_progress", "doc_count": 1}, {"key": "published", "doc_count": 2}]}}`},
		{"numbers, then strings",
			`{"aggs": {"u": {"terms": {"field": "urgency", "order": {"_key": "asc"}}}}}`,
			`{"u": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": 1, "doc_count": 1}, {"key": 3, "doc_count": 1}, {"key": "4", "doc_count": 1}]}}`},
		{"dates and booleans have key_as_string",
			`{"aggs": {"d": {"terms": {"field": "date"}}, "f": {"terms": {"field": "flag"}}}}`,
			`{"d": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": 1568127600000, "key_as_string": "2019-09-10T15:00:00.000Z", "doc_count": 1},
				{"key": 1568196000000, "key_as_string": "2019-09-11T10:00:00.000Z", "doc_count": 1}]},
			 "f": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": 1, "key_as_string": "true", "doc_count": 1}]}}`},
		{"missing",
			`{"aggs": {"f": {"terms": {"field": "first_name.keyword", "missing": "N/A"}}}}`,
			`{"f": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "Anna", "doc_count": 1}, {"key": "Brett", "doc_count": 1}, {"key": "N/A", "doc_count": 1}]}}`},
		{"include and exclude",
			`{"aggs": {"a": {"terms": {"field": "tags", "include": ["nfl", "city", "sport"], "exclude": ["city"]}}, "b": {"terms": {"field": "tags", "include": "s.*"}}}}`,
			`{"a": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [{"key": "nfl", "doc_count": 1}, {"key": "sport", "doc_count": 1}]},
			  "b": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [{"key": "sport", "doc_count": 1}]}}`},
		{"over query matches, not post_filter; min_doc_count 0",
			`{"query": {"term": {"state": {"value": "published"}}}, "post_filter": {"term": {"flag": {"value": true}}},
			  "aggs": {"t": {"terms": {"field": "tags", "min_doc_count": 0}}}}`,
			`{"t": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "nfl", "doc_count": 1}, {"key": "sport", "doc_count": 1}, {"key": "city", "doc_count": 0}]}}`},
		{"sub-aggregations",
			`{"aggs": {"s": {"terms": {"field": "state.keyword"}, "aggs": {"d": {"terms": {"field": "task.desk"}}}}}}`,
			`{"s": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
				{"key": "published", "doc_count": 2, "d": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
					{"key": "5d76113ab3af37dea3a2eb91", "doc_count": 1}]}},
				{"key": "in_progress", "doc_count": 1, "d": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
					{"key": "5d76113ab3af37dea3a2eb92", "doc_count": 1}]}}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Search(corpus, jdoc(t, tc.body), searchNow)
			if err != nil {
				t.Fatal(err)
			}
			got := string(codec.AppendJSON(nil, res.Aggregations))
			want := string(codec.AppendJSON(nil, jdoc(t, tc.want)))
			if got != want {
				t.Errorf("aggregations\n got %s\nwant %s", got, want)
			}
		})
	}
	res, err := Search(corpus, jdoc(t, `{"query": {"match_all": {}}}`), searchNow)
	if err != nil || res.Aggregations != nil {
		t.Errorf("without aggs: Aggregations = %v, %v; want nil", res.Aggregations, err)
	}
}

func TestSearchInvalid(t *testing.T) {
	corpus := searchCorpus(t)
	for _, tc := range []struct{ name, body string }{
		{"unknown query", `{"query": {"script": {"script": "1"}}}`},
		{"two query keys", `{"query": {"term": {"a": {"value": 1}}, "match_all": {}}}`},
		{"query not an object", `{"query": {"match_all": 1}}`},
		{"bool unknown key", `{"query": {"bool": {"should_not": []}}}`},
		{"term null", `{"query": {"term": {"a": {"value": null}}}}`},
		{"term two fields", `{"query": {"term": {"a": {"value": 1}, "b": {"value": 2}}}}`},
		{"terms lookup", `{"query": {"terms": {"a": {"index": "x", "id": "1", "path": "p"}}}}`},
		{"match operator", `{"query": {"match": {"a": {"query": "x", "operator": "xor"}}}}`},
		{"msm combination", `{"query": {"match": {"a": {"query": "x", "minimum_should_match": "3<90%"}}}}`},
		{"range from", `{"query": {"range": {"a": {"from": 1}}}}`},
		{"bad date math", `{"query": {"range": {"a": {"gte": "now-1x"}}}}`},
		{"bad anchor math", `{"query": {"range": {"a": {"gte": "yesterday||+1d"}}}}`},
		{"bad format", `{"query": {"range": {"a": {"gte": "1", "format": "qqq"}}}}`},
		{"bad time_zone", `{"query": {"range": {"a": {"gte": "now", "time_zone": "Mars/Olympus"}}}}`},
		{"exists without field", `{"query": {"exists": {}}}`},
		{"nested without path", `{"query": {"nested": {"query": {"match_all": {}}}}}`},
		{"query_string parenthesis", `{"query": {"query_string": {"query": "(a"}}}`},
		{"query_string close", `{"query": {"query_string": {"query": "a)"}}}`},
		{"query_string range", `{"query": {"query_string": {"query": "a:[1 2]"}}}`},
		{"size negative", `{"size": -1}`},
		{"from fraction", `{"from": 1.5}`},
		{"unknown key", `{"highlight": {}}`},
		{"sort order", `{"sort": [{"a": {"order": "up"}}]}`},
		{"sort mode", `{"sort": [{"a": {"mode": "first"}}]}`},
		{"sort mode avg on strings", `{"sort": [{"headline": {"mode": "avg"}}]}`},
		{"agg type", `{"aggs": {"a": {"avg": {"field": "x"}}}}`},
		{"agg size 0", `{"aggs": {"a": {"terms": {"field": "x", "size": 0}}}}`},
		{"agg without field", `{"aggs": {"a": {"terms": {"size": 1}}}}`},
		{"agg order by sub", `{"aggs": {"a": {"terms": {"field": "x", "order": {"b": "asc"}}}}}`},
		{"agg include partition", `{"aggs": {"a": {"terms": {"field": "x", "include": {"partition": 0, "num_partitions": 2}}}}}`},
		{"_source number", `{"_source": 1}`},
		{"deep", `{"query": ` + deepBool(150) + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Search(corpus, jdoc(t, tc.body), searchNow)
			if !errors.Is(err, sources.ErrInvalid) {
				t.Errorf("Search(%s) error = %v, want ErrInvalid", tc.body, err)
			}
		})
	}
}

func deepBool(n int) string {
	s := `{"match_all": {}}`
	for range n {
		s = `{"bool": {"must": [` + s + `]}}`
	}
	return s
}

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		html bool
		want []string
	}{
		{"Brett Favre", false, []string{"brett", "favre"}},
		{"in_progress 5.0 e-mail", false, []string{"in", "progress", "5", "0", "e", "mail"}},
		{"Žluťoučký KŮŇ, 日本", false, []string{"žluťoučký", "kůň", "日本"}},
		{"<p>Hello <b>world</b></p>", true, []string{"hello", "world"}},
		{"<p>Hello<br/>world &amp; caf&eacute;</p>", true, []string{"hello", "world", "café"}},
		{"a <!-- b --> c", true, []string{"a", "c"}},
		{"<p>tag", false, []string{"p", "tag"}},
		{"x < y", true, []string{"x"}},
		{"", false, nil},
	} {
		if diff := cmp.Diff(tokenize(tc.in, tc.html), tc.want); diff != "" {
			t.Errorf("tokenize(%q, %v) (-got +want):\n%s", tc.in, tc.html, diff)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"br*e", "bridge", true},
		{"br*e", "bride", true},
		{"br*e", "brides", false},
		{"*", "", true},
		{"?", "", false},
		{"?ayor", "mayor", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"ž?", "žl", true},
		{"*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestDateParser(t *testing.T) {
	now := time.Date(2019, 9, 11, 12, 34, 56, 0, time.UTC)
	for _, tc := range []struct {
		in, format, tz string
		roundUp        bool
		want           string
	}{
		{"2019-09-10T15:00:00.000Z", "", "", false, "2019-09-10T15:00:00Z"},
		{"2019-09-10T15:00:00+0000", "", "", false, "2019-09-10T15:00:00Z"},
		{"2019-09-10T17:00:00+02:00", "", "", false, "2019-09-10T15:00:00Z"},
		{"2019-09-10", "", "", false, "2019-09-10T00:00:00Z"},
		{"2019-09-10", "", "", true, "2019-09-10T23:59:59.999Z"},
		{"2019-09", "", "", true, "2019-09-30T23:59:59.999Z"},
		{"2019", "", "", true, "2019-12-31T23:59:59.999Z"},
		{"2019-09-10", "", "+02:00", false, "2019-09-09T22:00:00Z"},
		{"now", "", "", false, "2019-09-11T12:34:56Z"},
		{"now-1d", "", "", false, "2019-09-10T12:34:56Z"},
		{"now+2h", "", "", false, "2019-09-11T14:34:56Z"},
		{"now/d", "", "", false, "2019-09-11T00:00:00Z"},
		{"now/d", "", "", true, "2019-09-11T23:59:59.999Z"},
		{"now/d", "", "Europe/Prague", false, "2019-09-10T22:00:00Z"},
		{"now/M", "", "", false, "2019-09-01T00:00:00Z"},
		{"now/w", "", "", false, "2019-09-09T00:00:00Z"},
		{"now-1y/y", "", "", false, "2018-01-01T00:00:00Z"},
		{"2019-01-31||+1M", "", "", false, "2019-03-03T00:00:00Z"},
		{"2019-01-01||+1M/d", "", "", true, "2019-02-01T23:59:59.999Z"},
		{"10/09/2019", "dd/MM/yyyy", "", false, "2019-09-10T00:00:00Z"},
		{"10/09/2019", "dd/MM/yyyy", "", true, "2019-09-10T23:59:59.999Z"},
		{"2019-09-10 15:00:00", "yyyy-MM-dd HH:mm:ss", "", false, "2019-09-10T15:00:00Z"},
		{"1568127600", "epoch_second", "", false, "2019-09-10T15:00:00Z"},
		{"1568127600000", "", "", false, "2019-09-10T15:00:00Z"},
		{"2019-09-10T15:00:00.000Z", "yyyy-MM-dd||strict_date_optional_time", "", false, "2019-09-10T15:00:00Z"},
	} {
		p, err := newDateParser(now, tc.format, tc.tz)
		if err != nil {
			t.Errorf("newDateParser(%q, %q): %v", tc.format, tc.tz, err)
			continue
		}
		got, ok, err := p.parse(tc.in, tc.roundUp)
		if err != nil || !ok {
			t.Errorf("parse(%q, %q, %q, %v) = %v, %v", tc.in, tc.format, tc.tz, tc.roundUp, ok, err)
			continue
		}
		if s := got.UTC().Format(time.RFC3339Nano); s != tc.want {
			t.Errorf("parse(%q, %q, %q, %v) = %s, want %s", tc.in, tc.format, tc.tz, tc.roundUp, s, tc.want)
		}
	}
	p, _ := newDateParser(now, "", "")
	if _, ok, err := p.parse("hello", false); ok || err != nil {
		t.Errorf(`parse("hello") = %v, %v; want not a date`, ok, err)
	}
}

// Every query and aggregation type of grammar's table that reaches a
// backend (the server rewrites the legacy forms into bool) is evaluated:
// an entry added to the table and not to the evaluator fails here.
func TestSearchCoversGrammar(t *testing.T) {
	corpus := searchCorpus(t)
	for _, qt := range grammar.QueryTypes() {
		if qt.Bool {
			continue
		}
		t.Run(qt.Name, func(t *testing.T) {
			if _, err := Search(corpus, jdoc(t, `{"query": `+qt.Example+`}`), searchNow); err != nil {
				t.Errorf("Search(%s): %v", qt.Example, err)
			}
		})
	}
	for _, at := range grammar.AggTypes() {
		t.Run("aggs "+at.Name, func(t *testing.T) {
			res, err := Search(corpus, jdoc(t, `{"aggs": `+at.Example+`}`), searchNow)
			if err != nil {
				t.Fatalf("Search(aggs %s): %v", at.Example, err)
			}
			if res.Aggregations == nil || res.Aggregations.Len() == 0 {
				t.Errorf("Search(aggs %s): no aggregations", at.Example)
			}
		})
	}
}
