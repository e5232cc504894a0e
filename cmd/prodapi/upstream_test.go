package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/sources"
)

// The original's own test suites (superdesk-core prod_api/tests and
// superdesk-planning server/tests/prod_api), ported: the same requests and
// assertions, against a Superdesk dump shaped like their fixtures (string
// ids and dates, nothing type-cast; see its README). Where the original's
// detail assertions passed vacuously on a 404 (24-hex string ids it could
// not find), ours find the documents and the assertions bite.

var superdeskDump = filepath.Join("..", "..", "sources", "sourcestest", "testdata", "superdesk")

// upstreamSecret is the conftest's AUTH_SERVER_SHARED_SECRET.
const upstreamSecret = "2kZOf0VI9T70vU9uMlKLyc5GlabxVgl6"

var base = []string{"_etag", "_type", "_updated", "_created", "_current_version"}

func TestUpstreamResources(t *testing.T) {
	// prodapi_app_with_data runs with PRODAPI_AUTH_ENABLED=False.
	in := start(t, "PRODAPI_SANDBOX", superdeskDump, "PRODAPI_AUTH_ENABLED", "false")
	lock4 := []string{"lock_user", "lock_time", "lock_session", "lock_action"}
	for _, tc := range []struct {
		resource string
		count    int
		excluded []string
	}{
		{"items", 7, append(slices.Concat(base, lock4), "fields_meta", "unique_id", "family_id", "event_id")},
		{"desks", 2, append(slices.Clone(base), "default_content_template", "working_stage", "incoming_stage", "desk_metadata", "content_expiry")},
		{"users", 2, append(slices.Clone(base), "password", "user_preferences", "session_preferences")},
		{"contacts", 3, []string{"_etag", "_type", "_updated", "_created", "_links"}},
		{"assignments", 4, slices.Concat(base, lock4)},
		{"events", 7, slices.Concat(base, lock4)},
		{"events_files", 2, base},
		{"events_history", 2, base},
		{"planning", 3, append(slices.Concat(base, lock4[:3]), "item_class", "flags")},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			// test_service_get / list count
			list := getList(t, in, "/prodapi/v1/"+tc.resource)
			if len(list.Items) != tc.count {
				t.Errorf("%d documents, want %d", len(list.Items), tc.count)
			}
			// test_readonly
			for _, method := range []string{"POST", "PATCH", "PUT", "DELETE"} {
				req, _ := http.NewRequest(method, in.base+"/prodapi/v1/"+tc.resource, strings.NewReader("{}"))
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != 405 {
					t.Errorf("%s: %d, want 405", method, res.StatusCode)
				}
			}
			// test_excluded_fields, list and detail (the first item's id)
			for _, item := range list.Items {
				assertNoKeys(t, "list item", item, tc.excluded)
			}
			id, _ := list.Items[0]["_id"].(string)
			status, _, body := in.get(t, "/prodapi/v1/"+tc.resource+"/"+url.PathEscape(id), "")
			if status != 200 {
				t.Fatalf("detail %s: %d %s", id, status, body)
			}
			var detail map[string]any
			json.Unmarshal(body, &detail)
			assertNoKeys(t, "detail", detail, tc.excluded)
		})
	}
}

type listBody struct {
	Items []map[string]any `json:"_items"`
	Meta  struct {
		Page, MaxResults, Total int
	} `json:"_meta"`
}

func getList(t *testing.T, in *instance, target string) listBody {
	t.Helper()
	status, _, body := in.get(t, target, "")
	var l listBody
	if err := json.Unmarshal(body, &l); status != 200 || err != nil {
		t.Fatalf("GET %s: %d %v %s", target, status, err, body)
	}
	return l
}

func assertNoKeys(t *testing.T, what string, doc map[string]any, excluded []string) {
	t.Helper()
	for _, k := range excluded {
		if _, ok := doc[k]; ok {
			t.Errorf("%s %v carries excluded %q", what, doc["_id"], k)
		}
	}
}

