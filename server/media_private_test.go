package server

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// Media need a token (ARCHIVE_READ), so no answer about them may be
// `public`: a shared cache in front would hand them to anyone. Streamed
// media, ranges, revalidations, HEAD and presigned redirects alike.
func TestMediaAreNeverPublic(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	assets := fakeAssets{
		"5d553c333031e2855a2e5662.jpg": {Content: nopCloser{bytes.NewReader(data)}, Size: 20, ContentType: "image/jpeg",
			MD5: "d41d8cd98f00b204e9800998ecf8427e", Modified: time.Date(2019, 8, 15, 12, 23, 4, 0, time.UTC)},
		"20240115120112/photo.jpg": {Redirect: "https://s3.example/bucket/photo.jpg?X-Amz-Signature=x", Expires: testNow.Add(15 * time.Minute)},
	}
	ts := newTestServer(t, staticLoader(nil, nil), func(o *Options) { o.Assets = assets })
	archive := token(t, sources.ScopeArchive)
	stream := "/prodapi/v1/assets/5d553c333031e2855a2e5662.jpg"
	for _, tc := range []struct {
		name, method, target string
		header               []string
		status               int
		cacheControl         string
	}{
		{"stream", "GET", stream, nil, 200, "private, max-age=2592000"},
		{"range", "GET", stream, []string{"Range", "bytes=0-9"}, 206, "private, max-age=2592000"},
		{"revalidation", "GET", stream, []string{"If-None-Match", `"d41d8cd98f00b204e9800998ecf8427e"`}, 304, "private, max-age=2592000"},
		{"head", "HEAD", stream, nil, 200, "private, max-age=2592000"},
		{"redirect", "GET", "/prodapi/v1/assets/20240115120112/photo.jpg", nil, 302, "private, max-age=840"},
	} {
		r := do(t, ts, tc.method, tc.target, append([]string{"Authorization", archive}, tc.header...)...)
		cc := r.header.Get("Cache-Control")
		if r.status != tc.status || cc != tc.cacheControl || strings.Contains(cc, "public") {
			t.Errorf("%s: %d Cache-Control %q, want %d %q", tc.name, r.status, cc, tc.status, tc.cacheControl)
		}
	}
}
