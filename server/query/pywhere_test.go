package query

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// TestPyWhere: each Python where is the query its JSON twin is, down to
// the canonical parameters (and so the cache key and the links).
func TestPyWhere(t *testing.T) {
	for _, tc := range []struct {
		res, py, json string
	}{
		{"desks", `name=="Arts"`, `{"name":"Arts"}`},
		{"desks", `name == 'Arts'`, `{"name":"Arts"}`},
		{"desks", `name==Arts`, `{"name":"Arts"}`}, // Eve reads a bare name as its text
		{"desks", `"name"=="Arts"`, `{"name":"Arts"}`},
		{"desks", `u"name"==r"A\rts"`, `{"name":"A\\rts"}`},
		{"desks", `name=="A\x72t\u0073\n\'"`, `{"name":"Arts\n'"}`},
		{"desks", `members.user != "x"`, `{"members.user":{"$ne":"x"}}`},
		{"desks", `priority > 2`, `{"priority":{"$gt":2}}`},
		{"desks", `priority >= 2.5`, `{"priority":{"$gte":2.5}}`},
		{"desks", `priority < -3`, `{"priority":{"$lt":-3}}`},
		{"desks", `priority <= 1_000`, `{"priority":{"$lte":1000}}`},
		{"desks", `priority == 0x1f`, `{"priority":31}`},
		{"desks", `priority == 1e3`, `{"priority":1000.0}`},
		{"desks", `priority > 2 and name != "x"`, `{"$and":[{"priority":{"$gt":2}},{"name":{"$ne":"x"}}]}`},
		{"desks", `a == 1 or b == 2 or c == 3`, `{"$or":[{"a":1},{"b":2},{"c":3}]}`},
		{"desks", `a == 1 and b == 2 or c == 3`, `{"$or":[{"$and":[{"a":1},{"b":2}]},{"c":3}]}`},
		{"desks", `a == 1 and (b == 2 or c == 3)`, `{"$and":[{"a":1},{"$or":[{"b":2},{"c":3}]}]}`},
		{"desks", `(a == 1 and b == 2) and c == 3`, `{"$and":[{"$and":[{"a":1},{"b":2}]},{"c":3}]}`},
		{"desks", `((a == 1))`, `{"a":1}`},
		{"desks", `a == True and b == False and c == None`, `{"$and":[{"a":true},{"b":false},{"c":null}]}`},
		{"desks", `a == [1, "x", None,]`, `{"a":[1,"x",null]}`},
		{"desks", `a == []`, `{"a":[]}`},
		{"desks", `_id == ObjectId("5f0c6c5c9d0e7a3f1b2c4d5e")`, `{"_id":"5f0c6c5c9d0e7a3f1b2c4d5e"}`},
		{"desks", `_updated > datetime(2026, 11, 20)`, `{"_updated":{"$gt":"2026-11-20T00:00:00+0000"}}`},
		{"desks", `_updated >= datetime(2026, 11, 20, 9, 15, 30)`, `{"_updated":{"$gte":"2026-11-20T09:15:30+0000"}}`},
		{"desks", "a == 1 \\\n and b == 2", `{"$and":[{"a":1},{"b":2}]}`},
		{"desks", "(a == 1\n and b == 2)\n", `{"$and":[{"a":1},{"b":2}]}`},
		{"desks", "\n\r\na == 1 \n ", `{"a":1}`},
		{"users", `username == "jo"`, `{"username":"jo"}`},
		{"events_history", `operation == "create"`, `{"operation":"create"}`},
		// Search lists: field equality, as with JSON.
		{"items", `headline == "Arts"`, `{"headline":"Arts"}`},
		{"contacts", `first_name == "Jo"`, `{"first_name":"Jo"}`},
	} {
		t.Run(tc.res+" "+tc.py, func(t *testing.T) {
			r := resource(t, tc.res)
			for _, id := range []string{"", "x"} {
				qp, err := Parse(r, id, qs("where", tc.py))
				if err != nil {
					t.Fatalf("python: %v", err)
				}
				qj, err := Parse(r, id, qs("where", tc.json))
				if err != nil {
					t.Fatalf("json: %v", err)
				}
				if diff := cmp.Diff(qj, qp, docCmp); diff != "" {
					t.Errorf("different queries (-json +python):\n%s", diff)
				}
				checkInvariants(t, qp)
			}
		})
	}
}

