package httperr_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources/codec"
)

// codecBody is the envelope as the JSON encoder of the API's documents
// writes strings.
func codecBody(status int, msg string) string {
	b := []byte(`{"_status":"ERR","_error":{"code":` + strconv.Itoa(status) + `,"message":`)
	return string(codec.AppendJSONString(b, msg)) + "}}"
}

// The envelope's message is escaped byte for byte as sources/codec
// escapes strings, whatever it holds.
func TestBodyEscapesAsCodec(t *testing.T) {
	msgs := []string{"", "The method is not allowed for the requested URL.",
		`resources: unknown resource "a\"b"; the resources are items`, "<script>&amp;</script>",
		"tab\tnewline\nreturn\rbackspace\bfeed\f", "\x00\x01\x1f\x7f", "naïve café ✓ 𝄞", "\u2028\u2029",
		"bad \xff\xfe utf-8 \xe2\x82", "surrogate \xed\xa0\x80", "\xc0\xaf overlong"}
	for c := range 256 {
		msgs = append(msgs, string(rune(c)), "a"+string([]byte{byte(c)})+"b")
	}
	for _, msg := range msgs {
		if got, want := string(httperr.Body(404, msg)), codecBody(404, msg); got != want {
			t.Errorf("Body(%q)\n got %s\nwant %s", msg, got, want)
		}
	}
}

func FuzzBody(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n\x00", "\xff", "é\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		if got, want := string(httperr.Body(400, msg)), codecBody(400, msg); got != want {
			t.Errorf("Body(%q)\n got %s\nwant %s", msg, got, want)
		}
	})
}

func TestWrite(t *testing.T) {
	for _, method := range []string{"GET", "HEAD", "POST"} {
		t.Run(method, func(t *testing.T) {
			w := httptest.NewRecorder()
			// What a handler set for the answer it meant to give goes.
			w.Header().Set("ETag", `"x"`)
			w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("X-Request-Id", "r1")
			e := &httperr.Error{Status: 503, Msg: "down", Err: errors.New("redis: refused"), Header: http.Header{"Retry-After": {"5"}}}
			httperr.Write(w, httptest.NewRequest(method, "/", nil), e)
			want := `{"_status":"ERR","_error":{"code":503,"message":"down"}}`
			body := want
			if method == "HEAD" {
				body = ""
			}
			if w.Code != 503 || w.Body.String() != body {
				t.Errorf("%d %s, want 503 %s", w.Code, w.Body, body)
			}
			wantHeader := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"},
				"Content-Length": {strconv.Itoa(len(want))}, "Retry-After": {"5"}, "X-Request-Id": {"r1"}}
			if diff := cmp.Diff(wantHeader, w.Header()); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

func TestError(t *testing.T) {
	cause := errors.New("token of client \"c\" lacks ARCHIVE_READ")
	e := &httperr.Error{Status: 403, Msg: "Invalid scope", Err: cause}
	if got := e.Error(); got != `Invalid scope: token of client "c" lacks ARCHIVE_READ` {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(e, cause) || e.HTTPStatus() != 403 {
		t.Errorf("Unwrap or HTTPStatus: %v, %d", errors.Unwrap(e), e.HTTPStatus())
	}
	if got := (&httperr.Error{Status: 404, Msg: "gone"}).Error(); got != "gone" {
		t.Errorf("Error() without a cause = %q", got)
	}
}
