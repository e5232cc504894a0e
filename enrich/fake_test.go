package enrich_test

import (
	"cmp"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// fakeLooker is an in-memory sources.Looker over documents by collection.
// It follows the Looker contract independently of the package under test:
// a 24-hex value matches an ObjectID or the same string (either case),
// results come in Sort order (stable, missing values last) and at most
// Limit of them, as copies. It records every lookup.
type fakeLooker struct {
	data map[string][]*sources.Doc
	// fail, when set, decides whether a lookup fails and with what.
	fail func(l sources.Lookup) error
	// block, when set, makes every lookup wait for its context to end.
	block bool

	mu    sync.Mutex
	calls []sources.Lookup
}

func (f *fakeLooker) Lookup(ctx context.Context, l sources.Lookup) ([]*sources.Doc, error) {
	f.mu.Lock()
	f.calls = append(f.calls, l)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f.fail != nil {
		if err := f.fail(l); err != nil {
			return nil, err
		}
	}
	want := make(map[string]bool, len(l.Values))
	for _, v := range l.Values {
		if s, ok := fakeID(v); ok {
			want[s] = true
		}
	}
	var out []*sources.Doc
	for _, d := range f.data[l.Collection] {
		if slices.ContainsFunc(fakePath(d, l.Field), func(v any) bool { s, ok := fakeID(v); return ok && want[s] }) {
			out = append(out, d.Clone())
		}
	}
	slices.SortStableFunc(out, func(a, b *sources.Doc) int {
		for _, k := range l.Sort {
			va, _ := a.Path(k.Field)
			vb, _ := b.Path(k.Field)
			if c := compareValues(va, vb, k.Desc); c != 0 {
				return c
			}
		}
		return 0
	})
	if l.Limit > 0 && len(out) > l.Limit {
		out = out[:l.Limit]
	}
	return out, nil
}

// fakePath returns the values at a dotted path of d, following every
// element of the arrays on the way, as MongoDB matches a path.
func fakePath(d *sources.Doc, path string) []any {
	cur := []any{d}
	for part := range strings.SplitSeq(path, ".") {
		var next []any
		var visit func(v any)
		visit = func(v any) {
			switch v := v.(type) {
			case []any:
				for _, e := range v {
					visit(e)
				}
			case *sources.Doc:
				if x, ok := v.Get(part); ok {
					next = append(next, x)
				}
			}
		}
		for _, v := range cur {
			visit(v)
		}
		cur = next
	}
	var out []any
	for _, v := range cur {
		if arr, ok := v.([]any); ok {
			out = append(out, arr...)
		} else {
			out = append(out, v)
		}
	}
	return out
}

// count returns how many lookups were made.
func (f *fakeLooker) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// lookups returns the lookups made, as "collection.field" strings.
func (f *fakeLooker) lookups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	for _, c := range f.calls {
		s = append(s, c.Collection+"."+c.Field)
	}
	slices.Sort(s)
	return s
}

// fakeID normalises an id for matching: ObjectIDs and 24-hex strings to
// lower-case hex.
func fakeID(v any) (string, bool) {
	switch v := v.(type) {
	case sources.ObjectID:
		return hex.EncodeToString(v[:]), true
	case string:
		if len(v) == 24 {
			if _, err := hex.DecodeString(v); err == nil {
				return strings.ToLower(v), true
			}
		}
		return v, true
	case int64:
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}

// compareValues orders two values for a sort key; missing values last in
// either direction, as Elasticsearch's default "missing": "_last".
func compareValues(a, b any, desc bool) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	c := 0
	switch a := a.(type) {
	case time.Time:
		if b, ok := b.(time.Time); ok {
			c = a.Compare(b)
		}
	case string:
		if b, ok := b.(string); ok {
			c = strings.Compare(a, b)
		}
	case int64:
		if b, ok := b.(int64); ok {
			c = cmp.Compare(a, b)
		}
	}
	if desc {
		return -c
	}
	return c
}

// loadDocs reads a JSON array of documents (Extended JSON allowed).
func loadDocs(t testing.TB, path string) []*sources.Doc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := codec.DecodeJSON(data, codec.DecodeOptions{Extended: true})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: not an array", path)
	}
	docs := make([]*sources.Doc, len(arr))
	for i, e := range arr {
		docs[i] = e.(*sources.Doc)
	}
	return docs
}

// loadStore reads every <collection>.json of dir into a fake looker.
func loadStore(t testing.TB, dir string) *fakeLooker {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeLooker{data: map[string][]*sources.Doc{}}
	for _, file := range files {
		f.data[strings.TrimSuffix(filepath.Base(file), ".json")] = loadDocs(t, file)
	}
	return f
}

// cloneDocs deep-copies a page.
func cloneDocs(docs []*sources.Doc) []*sources.Doc {
	out := make([]*sources.Doc, len(docs))
	for i, d := range docs {
		out[i] = d.Clone()
	}
	return out
}

func resource(t testing.TB, name string) *sources.Resource {
	t.Helper()
	r, ok := sources.ResourceByName(name)
	if !ok {
		t.Fatalf("no resource %q", name)
	}
	return r
}