// test_items.py test_renditions and test_filters; test_desks.py and
// test_contacts.py test_filters; test_events_history.py's update.* keys.
func TestUpstreamAssertions(t *testing.T) {
	// The original's tests ran on its default base URL.
	in := start(t, "PRODAPI_SANDBOX", superdeskDump, "PRODAPI_AUTH_ENABLED", "false", "PRODAPI_URL", "http://localhost:5500")

	status, _, body := in.get(t, "/prodapi/v1/items/urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4-1d08-464a-90ac-90542dde4e90", "")
	var item struct {
		Associations map[string]struct {
			Renditions map[string]map[string]any `json:"renditions"`
		} `json:"associations"`
	}
	if err := json.Unmarshal(body, &item); status != 200 || err != nil {
		t.Fatalf("renditions item: %d %v", status, err)
	}
	rendition := func(media string, width, height, x, y float64) map[string]any {
		return map[string]any{"href": "http://localhost:5500/prodapi/v1/assets/" + media + ".jpg", "mimetype": "image/jpeg",
			"width": width, "height": height, "poi": map[string]any{"x": x, "y": y}}
	}
	got := item.Associations["editor_0"].Renditions
	for name, r := range got { // sizes and points of interest are the dump's own; check the rest exactly
		want := rendition(map[string]string{"baseImage": "5d553c343031e2855a2e5664", "original": "5d553c333031e2855a2e5662",
			"thumbnail": "5d553c343031e2855a2e5666", "viewImage": "5d553c343031e2855a2e5668"}[name], r["width"].(float64),
			r["height"].(float64), r["poi"].(map[string]any)["x"].(float64), r["poi"].(map[string]any)["y"].(float64))
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("rendition %s (-want +got):\n%s", name, diff)
		}
	}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"baseImage", "original", "thumbnail", "viewImage"}) {
		t.Errorf("renditions %v", names)
	}
	if !strings.Contains(string(body), `src=\"http://localhost:5500/prodapi/v1/assets/5d553c333031e2855a2e5662.jpg\"`) {
		t.Error("body_html href not rewritten")
	}

	for _, tc := range []struct {
		target, field, want string
	}{
		{`/prodapi/v1/items?source=` + url.QueryEscape(`{"query":{"filtered":{"filter":{"terms":{"task.desk":["7777777775ec40943b60e"]}}}}}`),
			"guid", "tag:localhost:5000:2019:1dbebe89-e808-43f5-a27c-91545dac896f"},
		{`/prodapi/v1/desks?where=` + url.QueryEscape(`{"name":"PROD"}`), "_id", "5d76113ab3af37dea3a2eb9e"},
		{`/prodapi/v1/contacts?source=` + url.QueryEscape(`{"query":{"filtered":{"filter":{"terms":{"first_name":["brett"]}}}}}`),
			"_id", "5d5e9d8c38d37783d9431800"},
		{`/prodapi/v1/contacts?source=` + url.QueryEscape(`{"query":{"filtered":{"filter":{"bool":{"must":{"term":{"is_active":false}}}}}}}`),
			"_id", "5d5e9d8c38d37783d94317ff"},
	} {
		l := getList(t, in, tc.target)
		if len(l.Items) != 1 || l.Items[0][tc.field] != tc.want {
			t.Errorf("GET %s: %d items, first %v; want exactly %s", tc.target, len(l.Items), l.Items, tc.want)
		}
	}

	history := getList(t, in, "/prodapi/v1/events_history")
	update, _ := history.Items[0]["update"].(map[string]any)
	for _, k := range []string{"_etag", "_links", "_status", "_updated", "_created"} {
		if _, ok := update[k]; ok {
			t.Errorf("events_history update carries %s", k)
		}
	}

	// Planning P1 links A1 then A2; the coverage sync shows A2's
	// current state on C1.
	status, _, body = in.get(t, "/prodapi/v1/planning/urn:newsml:localhost:5000:2019-09-10T15:47:04.367097:714ceeb4-c366-48af-b360-e7aefdf9941a", "")
	var p1 struct {
		Coverages []struct {
			AssignedTo map[string]any `json:"assigned_to"`
		} `json:"coverages"`
		Links struct {
			Assignments []map[string]any `json:"assignments"`
		} `json:"_links"`
	}
	if err := json.Unmarshal(body, &p1); status != 200 || err != nil {
		t.Fatalf("P1: %d %v", status, err)
	}
	var hrefs []any
	for _, a := range p1.Links.Assignments {
		hrefs = append(hrefs, a["href"])
	}
	if want := []any{"assignments/5d77afe64c3b49675964b0bd", "assignments/5d77b0244c3b49675964b0cd"}; !cmp.Equal(hrefs, want) {
		t.Errorf("P1 assignments %v, want %v", hrefs, want)
	}
	if len(p1.Coverages) == 0 || p1.Coverages[0].AssignedTo["state"] != "completed" {
		t.Errorf("P1 coverage C1 not synced to A2's state: %v", p1.Coverages)
	}
}

