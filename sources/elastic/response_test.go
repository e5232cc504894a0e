package elastic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
)

// page is a search response of n Superdesk-sized items.
func page(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"took":5,"timed_out":false,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0},` +
		`"hits":{"total":{"value":10000,"relation":"gte"},"max_score":null,"hits":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"_index":"superdesk_archive","_id":"urn:newsml:localhost:5000:2024:item-%04d","_score":null,"_source":{`+
			`"guid":"urn:newsml:localhost:5000:2024:item-%04d","type":"text","state":"published","pubstatus":"usable",`+
			`"headline":"Headline %d","slugline":"slug-%d","body_html":"%s","urgency":3,"priority":5,`+
			`"task":{"desk":"66a000000000000000000001","stage":"66a000000000000000000011","user":"66b000000000000000000001"},`+
			`"subject":[{"qcode":"01000000","name":"arts, culture and entertainment"}],`+
			`"versioncreated":"2024-01-15T10:00:00+0000","_updated":"2024-01-15T10:00:00+0000","_created":"2024-01-15T09:00:00+0000",`+
			`"_resource":"archive"},"sort":[1705312800000]}`, i, i, i, i, strings.Repeat("<p>Some paragraph of text.</p>", 60))
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

func BenchmarkParseSearch(b *testing.B) {
	for _, n := range []int{25, 500} {
		data := page(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := parseSearch(data)
				if err != nil || len(r.docs) != n {
					b.Fatal(err)
				}
			}
		})
	}
}

// Whatever a server (or a man in the middle) answers, reading it does not
// panic, and a result it accepts is well formed.
func FuzzParseResponse(f *testing.F) {
	f.Add(page(2)) // more seeds in testdata/fuzz/FuzzParseResponse
	f.Fuzz(func(t *testing.T, data []byte) {
		e := parseError(data)
		if len(e.text()) > maxReason+len("…") {
			t.Errorf("reason of %d bytes", len(e.text()))
		}
		r, err := parseSearch(data)
		if err != nil {
			return
		}
		if r.total < 0 || r.total > sources.MaxTotal {
			t.Errorf("total %d", r.total)
		}
		for _, d := range r.docs {
			if d == nil || d.Has("_resource") {
				t.Errorf("bad document %v", d)
			}
		}
	})
}

// lastSort finds the sort values of a page's last hit (the one before
// the extra hit a walk asks for) in the answer's bytes, and gives up
// where it cannot be sure.
func TestLastSort(t *testing.T) {
	hit := func(source, sort string) string {
		return `{"_index":"i","_id":"x","_score":null,"_source":` + source + `,"sort":` + sort + `}`
	}
	answer := func(hits ...string) []byte {
		return []byte(`{"took":1,"timed_out":false,"hits":{"total":{"value":3,"relation":"eq"},"max_score":null,"hits":[` +
			strings.Join(hits, ",") + `]}}`)
	}
	for _, tc := range []struct {
		name string
		data []byte
		size int
		want []any
	}{
		{"size+1 hits", answer(hit(`{"a":1}`, `[1,"a"]`), hit(`{"a":2}`, `[2,"b]\"c"]`), hit(`{}`, `[3,"z"]`)), 2, []any{int64(2), `b]"c`}},
		{"the walk's end", answer(hit(`{}`, `[1,"a"]`), hit(`{}`, `[2,"b"]`)), 2, nil},
		{"a source with the marker", answer(hit(`{"x":{"sort":[9]}}`, `[1,"a"]`), hit(`{}`, `[2,"b"]`), hit(`{}`, `[3,"c"]`)), 2, nil},
		{"a nested value", answer(hit(`{}`, `[1]`), hit(`{}`, `[[2]]`), hit(`{}`, `[3]`)), 2, nil},
		{"size 0", answer(hit(`{}`, `[1]`)), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := lastSort(tc.data, tc.size)
			if ok != (tc.want != nil) {
				t.Fatalf("lastSort = %v, %v; want %v", got, ok, tc.want)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("lastSort = %#v, want %#v", got, tc.want)
			}
		})
	}
}
