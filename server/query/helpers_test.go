package query

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

func resource(t testing.TB, name string) *sources.Resource {
	t.Helper()
	r, ok := sources.ResourceByName(name)
	if !ok {
		t.Fatalf("no resource %q", name)
	}
	return r
}

// qs builds a raw query string from name, value pairs, in order,
// percent-encoding the values as a client would.
func qs(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(kv[i+1]))
	}
	return b.String()
}

func js(v any) string {
	if d, ok := v.(*sources.Doc); ok && d == nil {
		return ""
	}
	return string(codec.AppendJSON(nil, v))
}

// want is what a test expects of an accepted request; zero page and max
// are not checked.
type want struct {
	where, search string
	sort          []sources.SortKey
	fields        sources.Projection
	params        []sources.Param
	page, max     int
	pretty        bool
}

func check(t *testing.T, q *sources.Query, w want) {
	t.Helper()
	checkInvariants(t, q)
	if got := js(q.Where); got != w.where {
		t.Errorf("Where:\n got %s\nwant %s", got, w.where)
	}
	if got := js(q.Search); got != w.search {
		t.Errorf("Search:\n got %s\nwant %s", got, w.search)
	}
	if diff := cmp.Diff(q.Sort, w.sort, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Sort (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(q.Fields, w.fields, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Fields (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(q.Params, w.params, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Params (-got +want):\n%s", diff)
	}
	if w.page != 0 && q.Page != w.page {
		t.Errorf("Page = %d, want %d", q.Page, w.page)
	}
	if w.max != 0 && q.MaxResults != w.max {
		t.Errorf("MaxResults = %d, want %d", q.MaxResults, w.max)
	}
	if q.Pretty != w.pretty {
		t.Errorf("Pretty = %v, want %v", q.Pretty, w.pretty)
	}
}

// refusal is an expected error: status and a message substring.
type refusal struct {
	status int
	msg    string
}

func checkErr(t *testing.T, err error, w refusal) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want %d %q", w.status, w.msg)
	}
	qe, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %v is not a *query.Error", err)
	}
	if qe.Status != w.status || !strings.Contains(qe.Message, w.msg) {
		t.Errorf("got %d %q, want %d containing %q", qe.Status, qe.Message, w.status, w.msg)
	}
}

// defaultBody is the search body of a plain list with sort s.
func defaultBody(query, sort string, size int) string {
	return `{"query":` + query + `,"sort":` + sort + `,"size":` + strconv.Itoa(size) + `,"track_total_hits":10000}`
}

const itemsSort = `[{"_updated":{"order":"desc"}}]`

// p is a shorthand for a Param.
func p(name, value string) sources.Param { return sources.Param{Name: name, Value: value} }

func keys(kv ...any) []sources.SortKey {
	var out []sources.SortKey
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, sources.SortKey{Field: kv[i].(string), Desc: kv[i+1].(bool)})
	}
	return out
}

type sourcesParam = sources.Param

func proj(exclude bool, fields ...string) sources.Projection {
	return sources.Projection{Fields: fields, Exclude: exclude}
}

type sourcesSortKey = sources.SortKey

type sourcesProjection = sources.Projection
