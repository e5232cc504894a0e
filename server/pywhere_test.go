package server_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
)

// TestPythonWhere: a Python-syntax where (Eve's fallback when where is
// not JSON) is its JSON twin: the same cache entry (the second spelling
// is a hit on what the first stored) and the same body, links included.
func TestPythonWhere(t *testing.T) {
	ts := newOAServer(t, nil)
	all := oaToken(t, sources.AllScopes...)
	for _, tc := range []struct {
		path, json, python string
	}{
		{"/desks", `{"name":"Sport"}`, `name=="Sport"`},
		{"/desks", `{"$or":[{"name":"Sport"},{"name":{"$gt":"S"}}]}`, `name == 'Sport' or name > "S"`},
		{"/users", `{"username":{"$ne":"nobody"}}`, `username != "nobody"`},
	} {
		first := oaDo(t, ts.URL, "json", "GET", oaPrefix+tc.path+"?"+oaQuery("where", tc.json), "Authorization", all)
		second := oaDo(t, ts.URL, "python", "GET", oaPrefix+tc.path+"?"+oaQuery("where", tc.python), "Authorization", all)
		if first.status != 200 || second.status != 200 {
			t.Fatalf("%s: json %d, python %d: %s", tc.python, first.status, second.status, second.body)
		}
		if !bytes.Equal(first.body, second.body) || !bytes.Contains(first.body, []byte(`"_id"`)) {
			t.Errorf("%s: bodies differ or are empty:\n%s\n%s", tc.python, first.body, second.body)
		}
		if cs := second.header.Get("Cache-Status"); !strings.Contains(cs, "hit") {
			t.Errorf("%s: Cache-Status %q, want a hit on the JSON spelling's entry", tc.python, cs)
		}
	}
	for _, where := range []string{`not name == "Sport"`, `password == "x"`, `name in ["Sport"]`, `name == "Sport" or`} {
		target := oaPrefix + "/users?" + oaQuery("where", where)
		if x := oaDo(t, ts.URL, where, "GET", target, "Authorization", all); x.status != 400 || !bytes.Contains(x.body, []byte(`"_status":"ERR"`)) {
			t.Errorf("%s: %d %s, want a 400 envelope", where, x.status, x.body)
		}
	}
}
