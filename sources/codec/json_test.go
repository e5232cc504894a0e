package codec

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

func TestDecodeEncodeRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null],"c":{"d":"e"}}`, `{"b":1,"a":[true,false,null],"c":{"d":"e"}}`},
		{` { "a" : 1.5 , "b":-0.25,"c":1e3,"d":2.0 } `, `{"a":1.5,"b":-0.25,"c":1000.0,"d":2.0}`},
		{`{"s":"\u00fcn\u00ef \"q\" \\ \n\t\/"}`, `{"s":"ünï \"q\" \\ \n\t/"}`},
		{`{"pair":"\ud83d\ude00"}`, `{"pair":"😀"}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`"<b>&</b>"`, `"<b>&</b>"`},
		{`9223372036854775807`, `9223372036854775807`},
		{`9223372036854775808`, `9.223372036854776e+18`},
		{`0.00001`, `1e-05`},
		{`123456789.0`, `123456789.0`},
		{`1e16`, `1e+16`},
		{`{"x":"\u0001"}`, `{"x":"\u0001"}`},
	} {
		v, err := DecodeJSON([]byte(tc.in), DecodeOptions{})
		if err != nil {
			t.Errorf("DecodeJSON(%s): %v", tc.in, err)
			continue
		}
		if got := string(AppendJSON(nil, v)); got != tc.want {
			t.Errorf("AppendJSON(DecodeJSON(%s)) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		opts   DecodeOptions
		substr string
	}{
		{`{"a":1,"a":2}`, DecodeOptions{Strict: true}, "duplicate key"},
		{`{"a":1} x`, DecodeOptions{}, "after the JSON value"},
		{`{"a":}`, DecodeOptions{}, "looking for a value"},
		{`{'a':1}`, DecodeOptions{}, "string object key"},
		{`[1,]`, DecodeOptions{}, "looking for a value"},
		{`01`, DecodeOptions{}, "leading zero"},
		{`NaN`, DecodeOptions{}, "invalid character"},
		{`1e999`, DecodeOptions{}, "out of range"},
		{`"abc`, DecodeOptions{}, "unterminated"},
		{"\"a\x01\"", DecodeOptions{}, "control character"},
		{"\"\xff\"", DecodeOptions{Strict: true}, "invalid UTF-8"},
		{`"\ud800"`, DecodeOptions{Strict: true}, "surrogate"},
		{``, DecodeOptions{}, "end of JSON"},
		{strings.Repeat("[", 33) + strings.Repeat("]", 33), DecodeOptions{MaxDepth: 32}, "nested too deeply"},
	} {
		_, err := DecodeJSON([]byte(tc.in), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("DecodeJSON(%q) error = %v, want one containing %q", tc.in, err, tc.substr)
		}
	}
	if _, err := DecodeJSON([]byte(strings.Repeat("[", 40)+strings.Repeat("]", 40)), DecodeOptions{MaxDepth: 32}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep input: error %v, want ErrTooDeep", err)
	}
	// Lenient decoding: last duplicate wins, bad UTF-8 replaced.
	v, err := DecodeJSON([]byte("{\"a\":1,\"a\":2,\"b\":\"\xff\"}"), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(AppendJSON(nil, v)), `{"a":2,"b":"�"}`; got != want {
		t.Errorf("lenient = %s, want %s", got, want)
	}
}

func TestExtendedJSON(t *testing.T) {
	in := `{"_id":{"$oid":"5d76113ab3af37dea3a2eb92"},"at":{"$date":"2019-09-10T15:00:00.123Z"},
		"ms":{"$date":{"$numberLong":"1568127600000"}},"n":{"$numberLong":"42"},"i":{"$numberInt":"7"},
		"d":{"$numberDouble":"2.5"},"dec":{"$numberDecimal":"1.10"},"other":{"$foo":1}}`
	v, err := DecodeJSON([]byte(in), DecodeOptions{Extended: true})
	if err != nil {
		t.Fatal(err)
	}
	doc := v.(*sources.Doc)
	id, _ := doc.Get("_id")
	if oid, ok := id.(sources.ObjectID); !ok || oid.Hex() != "5d76113ab3af37dea3a2eb92" {
		t.Errorf("_id = %#v", id)
	}
	at, _ := doc.Get("at")
	if want := time.Date(2019, 9, 10, 15, 0, 0, 123e6, time.UTC); at != want {
		t.Errorf("at = %v, want %v", at, want)
	}
	want := `{"_id":"5d76113ab3af37dea3a2eb92","at":"2019-09-10T15:00:00+0000","ms":"2019-09-10T15:00:00+0000","n":42,"i":7,"d":2.5,"dec":"1.10","other":{"$foo":1}}`
	if got := string(AppendJSON(nil, doc)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, err := DecodeJSON([]byte(`{"$oid":"nothex"}`), DecodeOptions{Extended: true}); err == nil {
		t.Error("bad $oid decoded")
	}
}

func TestCanonicalAndIndent(t *testing.T) {
	v, _ := DecodeJSON([]byte(`{"b":{"z":1,"y":[{"d":1,"c":2}]},"a":"x"}`), DecodeOptions{})
	if got, want := string(AppendCanonicalJSON(nil, v)), `{"a":"x","b":{"y":[{"c":2,"d":1}],"z":1}}`; got != want {
		t.Errorf("canonical = %s, want %s", got, want)
	}
	want := "{\n    \"b\": {\n        \"z\": 1,\n        \"y\": [\n            {\n                \"d\": 1,\n                \"c\": 2\n            }\n        ]\n    },\n    \"a\": \"x\"\n}"
	if got := string(AppendJSONIndent(nil, v, "    ")); got != want {
		t.Errorf("indent:\n%s\nwant:\n%s", got, want)
	}
}

func TestDocOperations(t *testing.T) {
	d := sources.D("a", int64(1), "b", sources.D("c", "x"), "e", nil)
	d.Set("a", int64(2))
	d.Set("f", true)
	if !d.Delete("e") || d.Delete("missing") {
		t.Error("Delete reported wrongly")
	}
	if got, want := d.Keys(), []string{"a", "b", "f"}; !cmp.Equal(got, want) {
		t.Errorf("Keys = %v, want %v", got, want)
	}
	if v, ok := d.Path("b.c"); !ok || v != "x" {
		t.Errorf("Path(b.c) = %v, %v", v, ok)
	}
	if _, ok := d.Path("b.c.d"); ok {
		t.Error("Path through a string succeeded")
	}
	c := d.Clone()
	sub, _ := c.Doc("b")
	sub.Set("c", "changed")
	if v, _ := d.Path("b.c"); v != "x" {
		t.Error("Clone shares sub-documents")
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true,{"b":{}}]}`, `"\ud83d\ude00"`, `{"$oid":"5d76113ab3af37dea3a2eb92"}`, `-0`, `1e-7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeJSON(data, DecodeOptions{Strict: true, MaxDepth: 32})
		if err != nil {
			return
		}
		// What we accept re-encodes to JSON we accept again, identically.
		enc := AppendJSON(nil, v)
		v2, err := DecodeJSON(enc, DecodeOptions{Strict: true, MaxDepth: 32})
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		if enc2 := AppendJSON(nil, v2); string(enc2) != string(enc) {
			t.Fatalf("unstable encoding: %s then %s", enc, enc2)
		}
		if c1, c2 := AppendCanonicalJSON(nil, v), AppendCanonicalJSON(nil, v2); string(c1) != string(c2) {
			t.Fatalf("unstable canonical encoding: %s then %s", c1, c2)
		}
	})
}

