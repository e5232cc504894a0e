package query

import (
	"strings"
	"testing"
)

func TestProjection(t *testing.T) {
	for _, tc := range []struct {
		name, res, raw string
		fields         sourcesProjection
		canon          string
	}{
		{"inclusive", "desks", qs("projection", `{"name":1,"members":true}`), proj(false, "members", "name"), `{"members":1,"name":1}`},
		{"zeros ignored when inclusive", "desks", qs("projection", `{"name":1,"x":0}`), proj(false, "name"), `{"name":1}`},
		{"exclusive", "desks", qs("projection", `{"name":0,"x":false}`), proj(true, "name", "x"), `{"name":0,"x":0}`},
		{"exclusive _id dropped", "desks", qs("projection", `{"_id":0,"x":0}`), proj(true, "x"), `{"x":0}`},
		{"only _id excluded is no projection", "desks", qs("projection", `{"_id":0}`), proj(false), ``},
		{"inclusive _id kept", "desks", qs("projection", `{"_id":1}`), proj(false, "_id"), `{"_id":1}`},
		{"empty", "desks", qs("projection", `{}`), proj(false), ``},
		{"dotted", "items", qs("projection", `{"task.desk":1}`), proj(false, "task.desk"), `{"task.desk":1}`},
		{"projections alias on a search list", "items", qs("projections", `["headline","slugline"]`), proj(false, "headline", "slugline"), `{"headline":1,"slugline":1}`},
		{"projection wins over projections", "items", qs("projections", `["headline"]`, "projection", `{"slugline":1}`), proj(false, "slugline"), `{"slugline":1}`},
		{"projections ignored on document lists", "desks", qs("projections", `[1]`), proj(false), ``},
		{"queryable timestamp", "users", qs("projection", `{"_updated":1}`), proj(false, "_updated"), `{"_updated":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resource(t, tc.res)
			q, err := Parse(r, "", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			var params []sourcesParam
			if tc.canon != "" {
				params = []sourcesParam{p("projection", tc.canon)}
			}
			w := want{fields: tc.fields, params: params}
			if r.Search {
				w.search = defaultBody(`{"bool":{}}`, js(sortBody(r.DefaultSort)), 25)
			} else {
				w.sort = r.DefaultSort
			}
			check(t, q, w)
		})
	}
	for _, tc := range []struct {
		name, res, raw string
		want           refusal
	}{
		{"expression", "users", qs("projection", `{"leak":"$password"}`), refusal{400, `projection: the value of "leak" must be 0, 1, true or false`}},
		{"operator", "users", qs("projection", `{"a":{"$concat":["$password"]}}`), refusal{400, "must be 0, 1"}},
		{"function", "users", qs("projection", `{"a":{"$function":{}}}`), refusal{400, "must be 0, 1"}},
		{"two", "users", qs("projection", `{"a":2}`), refusal{400, "must be 0, 1"}},
		{"float", "users", qs("projection", `{"a":1.0}`), refusal{400, "must be 0, 1"}},
		{"string one", "users", qs("projection", `{"a":"1"}`), refusal{400, "must be 0, 1"}},
		{"null", "users", qs("projection", `{"a":null}`), refusal{400, "must be 0, 1"}},
		{"hidden inclusive", "users", qs("projection", `{"password":1}`), refusal{400, `projection: field "password" cannot be used`}},
		{"hidden exclusive", "users", qs("projection", `{"password":0}`), refusal{400, `cannot be used`}},
		{"array", "desks", qs("projection", `["name"]`), refusal{400, "projection: must be a JSON object of 0/1, not an array"}},
		{"empty array", "desks", qs("projection", `[]`), refusal{400, "projection: must be a JSON object"}},
		{"array on a search list", "items", qs("projection", `["headline"]`), refusal{400, "projection: must be a JSON object"}},
		{"array beside projections", "items", qs("projections", `["headline"]`, "projection", `["slugline"]`), refusal{400, "projection: must be a JSON object"}},
		{"string", "desks", qs("projection", `"name"`), refusal{400, "projection: must be a JSON object"}},
		{"hidden array", "users", qs("projection", `["user_preferences"]`), refusal{400, `must be a JSON object`}},
		{"hidden dotted", "users", qs("projection", `{"session_preferences.x":1}`), refusal{400, `cannot be used`}},
		{"hidden pattern", "items", qs("projection", `{"lock_*":1}`), refusal{400, `cannot be used`}},
		{"hidden via projections", "items", qs("projections", `["lock_user"]`), refusal{400, `cannot be used`}},
		{"$ field", "users", qs("projection", `{"$where":1}`), refusal{400, "starting with $"}},
		{"overlap", "desks", qs("projection", `{"a":1,"a.b":1}`), refusal{400, `fields "a" and "a.b" overlap`}},
		{"not an object", "desks", qs("projection", `1`), refusal{400, "projection: must be a JSON object"}},
		{"array of numbers", "desks", qs("projection", `[1]`), refusal{400, "projection: must be a JSON object"}},
		{"projections of numbers", "items", qs("projections", `[1]`), refusal{400, "projections: an array must hold field names"}},
		{"bad JSON", "desks", qs("projection", `{`), refusal{400, "projection: invalid JSON"}},
		{"duplicate", "desks", qs("projection", `{"a":1,"a":0}`), refusal{400, "duplicate key"}},
		{"projections object", "items", qs("projections", `{"a":1}`), refusal{400, "projections: must be a JSON array"}},
		{"projections bad JSON", "items", qs("projections", `[`), refusal{400, "projections: invalid JSON"}},
		{"projections number", "items", qs("projections", `3`), refusal{400, "projections: must be a JSON array"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", tc.raw)
			checkErr(t, err, tc.want)
		})
	}
}

func TestHiddenField(t *testing.T) {
	for _, tc := range []struct {
		res, name string
		hidden    bool
	}{
		{"users", "password", true},
		{"users", "passwor", false},
		{"users", "pass*", true},
		{"users", "*word", true},
		{"users", "p?ssword", true},
		{"users", "*", true},
		{"users", "user_*", true},
		{"users", "*_preferences.x", true},
		{"users", "password.*", true},
		{"users", "password*keyword", true},
		{"users", "pass*.raw", true},
		{"users", "user*name", true}, // * spans dots: user_preferences.name
		{"users", "username*", false},
		{"users", "_up*", false}, // only _updated: queryable
		{"users", "_*", true},    // _etag
		{"events_history", "upd*", true},
		{"events_history", "update.*", true},
		{"events_history", "update._e*", true},
		{"events_history", "update.n*", false},
		{"events_history", "update.na?e", false},
		{"items", "lock_*", true},
		{"items", "headline*", false},
		{"items", "*line", true}, // could be lock_user.<sub-field>line
		{"items", "associations.*", true},
		{"items", "associations.*.lock_user", true},
		{"items", "associations.editor_0.lock_*", true},
		{"items", "associations.*.headline", true},
		{"items", "associations.editor_?.headline", false},
		{"items", "associations.ed*0.*ock_s*", true},
		{"items", "assoc*headline", true},
		{"items", "associations.?.headline", false},
		{"items", "head*", false},
		{"items", "body_*", false},
		{"items", "assoc*lock_time", true},
		{"items", "fields_m*", true},
		{"contacts", "_l*", true},
		{"contacts", "first_*", false},
	} {
		t.Run(tc.res+" "+tc.name, func(t *testing.T) {
			if got := hiddenField(resource(t, tc.res), tc.name); got != tc.hidden {
				t.Errorf("hiddenField(%s, %q) = %v, want %v", tc.res, tc.name, got, tc.hidden)
			}
		})
	}
}

func TestPathProblem(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"a", ""}, {"a.b.c", ""}, {"_id", ""}, {"a-b", ""}, {"a$", ""},
		{"", "empty field name"}, {".a", "empty segment"}, {"a.", "empty segment"},
		{"$a", "starting with $"}, {"a.$b", "starting with $"}, {"a\x00", "NUL"},
		{strings.Repeat("x", 257), "longer than 256"},
	} {
		if got := pathProblem(tc.path); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("pathProblem(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
