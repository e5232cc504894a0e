package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// checkerSeeds are JSON texts at the edges of what the decoder takes.
var checkerSeeds = []string{
	`{"_id": "a", "n": 1, "f": -0.5e-3, "t": true, "x": null, "a": [1, "b", {"c": []}], "d": {}}`,
	`{"s": "\u00e9\ud83d\ude00 \" \\ \/ \b\f\n\r\t", "k\u0024": 1}`,
	`{"s": "\ud800 alone", "bad": "\x"}`, `{"s": "\u12G4"}`, "{\"s\": \"a\x01b\"}", `{"s": "unterminated}`,
	`{"_id": {"$oid": "5d76113ab3af37dea3a2eb91"}, "at": {"$date": "2024-03-01T10:00:00.123Z"}}`,
	`{"$oid":"5d76113ab3af37dea3a2eb91"}`, `{"$date":"2024-03-01T10:00:00.5+02:00"}`, `{"$date":"2024-03-01T10:00:00+0000"}`, `"plain"`, `"caf\u00e9"`,
	`{"$oid": "zz"}`, `{"$oid": "5D76113AB3AF37DEA3A2EB91"}`, `{"$date": "2024-03-01T10:00:00+0000"}`, `{"$date": "yesterday"}`,
	`{"$date": 1700000000000}`, `{"$date": {"$numberLong": "17"}}`, `{"$date": {"$numberLong": "x"}}`,
	`{"$numberLong": "12"}`, `{"$numberInt": "1.5"}`, `{"$numberDouble": "NaN"}`, `{"$numberDecimal": 5}`,
	`{"\u0024oid": "x"}`, `{"$oid": "x", "$oid": "5d76113ab3af37dea3a2eb91"}`, `{"$oid": "5d76113ab3af37dea3a2eb91", "b": 1}`,
	`[01]`, `[-]`, `[1.]`, `[1e]`, `[1e999]`, `[-1e308, 1e-999, 123456789012345678901234567890]`, `[1,]`, `[,1]`, `{"a" 1}`,
	`{"a": 1,}`, `{1: 2}`, `tru`, `nul`, `true false`, `[truex]`, "  [ 1 , 2 ]  ", `"\uD834\uDD1E"`, "[\"\xff\xfe\"]",
	strings.Repeat("[", 511) + strings.Repeat("]", 511), strings.Repeat("[", 512) + strings.Repeat("]", 512),
	strings.Repeat("[", 513) + strings.Repeat("]", 513),
}

// The checker takes exactly what the decoder takes; a document's fields,
// read alone, are what the decoder makes of the whole.
func FuzzChecker(f *testing.F) {
	for _, s := range checkerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := codec.DecodeJSON(data, decodeOpts)
		c := checker{data: data}
		c.space()
		ok := c.value(0)
		if ok {
			c.space()
			ok = c.pos == len(data)
		}
		if ok != (err == nil) {
			t.Fatalf("checker says %v, the decoder %v, of %q", ok, err, data)
		}
		if err == nil {
			got, err := decodeValue(bytes.TrimSpace(data))
			if err != nil || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", v) || !bytes.Equal(codec.AppendJSON(nil, got), codec.AppendJSON(nil, v)) {
				t.Errorf("decodeValue(%q) = %#v, %v; want %#v", data, got, err, v)
			}
		}
		d, isDoc := v.(*sources.Doc)
		if !isDoc || data[skipSpace(data)] != '{' {
			return
		}
		raw := bytes.TrimSpace(data)
		w := blockWriter{}
		txt := w.put(raw)
		all, err := txt.project(d.Keys(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(codec.AppendJSON(nil, all)), string(codec.AppendJSON(nil, d))); diff != "" {
			t.Errorf("project of every field of %q (-got +want):\n%s", data, diff)
		}
		var spans [len(indexed)]span
		c = checker{data: raw, top: func(key []byte, v0, v1 int) {
			if k, ok := wanted(key, indexed[:]); ok {
				spans[indexOf(k)] = span{off: uint32(v0), n: uint32(v1 - v0)}
			}
		}}
		if !c.object(1, true) {
			t.Fatalf("checker refuses %q alone", raw)
		}
		some, err := txt.project([]string{"_updated", "_id", "name"}, &spans)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"_updated", "_id", "name"} {
			got, gok := some.Get(name)
			want, wok := d.Get(name)
			if gok != wok || !bytes.Equal(codec.AppendJSON(nil, got), codec.AppendJSON(nil, want)) {
				t.Errorf("%s of %q: %v (%v), want %v (%v)", name, data, got, gok, want, wok)
			}
		}
	})
}