// TestAppendJSONStringMatchesBytewise checks the eight-bytes-at-a-time
// string encoder against a byte-by-byte one on strings mixing every kind
// of byte: plain ASCII, each escape, multi-byte runes, invalid UTF-8, at
// every alignment.
func TestAppendJSONStringMatchesBytewise(t *testing.T) {
	bytewise := func(s string) string {
		b := []byte{'"'}
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, "\ufffd"...)
			case r == '"' || r == '\\':
				b = append(b, '\\', byte(r))
			case r == '\n':
				b = append(b, `\n`...)
			case r == '\r':
				b = append(b, `\r`...)
			case r == '\t':
				b = append(b, `\t`...)
			case r == '\b':
				b = append(b, `\b`...)
			case r == '\f':
				b = append(b, `\f`...)
			case r < 0x20:
				b = append(b, fmt.Sprintf(`\u%04x`, r)...)
			default:
				b = utf8.AppendRune(b, r)
			}
		}
		return string(append(b, '"'))
	}
	pieces := []string{"a", "abcdefgh", "<p>", " ", "\"", "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "\x20", "é", "£", "€", "𝄞", "\xff", "\xc3", "\xe2\x82", "\u2028"}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if n%7 == 0 {
			sb.WriteString(strings.Repeat("x", rng.IntN(20)))
		}
		s := sb.String()
		if got, want := string(AppendJSONString([]byte("prefix"), s)), "prefix"+bytewise(s); got != want {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestDatesAsAppendFormat checks the date encoder against
// time.AppendFormat, across years, zones and the edges of each field.
func TestDatesAsAppendFormat(t *testing.T) {
	zone := time.FixedZone("x", -5*3600-30*60)
	rng := rand.New(rand.NewPCG(3, 4))
	times := []time.Time{{}, time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 25, 0, 30, 0, 0, zone), time.Date(99, 1, 1, 0, 0, 0, 0, time.UTC)}
	for range 10000 {
		times = append(times, time.Unix(rng.Int64N(400_000_000_000)-100_000_000_000, rng.Int64N(1e9)).In(zone))
	}
	for _, tm := range times {
		want := `"` + tm.UTC().Format(sources.DateLayout) + `"`
		if got := string(AppendJSON(nil, tm)); got != want {
			t.Fatalf("AppendJSON(%v) = %s, want %s", tm, got, want)
		}
	}
	id := sources.ObjectID{0x67, 0xc4, 0x2d, 0x4c, 0x95, 0x71, 0x84, 0xd4, 0x54, 0x84, 0xe6, 0xff}
	if got, want := string(AppendJSON(nil, id)), `"67c42d4c957184d45484e6ff"`; got != want {
		t.Errorf("AppendJSON(ObjectID) = %s, want %s", got, want)
	}
}