// TestPyWhereRefused: what Eve's visitor did not translate, or translated
// wrongly, is a 400 that says why; so is everything the JSON form
// refuses.
func TestPyWhereRefused(t *testing.T) {
	deep := strings.Repeat("(", 201) + "a == 1" + strings.Repeat(")", 201)
	deepGroups := "a == 1"
	for range 17 {
		deepGroups = "a == 1 and (" + deepGroups + " or b == 2)"
	}
	for _, tc := range []struct {
		res, py, want string
	}{
		{"desks", `not a == 1`, `"not" is not supported`},
		{"desks", `b == 1 and not a == 1`, `"not" is not supported`},
		{"desks", `a in [1, 2]`, `"in" is not supported`},
		{"desks", `a not in [1]`, `"not" is not supported`},
		{"desks", `a is None`, `"is" is not supported`},
		{"desks", `1 < a < 3`, `expected a comparison`},
		{"desks", `a < 1 < 3`, `chained comparisons`},
		{"desks", `1 == a`, `expected a comparison`},
		{"desks", `a`, `expected a comparison operator`},
		{"desks", `a == 1 +`, `unexpected "+"`},
		{"desks", `a == 1 + 2`, `unexpected "+"`},
		{"desks", `a == b + 1`, `unexpected "+"`},
		{"desks", `a == f(1)`, `unknown function "f"`},
		{"desks", `a == __import__("os")`, `unknown function "__import__"`},
		{"desks", `a == ObjectId("xyz")`, `not 24 hex digits`},
		{"desks", `a == ObjectId()`, `ObjectId takes one string`},
		{"desks", `a == datetime(2026, 2, 30)`, `not a valid date`},
		{"desks", `a == datetime(2026, 2)`, `datetime takes year`},
		{"desks", `a == datetime(2026, 2, 3, 4, 5, 6, 7)`, `datetime takes year`},
		{"desks", `a == datetime(2026, 2, "3")`, `datetime takes integers`},
		{"desks", `a == datetime(2026, 2, 3, tzinfo=1)`, `unexpected "tzinfo", expected a literal argument`},
		{"desks", `a = 1`, `unexpected "="`},
		{"desks", `a == 1; b == 2`, `unexpected ";"`},
		{"desks", "a == 1\nb == 2", `one expression only`},
		{"desks", ` a == 1`, `unexpected indent`},
		{"desks", "\n a == 1", `unexpected indent`},
		{"desks", `a == "x`, `unterminated string`},
		{"desks", `a == """x"""`, `triple-quoted`},
		{"desks", `a == b"x"`, `"b"-prefixed strings`},
		{"desks", `a == f"{x}"`, `"f"-prefixed strings`},
		{"desks", `a == "\N{BULLET}"`, `\N{...}`},
		{"desks", `a == "\ud800"`, `is not a character`},
		{"desks", `a == "\xff"`, ``}, // U+00FF is fine
		{"desks", `a == 012`, `leading zeros`},
		{"desks", `a == 1__0`, `invalid number`},
		{"desks", `a == 1j`, `invalid number`},
		{"desks", `a == 99999999999999999999`, `out of range`},
		{"desks", `a == 1e999`, `out of range`},
		{"desks", `a == [1, 2`, `expected "," or "]"`},
		{"desks", `a == (1, 2)`, `expected a value`},
		{"desks", `a == {"$gt": 1}`, `expected a value`},
		{"desks", `a.0 == 1`, `expected a comparison operator`},
		{"desks", `é == 1`, `unexpected "é"`},
		{"desks", `aé == 1`, `names must be ASCII`},
		{"desks", `a == 1 and`, `unexpected end`},
		{"desks", `(a == 1`, `expected ")"`},
		{"desks", `a == 1)`, `unexpected ")"`},
		{"desks", deep, `too many nested parentheses`},
		{"desks", deepGroups, `nested more than 32 levels deep`},
		// The JSON form's own checks hold.
		{"desks", `"$where" == "1"`, `operator "$where" is not allowed`},
		{"desks", `"$foo" == "1"`, `unknown operator "$foo"`},
		{"desks", `"a.$b" == 1`, `starting with $`},
		{"desks", `"" == 1`, `empty field name`},
		{"users", `password == "x"`, `field "password" cannot be used`},
		{"users", `session_preferences.x == 1`, `cannot be used`},
		{"users", `"user_preferences.email:notification.enabled" == True`, `cannot be used`},
		{"events_history", `"update.0._etag" == "x"`, `cannot be used`},
		{"items", `lock_user == "x"`, `cannot be used`},
		{"items", `a > 1`, `field equality only`},
		{"items", `a == 1 and b == 2`, `field equality only`},
		// Neither JSON nor Python: the JSON error when it looks like JSON.
		{"desks", `{"a": 1`, `invalid JSON`},
		{"desks", `["a"`, `invalid JSON`},
		{"desks", " \n {\"a\": 1", `invalid JSON`},
		{"desks", `"a" == "b`, `unterminated string`},
	} {
		t.Run(tc.res+" "+tc.py, func(t *testing.T) {
			r := resource(t, tc.res)
			_, err := Parse(r, "", qs("where", tc.py))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			qe, ok := errors.AsType[*Error](err)
			if !ok || qe.Status != http.StatusBadRequest || !strings.Contains(qe.Message, tc.want) {
				t.Fatalf("err = %v, want a 400 with %q", err, tc.want)
			}
		})
	}
}

