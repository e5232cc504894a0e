package query

import (
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A parameter kind puts a field path where a client could name it.
type paramKind struct {
	name   string
	search bool // only on search lists; false: every resource
	mongo  bool // only on document lists
	raw    func(path string) string
}

func jsonString(s string) string { return string(codec.AppendJSONString(nil, s)) }

// luceneEscape escapes a field name for query_string text.
func luceneEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`+-=&|><!(){}[]^"~*?:\/ `, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

var paramKinds = []paramKind{
	{name: "where equality", raw: func(p string) string { return qs("where", `{`+jsonString(p)+`:1}`) }},
	{name: "where $exists", mongo: true, raw: func(p string) string { return qs("where", `{`+jsonString(p)+`:{"$exists":true}}`) }},
	{name: "where in $or", mongo: true, raw: func(p string) string { return qs("where", `{"$or":[{`+jsonString(p)+`:1}]}`) }},
	{name: "where in $nor $and", mongo: true, raw: func(p string) string {
		return qs("where", `{"$nor":[{"$and":[{`+jsonString(p)+`:{"$ne":null}}]}]}`)
	}},
	{name: "where python", mongo: true, raw: func(p string) string { return qs("where", pyName(p)+` == 1`) }},
	{name: "where python or", mongo: true, raw: func(p string) string {
		return qs("where", `name == "x" or (a > 1 and `+pyName(p)+` != None)`)
	}},
	{name: "where python search", search: true, raw: func(p string) string { return qs("where", pyName(p)+` == "x"`) }},
	{name: "sort plain", raw: func(p string) string { return qs("sort", p) }},
	{name: "sort descending", raw: func(p string) string { return qs("sort", "-"+p) }},
	{name: "sort pairs", raw: func(p string) string { return qs("sort", `[(`+jsonString(p)+`, -1)]`) }},
	{name: "projection inclusive", raw: func(p string) string { return qs("projection", `{`+jsonString(p)+`:1}`) }},
	{name: "projection exclusive", raw: func(p string) string { return qs("projection", `{`+jsonString(p)+`:0}`) }},
	{name: "projections", search: true, raw: func(p string) string { return qs("projections", `[`+jsonString(p)+`]`) }},
	{name: "source term", search: true, raw: func(p string) string {
		return qs("source", `{"query":{"term":{`+jsonString(p)+`:"x"}}}`)
	}},
	{name: "source exists", search: true, raw: func(p string) string {
		return qs("source", `{"query":{"exists":{"field":`+jsonString(p)+`}}}`)
	}},
	{name: "source range in bool filter", search: true, raw: func(p string) string {
		return qs("source", `{"query":{"bool":{"filter":[{"range":{`+jsonString(p)+`:{"gte":1}}}]}}}`)
	}},
	{name: "source query_string fields", search: true, raw: func(p string) string {
		return qs("source", `{"query":{"query_string":{"query":"x","fields":[`+jsonString(p)+`]}}}`)
	}},
	{name: "source query_string text", search: true, raw: func(p string) string {
		return qs("source", `{"query":{"query_string":{"query":`+jsonString(luceneEscape(p)+`:x`)+`}}}`)
	}},
	{name: "source sort", search: true, raw: func(p string) string { return qs("source", `{"sort":[{`+jsonString(p)+`:"asc"}]}`) }},
	{name: "source sort string", search: true, raw: func(p string) string { return qs("source", `{"sort":[`+jsonString(p)+`]}`) }},
	{name: "source aggregation", search: true, raw: func(p string) string {
		return qs("source", `{"aggs":{"x":{"terms":{"field":`+jsonString(p)+`}}}}`)
	}},
	{name: "source _source list", search: true, raw: func(p string) string { return qs("source", `{"_source":[`+jsonString(p)+`]}`) }},
	{name: "source _source includes", search: true, raw: func(p string) string {
		return qs("source", `{"_source":{"includes":[`+jsonString(p)+`]}}`)
	}},
	{name: "source _source excludes", search: true, raw: func(p string) string {
		return qs("source", `{"_source":{"excludes":[`+jsonString(p)+`]}}`)
	}},
	{name: "q field", search: true, raw: func(p string) string { return qs("q", luceneEscape(p)+":x") }},
	{name: "q _exists_", search: true, raw: func(p string) string { return qs("q", "_exists_:"+luceneEscape(p)) }},
	{name: "df", search: true, raw: func(p string) string { return qs("q", "x", "df", p) }},
	{name: "df phrase", search: true, raw: func(p string) string { return qs("q", `"x y"`, "df", p) }},
	{name: "filter term", search: true, raw: func(p string) string { return qs("filter", `{"term":{`+jsonString(p)+`:"x"}}`) }},
	{name: "filter exists", search: true, raw: func(p string) string { return qs("filter", `{"exists":{"field":`+jsonString(p)+`}}`) }},
	{name: "filter nested sort", search: true, raw: func(p string) string {
		return qs("source", `{"sort":[{"x":{"order":"asc","nested":{"path":"n","filter":{"term":{`+jsonString(p)+`:1}}}}}]}`)
	}},
}

// variants are hostile spellings of a path at or under an excluded
// field x: below it, through array index segments, a multi-field suffix,
// other case.
func variants(x string) []string {
	vs := []string{x, x + ".a", x + ".a.b", x + ".0", x + ".0.a", x + ".email:notification.enabled", x + ".5f0c6c5c9d0e7a3f1b2c4d5e",
		x + ".keyword", strings.ToUpper(x), x + ".A"}
	segs := strings.Split(x, ".")
	for i := 1; i < len(segs); i++ {
		// a.0.b: element 0 of an array a, whose elements carry b.
		vs = append(vs, strings.Join(segs[:i], ".")+".0."+strings.Join(segs[i:], "."))
	}
	if len(segs) == 1 {
		vs = append(vs, x+"*") // a pattern matching x
	}
	return vs
}

// TestExcludedFieldsRefusedEverywhere: every path at or under every
// excluded field of every resource is refused (400) in every parameter
// that names fields.
func TestExcludedFieldsRefusedEverywhere(t *testing.T) {
	for _, r := range sources.Resources() {
		for _, x := range r.Excluded {
			if x == "_updated" || x == "_created" {
				continue // queryable timestamps; TestQueryableTimestamps
			}
			var prefixes []string
			prefixes = append(prefixes, "")
			for _, n := range r.Nested {
				prefixes = append(prefixes, n+".pic.", n+".0.")
			}
			for _, pre := range prefixes {
				for _, v := range variants(x) {
					path := pre + v
					for _, k := range paramKinds {
						if k.search && !r.Search || k.mongo && r.Search {
							continue
						}
						if path == "_type" && r.Search && renamesType[k.name] {
							// eve-elastic's fix_query renames the key _type
							// to _resource, the public resource name.
							continue
						}
						for _, id := range ids(k) {
							raw := k.raw(path)
							_, err := Parse(r, id, raw)
							if err == nil {
								t.Errorf("%s %s %q (detail %v): accepted %s", r.Name, k.name, path, id != "", raw)
								continue
							}
							if e, ok := err.(*Error); !ok || e.Status != 400 || !strings.Contains(e.Message, "cannot be used") {
								t.Errorf("%s %s %q: %v, want a 400 saying the field cannot be used", r.Name, k.name, path, err)
							}
						}
					}
				}
			}
		}
	}
}

// ids are the requests a kind is checked on: lists, and details too for
// the parameters details validate (search parameters are ignored there:
// nothing reaches a backend).
func ids(k paramKind) []string {
	if k.search {
		return []string{""}
	}
	return []string{"", "x"}
}

// renamesType are the kinds where a search resource reads the key _type
// as _resource.
var renamesType = map[string]bool{
	"where equality": true, "sort plain": true, "sort descending": true, "sort pairs": true,
	"where python search": true, "source term": true, "source range in bool filter": true, "source sort": true, "source sort string": true,
	"filter term": true, "filter nested sort": true,
}

// TestParamKindsAcceptUsableFields is the control of
// TestExcludedFieldsRefusedEverywhere: every kind accepts a field the
// resource returns, so a refusal there is about the field.
func TestParamKindsAcceptUsableFields(t *testing.T) {
	for _, r := range sources.Resources() {
		for _, path := range []string{"headline", "a.b", "a.0.b", "_updated", "Headline"} {
			for _, k := range paramKinds {
				if k.search && !r.Search || k.mongo && r.Search {
					continue
				}
				for _, id := range ids(k) {
					if _, err := Parse(r, id, k.raw(path)); err != nil {
						t.Errorf("%s %s %q: %v", r.Name, k.name, path, err)
					}
				}
			}
		}
	}
}

// pyName spells a path for a Python where: as a dotted name when it is
// one, else as a string (which Eve's parser takes as a name too).
func pyName(p string) string {
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" || seg[0] >= '0' && seg[0] <= '9' || strings.Trim(seg, "_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" || pyKeywords[seg] {
			return jsonString(p)
		}
	}
	return p
}