// decodeAsScan is DecodeJSON as it was before objects indexed their keys:
// a repeated key found by a scan of those before it, however many.
func decodeAsScan(data []byte, opts DecodeOptions) (any, error) {
	return decode(data, opts, math.MaxInt)
}

// sameAsScan fails t unless data decodes with opts, its objects indexing
// their keys from indexFrom, exactly as with the scan alone: the same
// value (in the same order), or the same error at the same offset.
func sameAsScan(t *testing.T, data []byte, opts DecodeOptions, indexFrom int) {
	t.Helper()
	got, gotErr := decode(data, opts, indexFrom)
	want, wantErr := decodeAsScan(data, opts)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("decoding %.200q (strict %v, index from %d): error %v, the scan's %v", data, opts.Strict, indexFrom, gotErr, wantErr)
	}
	if g, w := AppendJSON(nil, got), AppendJSON(nil, want); string(g) != string(w) {
		t.Fatalf("decoding %.200q (strict %v, index from %d): %.200s, the scan's %.200s", data, opts.Strict, indexFrom, g, w)
	}
}

// randomObject writes an object of up to 2*indexKeys+8 keys drawn from a
// set small enough that some repeat, nested now and then.
func randomObject(rng *rand.Rand, depth int) string {
	n := rng.IntN(2*indexKeys + 8)
	keys := 1 + rng.IntN(4*n+1) // few keys for n: repeats; many: mostly none
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":`, rng.IntN(keys))
		switch {
		case depth < 3 && rng.IntN(32) == 0:
			b.WriteString(randomObject(rng, depth+1))
		default:
			fmt.Fprintf(&b, "%d", i)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// Indexing an object's keys changes nothing the decoder answers: a
// repeated key is refused (strict) or replaces the first one's value in
// place (lenient) exactly as the scan did, at every size around the
// point where the index starts.
func TestDuplicateKeysAsTheScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		data := []byte(randomObject(rng, 0))
		for _, strict := range []bool{true, false} {
			for _, from := range []int{1, 2, indexKeys} {
				sameAsScan(t, data, DecodeOptions{Strict: strict}, from)
			}
		}
	}
	// A repeat just before, at and after the index starts.
	for _, n := range []int{indexKeys - 1, indexKeys, indexKeys + 1, 4 * indexKeys} {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"k0":"again"}`)
		sameAsScan(t, []byte(b.String()), DecodeOptions{Strict: true}, indexKeys)
		sameAsScan(t, []byte(b.String()), DecodeOptions{}, indexKeys)
		if _, err := DecodeJSON([]byte(b.String()), DecodeOptions{Strict: true}); err == nil || !strings.Contains(err.Error(), `duplicate key "k0"`) {
			t.Errorf("%d keys then k0 again: %v, want duplicate key \"k0\"", n, err)
		}
	}
}

func FuzzDuplicateKeysAsTheScan(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":1,"b":{"a":1,"a":2},"c":3}`, `{"a":1,"b":2,"c":3,"b":4}`, `[{"x":1},{"x":2,"x":3}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, strict := range []bool{true, false} {
			for _, from := range []int{1, 2, 3, indexKeys} {
				sameAsScan(t, data, DecodeOptions{Strict: strict, MaxDepth: 32}, from)
			}
		}
	})
}

// BenchmarkDecodeManyKeys decodes objects of ever more distinct keys,
// strictly: the time per key stays flat (it grew with the keys while
// every key scanned those before it).
func BenchmarkDecodeManyKeys(b *testing.B) {
	for _, n := range []int{16, 64, 1000, 7000} {
		var sb strings.Builder
		sb.WriteByte('{')
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"c%d":%d`, i, i)
		}
		sb.WriteByte('}')
		data := []byte(sb.String())
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := DecodeJSON(data, DecodeOptions{Strict: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}
