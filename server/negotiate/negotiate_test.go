package negotiate

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGzip(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"GZip"}, true},
		{[]string{"x-gzip"}, true},
		{[]string{"br, gzip;q=0.8"}, true},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip;Q=0"}, false},
		{[]string{"gzip; q=0.000"}, false},
		{[]string{"gzip ; Q = 0"}, false},
		{[]string{"gzip;q=0.001"}, true},
		{[]string{"*"}, true},
		{[]string{"*;q=0"}, false},
		{[]string{"*, gzip;q=0"}, false},
		{[]string{"gzip;q=0, *"}, false},
		{[]string{"*;q=0, gzip"}, true},
		{[]string{"*", "gzip;q=0"}, false},
		{[]string{"identity"}, false},
		{[]string{"br, deflate"}, false},
		{[]string{"gzip;level=1;q=0"}, false},
		{[]string{"gzip;q=abc"}, false},
		{[]string{"gzip;q=2"}, false},
		{[]string{"gzip;q=abc, *"}, true},
		{[]string{"gzipper"}, false},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		for _, v := range tc.header {
			r.Header.Add("Accept-Encoding", v)
		}
		if got := Gzip(r); got != tc.want {
			t.Errorf("Accept-Encoding %q: gzip %t, want %t", tc.header, got, tc.want)
		}
	}
}

func TestEventStream(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"text/event-stream":                   true,
		"Text/Event-Stream; charset=utf-8":    true,
		"*/*":                                 false,
		"application/json, text/event-stream": true,
		"application/json, text/event-stream;q=0.5": false,
		"text/event-stream;q=0":                     false,
		"text/event-stream;q=nonsense":              false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := EventStream(r); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}
