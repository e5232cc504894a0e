package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
)

// Every kind of error a handler returns is answered with the status
// sources.Classify gives it, in words of its own or of its kind, never
// the error's text.
func TestErrorOf(t *testing.T) {
	type answer struct {
		Status     int
		Msg        string
		RetryAfter string
	}
	challenge := http.Header{"Www-Authenticate": {`Bearer realm="prodapi"`}}
	for _, tc := range []struct {
		name string
		err  error
		want answer
	}{
		{"a handler's answer", &httperr.Error{Status: 401, Msg: msgCredentials, Header: challenge}, answer{401, msgCredentials, ""}},
		{"a handler's answer, wrapped", fmt.Errorf("x: %w", &httperr.Error{Status: 405, Msg: msgMethodNotAllowed}), answer{405, msgMethodNotAllowed, ""}},
		{"a bad parameter", &query.Error{Status: 400, Message: "where: unknown operator"}, answer{400, "where: unknown operator", ""}},
		{"a target too long", &query.Error{Status: 414, Message: "request target too long"}, answer{414, "request target too long", ""}},
		{"a cursor too long", fmt.Errorf("%w: %w", &query.Error{Status: 400, Message: "cursor: too long"}, sources.ErrInvalid), answer{400, "cursor: too long", ""}},
		{"not found", fmt.Errorf("mongo: get items: %w", sources.ErrNotFound), answer{404, msgNotFound, ""}},
		{"the backend refused the query", fmt.Errorf("elastic: search: %w", sources.ErrInvalid), answer{400, msgRejected, ""}},
		{"a cursor walk that cannot continue", fmt.Errorf("elastic: search: %w", sources.ErrCursor), answer{400, msgCursor, ""}},
		{"a token expired", fmt.Errorf("changelog: read: %w", sources.ErrExpired), answer{410, msgGone, ""}},
		{"unavailable", fmt.Errorf("mongo: find: %w", sources.ErrUnavailable), answer{503, msgUnavailable, "5"}},
		{"partial", fmt.Errorf("elastic: search: %w", sources.ErrPartial), answer{503, msgUnavailable, "5"}},
		{"timeout", fmt.Errorf("elastic: search: %w", sources.ErrTimeout), answer{504, msgTimeout, "5"}},
		{"deadline", fmt.Errorf("cache: waiting for a load: %w", context.DeadlineExceeded), answer{504, msgTimeout, "5"}},
		{"canceled", fmt.Errorf("cache: waiting for a load: %w", context.Canceled), answer{499, "client closed request", ""}},
		{"a panic", fmt.Errorf("server: panic: %v", "boom"), answer{500, msgInternal, ""}},
		{"anything else", errors.New("redis: connection refused"), answer{500, msgInternal, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			he := errorOf(tc.err)
			got := answer{he.Status, he.Msg, he.Header.Get("Retry-After")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errorOf(%v) (-want +got):\n%s", tc.err, diff)
			}
			if _, status := sources.Classify(tc.err); status != he.Status {
				t.Errorf("errorOf(%v) answers %d, sources.Classify says %d", tc.err, he.Status, status)
			}
		})
	}
}

// Every kind a failure can be has its words: a new kind in sources'
// table needs its message here.
func TestKindMessages(t *testing.T) {
	for _, k := range sources.Kinds() {
		if k == sources.KindNone || k == sources.KindRefused {
			continue // no failure; a refusal brings its own words
		}
		if kindMessages[k] == "" {
			t.Errorf("no message for %v", k)
		}
	}
}
