package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

func TestSanitizeRange(t *testing.T) {
	const size = 100
	many := strings.Repeat("0-0,", 5000) + "0-0"
	fifty := strings.Repeat("0-0,", 49) + "0-0"
	seventeen := ""
	for i := range 17 {
		seventeen += "," + strings.Repeat("x", 0) + itoa(i*4) + "-" + itoa(i*4+1)
	}
	for _, tc := range []struct {
		in, want string // want "": no Range header (the whole file)
	}{
		{"bytes=0-9", "bytes=0-9"},
		{"bytes=-5", "bytes=95-99"},
		{"bytes=90-", "bytes=90-99"},
		{"bytes=0-999", "bytes=0-99"},
		{"bytes=0-0,0-0,0-0", "bytes=0-0"},
		{"bytes=" + fifty, "bytes=0-0"},
		{"bytes=" + many, ""},          // over 100 specs: the whole file
		{"bytes=5-9,0-4", "bytes=0-9"}, // adjacent, out of order
		{"bytes=0-10,5-20,30-40", "bytes=0-20,30-40"},
		{"bytes=0-1,200-300", "bytes=0-1"}, // the unsatisfiable one dropped
		{"bytes=0-1,5-6", "bytes=0-1,5-6"},
		{"bytes" + seventeen[1:], "bytes" + seventeen[1:]}, // not "bytes=": left to ServeContent
		{"bytes=" + seventeen[1:], ""},                     // 17 disjoint ranges: the whole file
		{"bytes=" + strings.Repeat("1-1,", 101) + "1-1", ""},
		// Left as they are, for ServeContent to answer 416.
		{"bytes=200-300", "bytes=200-300"},
		{"bytes=9-5", "bytes=9-5"},
		{"bytes=x-5", "bytes=x-5"},
		{"bytes=-0", "bytes=-0"},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Range", tc.in)
		got := sanitizeRange(r, size).Header.Get("Range")
		if got != tc.want {
			t.Errorf("Range %.60q: %.60q, want %.60q", tc.in, got, tc.want)
		}
		if r.Header.Get("Range") != tc.in {
			t.Errorf("Range %.60q: the caller's request was modified", tc.in)
		}
	}
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

// 5,000 copies of the first byte of a 13 KB image once answered a 636 KB
// multipart body.
func TestRangesDoNotAmplify(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 13000/16)
	assets := fakeAssets{"5d553c333031e2855a2e5662.jpg": {Content: nopCloser{bytes.NewReader(data)}, Size: int64(len(data)),
		ContentType: "image/jpeg", Modified: time.Date(2019, 8, 15, 12, 23, 4, 0, time.UTC)}}
	ts := newTestServer(t, staticLoader(nil, nil), func(o *Options) { o.Assets = assets })
	archive := token(t, sources.ScopeArchive)
	path := "/prodapi/v1/assets/5d553c333031e2855a2e5662.jpg"

	r := do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes="+strings.Repeat("0-0,", 4999)+"0-0")
	if r.status != 200 || len(r.body) != len(data) {
		t.Errorf("5,000 × 0-0: %d, %d bytes; want the whole file, 200", r.status, len(r.body))
	}
	r = do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes="+strings.Repeat("0-0,", 49)+"0-0")
	if r.status != 206 || r.body != "0" || r.header.Get("Content-Range") != "bytes 0-0/12992" {
		t.Errorf("50 × 0-0: %d, %d bytes, Content-Range %q", r.status, len(r.body), r.header.Get("Content-Range"))
	}
	var disjoint []string
	for i := range 40 {
		disjoint = append(disjoint, itoa(i*2)+"-"+itoa(i*2))
	}
	r = do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes="+strings.Join(disjoint, ","))
	if r.status != 200 || len(r.body) != len(data) {
		t.Errorf("40 disjoint ranges: %d, %d bytes; want the whole file, 200", r.status, len(r.body))
	}
	r = do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes=0-1,5-6")
	if r.status != 206 || !strings.HasPrefix(r.header.Get("Content-Type"), "multipart/byteranges") || len(r.body) > 1000 {
		t.Errorf("two ranges: %d %q, %d bytes", r.status, r.header.Get("Content-Type"), len(r.body))
	}
}