// test_auth.py, with the contract's 403 for a token lacking the scope.
func TestUpstreamAuth(t *testing.T) {
	in := start(t, "PRODAPI_SANDBOX", superdeskDump, "AUTH_SERVER_SHARED_SECRET", upstreamSecret)
	resources := []string{"items", "assignments", "contacts", "desks", "events", "planning", "users"}
	all := bearer(t, upstreamSecret, sources.AllScopes...)
	none := bearer(t, upstreamSecret)
	for _, r := range resources {
		// test_not_authenticated
		status, h, body := in.get(t, "/prodapi/v1/"+r, "")
		if status != 401 || !strings.Contains(string(body), `"_status":"ERR"`) || h.Get("WWW-Authenticate") != `Bearer realm="prodapi"` {
			t.Errorf("%s without a token: %d %s %v", r, status, body, h)
		}
		// test_scopes
		if status, _, _ := in.get(t, "/prodapi/v1/"+r, all); status != 200 {
			t.Errorf("%s with every scope: %d", r, status)
		}
		if status, h, body := in.get(t, "/prodapi/v1/"+r, none); status != 403 || string(body) != `{"_status":"ERR","_error":{"code":403,"message":"Invalid scope"}}` ||
			!strings.HasPrefix(h.Get("WWW-Authenticate"), `Bearer realm="prodapi", error="insufficient_scope", scope="`) {
			t.Errorf("%s with no scope: %d %s %v", r, status, body, h)
		}
	}
	// test_authenticated and test_scopes_partial
	if status, _, _ := in.get(t, "/prodapi/v1/items", bearer(t, upstreamSecret, "ARCHIVE_READ")); status != 200 {
		t.Errorf("items with ARCHIVE_READ: %d", status)
	}
	desks := bearer(t, upstreamSecret, "DESKS_READ")
	if status, _, _ := in.get(t, "/prodapi/v1/desks", desks); status != 200 {
		t.Errorf("desks with DESKS_READ: %d", status)
	}
	if status, h, _ := in.get(t, "/prodapi/v1/items", desks); status != 403 ||
		h.Get("WWW-Authenticate") != `Bearer realm="prodapi", error="insufficient_scope", scope="ARCHIVE_READ"` {
		t.Errorf("items with DESKS_READ: %d %v", status, h)
	}
	// test_bad_shared_key
	other := bearer(t, "7fZOf0VI9T70vU5uNlKLrc5GlabxVgl6", "ARCHIVE_READ")
	if status, h, body := in.get(t, "/prodapi/v1/items", other); status != 401 || string(body) != `{"_status":"ERR","_error":{"code":401,"message":"Please provide proper credentials"}}` ||
		h.Get("WWW-Authenticate") != `Bearer realm="prodapi", error="invalid_token", error_description="the token's signature is invalid"` {
		t.Errorf("token signed with another secret: %d %s %v", status, body, h)
	}
	// test_token_expired, without the sleep: a token whose exp has passed.
	expired, err := server.MintToken([]byte(upstreamSecret), "e2e", []string{"ARCHIVE_READ"}, time.Second, time.Now().Add(-2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if status, h, _ := in.get(t, "/prodapi/v1/items", "Bearer "+expired); status != 401 ||
		h.Get("WWW-Authenticate") != `Bearer realm="prodapi", error="invalid_token", error_description="the token has expired"` {
		t.Errorf("expired token: %d %v", status, h)
	}
}