// TestPyWhereSameKey: the canonical parameters, from which the cache key
// and the links are built, are the same for the two spellings.
func TestPyWhereSameKey(t *testing.T) {
	r := resource(t, "desks")
	qp, err := Parse(r, "", qs("where", `name=="Arts"`, "max_results", "5"))
	if err != nil {
		t.Fatal(err)
	}
	qj, err := Parse(r, "", qs("max_results", "5", "where", `{"name":"Arts"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []sources.Param{{Name: "where", Value: `{"name":"Arts"}`}}
	if !cmp.Equal(qp.Params, want) || !cmp.Equal(qj.Params, want) {
		t.Errorf("params: python %v, json %v, want %v", qp.Params, qj.Params, want)
	}
}

// FuzzPyWhere feeds Python-syntax where values: whatever the input, no
// panic, a refusal is a 400, and an accepted where is exactly the query
// its canonical JSON spelling gives.
func FuzzPyWhere(f *testing.F) {
	f.Fuzz(func(t *testing.T, where string) {
		fuzzParse(t, []string{"users", "events_history", "items"}, "", "where", where)
		d, err := parsePyWhere(where)
		if err != nil {
			if qe, ok := errors.AsType[*Error](err); !ok || qe.Status != http.StatusBadRequest || qe.Message == "" {
				t.Fatalf("error %#v", err)
			}
			return
		}
		for _, name := range []string{"users", "desks", "items"} {
			r := resource(t, name)
			qp, perr := Parse(r, "", qs("where", where))
			qj, jerr := Parse(r, "", qs("where", string(codec.AppendJSON(nil, d))))
			if (perr == nil) != (jerr == nil) {
				t.Fatalf("%s: python %v, its JSON %v", name, perr, jerr)
			}
			if perr != nil {
				if perr.Error() != jerr.Error() {
					t.Fatalf("%s: python refused with %q, its JSON with %q", name, perr, jerr)
				}
				continue
			}
			if diff := cmp.Diff(qj, qp, docCmp); diff != "" {
				t.Fatalf("%s: different queries (-json +python):\n%s", name, diff)
			}
		}
	})
}

// BenchmarkParsePyWhere parses a document list request whose where is
// Python syntax: a failed JSON attempt, the Python parse, and the JSON
// path it is then sent through. Compare BenchmarkParseWhere.
func BenchmarkParsePyWhere(b *testing.B) {
	res, _ := sources.ResourceByName("desks")
	raw := qs("where", `name == "Sports" or name == "Politics" or members.user == ObjectId("5d76113ab3af37dea3a2eb92")`,
		"sort", `[("name", 1), ("_id", -1)]`, "projection", `{"name":1,"members":1}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(res, "", raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHidden checks a deep path against every excluded field of
// items, nested ones included: the cost each field name pays.
func BenchmarkHidden(b *testing.B) {
	res, _ := sources.ResourceByName("items")
	b.ReportAllocs()
	for b.Loop() {
		if hiddenField(res, "associations.featuremedia.renditions.0.href") {
			b.Fatal("hidden")
		}
	}
}
