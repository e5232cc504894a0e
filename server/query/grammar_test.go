package query

import (
	"math/rand/v2"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A treeGen builds Elasticsearch bodies and Mongo filters that are mostly
// well-formed, from a stream of choices, so fuzzing explores the accepting
// paths (and their hostile neighbours) instead of JSON syntax errors.
type treeGen struct {
	data []byte
	i    int
}

func (g *treeGen) n(k int) int {
	if g.i >= len(g.data) || k <= 1 {
		return 0
	}
	b := g.data[g.i]
	g.i++
	return int(b) % k
}

func (g *treeGen) pick(xs ...string) string { return xs[g.n(len(xs))] }

var genFields = []string{"headline", "type", "urgency", "task.desk", "subject.qcode", "_updated",
	"slugline", "lock_user", "lock_*", "associations.x.lock_time", "_type", "*", "head*", "password",
	"user_preferences.x", "highlight", "script", "flags.x", "coverages.a", "_planning_schedule",
	"a..b", "$x", "", "update._etag", "update.name", "members.user", "name", "unique_id.keyword"}

func (g *treeGen) field() string { return genFields[g.n(len(genFields))] }

func (g *treeGen) scalar() any {
	switch g.n(7) {
	case 0:
		return g.pick("text", "lock_user:x", "a b", `"q"`, "2019-01-01T00:00:00+0000", "5d76113ab3af37dea3a2eb92")
	case 1:
		return int64(g.n(5) - 1)
	case 2:
		return 1.5
	case 3:
		return g.n(2) == 0
	case 4:
		return nil
	case 5:
		return int64(g.n(256) * 50)
	}
	return g.pick("asc", "desc", "AND", "or", "max", "now-1d")
}

func (g *treeGen) value(depth int) any {
	if depth > 2 {
		return g.scalar()
	}
	switch g.n(6) {
	case 0:
		return []any{g.scalar(), g.scalar()}
	case 1:
		return sources.D(g.field(), g.scalar())
	}
	return g.scalar()
}

func (g *treeGen) text() string {
	parts := []string{"flood", "headline:storm", "lock_user:x", `"a lock_user:b"`, `/x\/ lock_session:y/`,
		"_exists_:slugline", "_exists_:lock_time", `[a TO b]`, `lock\_user:z`, "AND", "(", ")", `\`, "*:x"}
	s := ""
	for range g.n(4) + 1 {
		s += parts[g.n(len(parts))] + " "
	}
	return s
}

func (g *treeGen) clauses(depth int) any {
	if g.n(3) == 0 {
		return g.q(depth + 1)
	}
	arr := []any{}
	for range g.n(3) {
		arr = append(arr, g.q(depth+1))
	}
	return arr
}

func (g *treeGen) q(depth int) any {
	if depth > 5 {
		return sources.D("term", sources.D(g.field(), g.scalar()))
	}
	f := g.field()
	switch g.n(26) {
	case 0:
		b := sources.D()
		for range g.n(4) + 1 {
			b.Set(g.pick("must", "filter", "should", "must_not", "minimum_should_match", "boost", "_name", "x"), g.clauses(depth))
		}
		return sources.D("bool", b)
	case 1:
		return sources.D("term", sources.D(f, g.scalar()))
	case 2:
		return sources.D("term", sources.D(f, sources.D("value", g.scalar(), g.pick("boost", "case_insensitive", "x"), g.scalar())))
	case 3:
		return sources.D("terms", sources.D(f, []any{g.scalar(), g.scalar()}))
	case 4:
		return sources.D("terms", sources.D(f, sources.D("index", "users", "id", "1", "path", "password")))
	case 5:
		return sources.D("match", sources.D(f, g.value(depth)))
	case 6:
		return sources.D(g.pick("match_phrase", "match_phrase_prefix", "prefix", "wildcard"), sources.D(f, g.value(depth)))
	case 7:
		return sources.D("range", sources.D(f, sources.D(g.pick("gt", "gte", "from", "to"), g.scalar(), g.pick("lt", "lte", "include_lower", "format"), g.scalar())))
	case 8:
		return sources.D("exists", sources.D("field", f))
	case 9:
		return sources.D("ids", sources.D("values", []any{g.scalar()}))
	case 10:
		qs := sources.D("query", g.text())
		if g.n(2) == 0 {
			qs.Set(g.pick("default_field", "fields", "quote_field_suffix", "lenient"), g.pick(f, "_user"))
		}
		return sources.D(g.pick("query_string", "simple_query_string"), qs)
	case 11:
		return sources.D("multi_match", sources.D("query", "x", "fields", []any{f, "headline^2"}))
	case 12:
		return sources.D("nested", sources.D("path", f, g.pick("query", "filter"), g.q(depth+1)))
	case 13:
		return sources.D("constant_score", sources.D("filter", g.q(depth+1)))
	case 14:
		return sources.D("dis_max", sources.D("queries", []any{g.q(depth + 1)}))
	case 15:
		return sources.D("filtered", sources.D("query", g.q(depth+1), "filter", g.clauses(depth)))
	case 16:
		return sources.D(g.pick("and", "or"), g.clauses(depth))
	case 17:
		if g.n(2) == 0 {
			return sources.D("not", sources.D("filter", g.q(depth+1)))
		}
		return sources.D("not", g.q(depth+1))
	case 18:
		return sources.D("query", g.q(depth+1))
	case 19:
		return sources.D(g.pick("script", "function_score", "wrapper", "more_like_this", "percolate", "fuzzy"), sources.D("x", 1))
	case 20:
		return sources.D("and", g.clauses(depth), "not", g.q(depth+1))
	case 21:
		return sources.D("term", sources.D(f, 1), "match", sources.D(f, "x"))
	case 22:
		return sources.D("match_all", sources.D())
	case 23:
		return sources.D()
	case 24:
		return g.scalar()
	}
	return sources.D("nested", sources.D("path", f, "query", g.q(depth+1), "inner_hits", sources.D()))
}

func (g *treeGen) sort() any {
	var arr []any
	for range g.n(3) + 1 {
		switch g.n(5) {
		case 0:
			arr = append(arr, g.field())
		case 1:
			arr = append(arr, sources.D(g.field(), g.pick("asc", "DESC", "up")))
		case 2:
			arr = append(arr, sources.D(g.field(), sources.D("order", "desc", g.pick("missing", "mode", "unmapped_type", "script"), g.scalar())))
		case 3:
			arr = append(arr, sources.D(g.field(), sources.D("nested", sources.D("path", g.field(), "filter", g.q(2)))))
		default:
			arr = append(arr, sources.D(g.pick("_score", "_doc", "_script"), sources.D("order", "asc")))
		}
	}
	return arr
}

func (g *treeGen) aggs(depth int) any {
	a := sources.D()
	for range g.n(2) + 1 {
		t := sources.D("field", g.field())
		if g.n(2) == 0 {
			t.Set("size", int64(g.n(7)*100))
		}
		if g.n(3) == 0 {
			t.Set(g.pick("order", "script", "include"), sources.D(g.pick("_count", "_term", "x"), "desc"))
		}
		agg := sources.D(g.pick("terms", "terms", "top_hits"), t)
		if depth < 2 && g.n(2) == 0 {
			agg.Set(g.pick("aggs", "aggregations"), g.aggs(depth+1))
		}
		a.Set(g.pick("a", "b", "script", "x>y"), agg)
	}
	return a
}

func (g *treeGen) source() *sources.Doc {
	d := sources.D()
	for range g.n(5) + 1 {
		switch g.n(12) {
		case 0, 1, 2:
			d.Set("query", g.q(0))
		case 3:
			d.Set("sort", g.sort())
		case 4:
			d.Set(g.pick("size", "from"), int64(g.n(12)*1000-1))
		case 5:
			d.Set(g.pick("aggs", "aggregations"), g.aggs(0))
		case 6:
			d.Set("post_filter", g.q(1))
		case 7:
			d.Set("_source", g.pick("headline", "lock_*", "*"))
		case 8:
			d.Set("filter", g.clauses(0))
		case 9:
			d.Set("track_total_hits", g.scalar())
		case 10:
			d.Set(g.pick("highlight", "script_fields", "runtime_mappings", "profile"), sources.D())
		default:
			d.Set("_source", sources.D(g.pick("includes", "excludes"), []any{g.field()}))
		}
	}
	return d
}

var genOps = []string{"$eq", "$ne", "$gt", "$in", "$nin", "$all", "$exists", "$type", "$size", "$mod",
	"$not", "$elemMatch", "$bitsAllSet", "$near", "$maxDistance", "$geoWithin", "$where", "$regex", "$expr", "$foo"}

func (g *treeGen) where(depth int) *sources.Doc {
	d := sources.D()
	for range g.n(3) + 1 {
		switch k := g.n(8); {
		case k == 0 && depth < 3:
			d.Set(g.pick("$and", "$or", "$nor"), []any{g.where(depth + 1), g.where(depth + 1)})
		case k <= 3:
			ops := sources.D()
			for range g.n(2) + 1 {
				op := genOps[g.n(len(genOps))]
				var arg any = g.value(depth)
				switch op {
				case "$not", "$elemMatch":
					if depth < 3 {
						if g.n(2) == 0 {
							arg = sources.D(genOps[g.n(4)], g.scalar())
						} else {
							arg = g.where(depth + 1)
						}
					}
				case "$in", "$nin", "$all", "$mod":
					arg = []any{g.value(depth), g.value(depth)}
				}
				ops.Set(op, arg)
			}
			d.Set(g.field(), ops)
		default:
			d.Set(g.field(), g.value(depth))
		}
	}
	return d
}

func genCheck(t *testing.T, data []byte) {
	g := &treeGen{data: data}
	src := string(codec.AppendJSON(nil, g.source()))
	fuzzParse(t, []string{"items", "planning"}, "", "source", src)
	filter := string(codec.AppendJSON(nil, g.q(0)))
	fuzzParse(t, []string{"items", "events"}, "", "filter", filter, "where", `{"type":"text"}`, "q", g.text())
	where := string(codec.AppendJSON(nil, g.where(0)))
	fuzzParse(t, []string{"users", "events_history", "desks"}, "", "where", where, "sort", g.field())
}

// FuzzTree fuzzes source, filter, q and where with mostly well-formed
// trees built from the fuzzer's bytes.
func FuzzTree(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("the quick brown fox jumps over the lazy dog"))
	f.Fuzz(genCheck)
}

// TestTreeRandom runs the tree generator on a fixed pseudo-random series,
// so every test run explores a few thousand well-formed bodies.
func TestTreeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 2000
	if testing.Short() {
		n = 300
	}
	accepted := 0
	for range n {
		data := make([]byte, 64+r.IntN(192))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		genCheck(t, data)
		g := &treeGen{data: data}
		if _, err := Parse(resource(t, "items"), "", qs("source", js(g.source()))); err == nil {
			accepted++
		}
	}
	if accepted < n/20 {
		t.Errorf("only %d of %d generated sources were accepted: the generator explores too little", accepted, n)
	}
	t.Logf("%d of %d generated sources accepted", accepted, n)
}