func skipSpace(b []byte) int {
	i := 0
	for i < len(b)-1 && isSpace(b[i]) {
		i++
	}
	return i
}

// referenceLoad is how Load read a collection file when it decoded it
// whole: the documents, or the error Load must still give.
func referenceLoad(name string, data []byte) ([]*sources.Doc, error) {
	v, err := codec.DecodeJSON(data, decodeOpts)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sandbox: %s: want a JSON array of documents", name)
	}
	docs := make([]*sources.Doc, len(list))
	for i, e := range list {
		d, ok := e.(*sources.Doc)
		if !ok {
			return nil, fmt.Errorf("sandbox: %s: element %d is not a document", name, i)
		}
		if !d.Has("_id") {
			return nil, fmt.Errorf("sandbox: %s: document %d has no _id", name, i)
		}
		docs[i] = d
	}
	ids := map[idKey]bool{}
	for i, d := range docs {
		id, _ := d.Get("_id")
		k, ok := keyOf(id)
		if !ok {
			return nil, fmt.Errorf("sandbox: %s: document %d: _id must be a string or an ObjectID, not %s", name, i, describe(id))
		}
		if ids[k] {
			return nil, fmt.Errorf("sandbox: %s: document %d: duplicate _id %s", name, i, describe(id))
		}
		ids[k] = true
	}
	return docs, nil
}

// sizeless serves files that do not tell their size: Load reads them in
// small windows, which documents outgrow.
type sizeless struct{ fs.FS }

func (s sizeless) Open(name string) (fs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return sizelessFile{f}, nil
}

type sizelessFile struct{ fs.File }

func (sizelessFile) Stat() (fs.FileInfo, error) { return nil, errors.New("no size") }

// Load serves what the decoder reads of a file, and refuses what it did
// with the same error, however the file falls across Load's windows.
func FuzzLoad(f *testing.F) {
	for _, s := range checkerSeeds {
		f.Add([]byte(`[` + s + `]`))
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`[{"_id": "a"}, {"_id": }]`, `{"_id": "a"}`, `[{"_id": "a"}, 5]`, `[{"_id": "a"}, {"name": "x"}]`, `[{"_id": 5}]`,
		`[{"_id": {"$oid": "5d76113ab3af37dea3a2eb91"}}, {"_id": {"$oid": "5d76113ab3af37dea3a2eb91"}}]`, `[{"_id": {"$oid": "xyz"}}]`,
		`[{"_id": 5}, 7, {"_id": "a"}]`, `[{"_id": "a"}, {"_id": "a"}, {"x": 1}]`, `[{"_id": "a"}] x`, `[{"_id": "a"}`, ``, `[]`, ` [ ] `,
		`[{"_id": "a", "_id": "b"}, {"_id": "a"}]`, `[{"\u005fid": "a", "_updated": {"$date": "2024-01-01T00:00:00Z"}}]`,
		`[{"$oid": "5d76113ab3af37dea3a2eb91"}]`, `[{"_id": "` + strings.Repeat("x", 2000) + `", "body": "` + strings.Repeat("y\\\"", 700) + `"}, {"_id": "b"}]`,
		`[` + strings.Repeat(`{"_id": "x", "a": [`, 1) + strings.Repeat("[", 509) + strings.Repeat("]", 509) + `]}]`,
		`[{"_id": "x", "a": ` + strings.Repeat("[", 510) + strings.Repeat("]", 510) + `}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := referenceLoad("desks.json", data)
		for _, fsys := range []fs.FS{fstest.MapFS{"desks.json": {Data: data}}, sizeless{fstest.MapFS{"desks.json": {Data: data}}}} {
			s, err := Load(fsys, Options{})
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("Load(%q) error %v, want %v", data, err, wantErr)
			}
			if err != nil {
				continue
			}
			got := decodeAll(t, s.colls["desks"])
			if diff := cmp.Diff(jsonOf(got), jsonOf(want)); diff != "" {
				t.Errorf("Load(%q) (-got +want):\n%s", data, diff)
			}
		}
	})
}

func jsonOf(docs []*sources.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(codec.AppendJSON(nil, d))
	}
	return out
}

func TestSafeWords(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"", 0}, {"abcdefg", 0}, {"abcdefgh", 8}, {"abcdefghijklmnop\"", 16}, {"abcdefg\"ijklmnop", 0}, {"abcdefghij\\lmnop", 8},
		{"abcdefgh\x1fjklmnop", 8}, {"\x7f\x80\xff\xfe\x20!#[", 8}, {"éééé\x00", 8}, {"abc\x01defg", 0},
	} {
		if got := safeWords([]byte(tc.s)); got != tc.want {
			t.Errorf("safeWords(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}
