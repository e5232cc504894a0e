package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The proxy header is believed from the proxies' ranges alone: a request
// from 127.0.0.1 naming 203.0.113.9 is logged as 203.0.113.9 when
// 127.0.0.0/8 is a proxy's range, and as 127.0.0.1 when it is not. A
// header without ranges is believed from anyone, with a warning at start.
func TestTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		want   string
		warned bool
	}{
		{"from a proxy", []string{"PRODAPI_TRUSTED_PROXY_HEADER", "X-Forwarded-For", "PRODAPI_TRUSTED_PROXIES", "10.0.0.0/8,127.0.0.0/8"}, "203.0.113.9", false},
		{"from outside the ranges", []string{"PRODAPI_TRUSTED_PROXY_HEADER", "X-Forwarded-For", "PRODAPI_TRUSTED_PROXIES", "10.0.0.0/8"}, "127.0.0.1", false},
		{"no ranges", []string{"PRODAPI_TRUSTED_PROXY_HEADER", "X-Forwarded-For"}, "203.0.113.9", true},
		{"no header", nil, "127.0.0.1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := start(t, append([]string{"PRODAPI_AUTH_ENABLED", "false"}, tc.env...)...)
			id := "proxies-" + strings.ReplaceAll(tc.name, " ", "-")
			request(t, "GET", in.base+"/prodapi/v1/desks", "X-Forwarded-For", "198.51.100.7, 203.0.113.9", "X-Request-Id", id)
			if err := in.stop(); err != nil { // the log is written out
				t.Fatal(err)
			}
			var got string
			warned := false
			for line := range strings.Lines(in.stderr.String()) {
				var l struct {
					Level, Msg string
					RequestID  string `json:"request_id"`
					ClientIP   string `json:"client_ip"`
				}
				json.Unmarshal([]byte(line), &l)
				if l.RequestID == id {
					got = l.ClientIP
				}
				warned = warned || (l.Level == "WARN" && strings.HasPrefix(l.Msg, "PRODAPI_TRUSTED_PROXY_HEADER is set without PRODAPI_TRUSTED_PROXIES"))
			}
			if got != tc.want || warned != tc.warned {
				t.Errorf("client_ip %q, warned %v; want %q, %v\n%s", got, warned, tc.want, tc.warned, in.stderr)
			}
		})
	}
}
