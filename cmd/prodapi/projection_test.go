package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prodapi/prodapi/sources"
)

// A newsroom stores fields outside a resource's projection (force_unlock,
// its own internal fields): through a client's projection, inclusive or
// exclusive, on a list or a detail, none of them comes back, on the
// sandbox and on the platform's adapters alike. Without a projection a
// list answers as the original's does (every stored field but the
// excluded ones) and a detail keeps to the resource's projection.
func TestProjectionInsideResource(t *testing.T) {
	dir := newsroomWithOutsideFields(t)
	onPlatform, _, _ := platformOf(t, dir, "1m")
	backends := map[string]*instance{
		"sandbox":  start(t, "PRODAPI_SANDBOX", dir),
		"platform": onPlatform,
	}
	tok := bearer(t, devSecret, sources.AllScopes...)
	for _, rc := range []struct {
		resource string
		in, out  string // a field inside the resource's projection, one to exclude
	}{
		{resource: "items", in: "headline", out: "state"},
		{resource: "contacts", in: "last_name", out: "notes"},
	} {
		res, _ := sources.ResourceByName(rc.resource)
		inside := map[string]bool{"_links": true}
		for _, f := range res.Projection {
			inside[f] = true
		}
		projections := []string{
			`{"` + rc.in + `": 1, "force_unlock": 1}`,
			`{"force_unlock": 1}`,
			`{"x_newsroom.note": 1}`,
			`{"` + rc.out + `": 0}`,
			`{"force_unlock": 0}`,
		}
		listOnly := []string{ // search lists only
			"projections=" + url.QueryEscape(`["`+rc.in+`", "force_unlock"]`),
			"source=" + url.QueryEscape(`{"_source": ["`+rc.in+`", "force_unlock", "x_newsroom"]}`),
			"source=" + url.QueryEscape(`{"_source": {"excludes": ["`+rc.in+`"]}}`),
		}
		for name, in := range backends {
			list := func(query string) listBody {
				t.Helper()
				return getListAuth(t, in, "/prodapi/v1/"+rc.resource+"?max_results=50&"+query, tok)
			}
			detail := func(id, query string) map[string]any {
				t.Helper()
				status, _, body := in.get(t, "/prodapi/v1/"+rc.resource+"/"+url.PathEscape(id)+"?"+query, tok)
				var d map[string]any
				if err := json.Unmarshal(body, &d); status != 200 || err != nil {
					t.Fatalf("%s: GET %s/%s?%s: %d %s", name, rc.resource, id, query, status, body)
				}
				return d
			}
			outside := func(where string, d map[string]any) {
				t.Helper()
				for k := range d {
					if !inside[k] {
						t.Errorf("%s: %s: %s comes back, outside the %s projection", name, where, k, rc.resource)
					}
				}
			}

			// Without a projection: the list keeps every stored field, the
			// detail the resource's projection.
			all := list("")
			id, _ := all.Items[0]["_id"].(string)
			if _, ok := all.Items[0]["force_unlock"]; !ok {
				t.Errorf("%s: %s list without a projection lacks force_unlock, which the original's lists return", name, rc.resource)
			}
			outside(rc.resource+"/"+id+" without a projection", detail(id, ""))

			for _, p := range projections {
				query := "projection=" + url.QueryEscape(p)
				for _, d := range list(query).Items {
					outside(rc.resource+"?"+query, d)
				}
				outside(rc.resource+"/"+id+"?"+query, detail(id, query))
			}
			for _, query := range listOnly {
				for _, d := range list(query).Items {
					outside(rc.resource+"?"+query, d)
				}
			}
			// The client's fields inside the projection are served.
			query := "projection=" + url.QueryEscape(`{"`+rc.in+`": 1, "force_unlock": 1}`)
			if d := detail(id, query); d[rc.in] == nil || !slices.Contains([]int{2, 3}, len(d)) {
				t.Errorf("%s: %s/%s?%s = %v, want _id, %s (and _links)", name, rc.resource, id, query, d, rc.in)
			}
			query = "projection=" + url.QueryEscape(`{"`+rc.out+`": 0}`)
			for _, d := range list(query).Items {
				if _, ok := d[rc.out]; ok {
					t.Errorf("%s: %s?%s still carries %s", name, rc.resource, query, rc.out)
				}
			}
		}
	}
}

// newsroomWithOutsideFields writes the sample newsroom to a directory,
// with two fields outside the items' and contacts' projections on every
// item and contact: force_unlock, which Superdesk stores, and a
// newsroom's own x_newsroom.
func newsroomWithOutsideFields(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(sampleDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the sample's files: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if base := filepath.Base(f); base == "archive.json" || base == "contacts.json" {
			var docs []json.RawMessage
			if err := json.Unmarshal(data, &docs); err != nil {
				t.Fatal(err)
			}
			for i, d := range docs {
				d = bytes.TrimSpace(d)
				docs[i] = append([]byte(`{"force_unlock": true, "x_newsroom": {"note": "internal"}, `), d[1:]...)
			}
			if data, err = json.Marshal(docs); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
