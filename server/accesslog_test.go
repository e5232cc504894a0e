package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
)

// PRODAPI_ACCESS_LOG_HITS: hits are logged one in round(1/share); every
// other request always.
func TestAccessLogSamplesHits(t *testing.T) {
	loader := render.LoaderFunc(func(_ context.Context, q *sources.Query) (*render.Representation, error) {
		outcome := "hit"
		if strings.HasPrefix(q.ID, "miss") {
			outcome = "miss"
		}
		return &render.Representation{Status: 200, Body: []byte(`{}`), Total: -1, Outcome: outcome, CacheStatus: "prodapi; " + outcome}, nil
	})
	tok := token(t, sources.AllScopes...)
	for _, tc := range []struct {
		share     *float64
		wantHits  int
		wantOther int
	}{
		{nil, 200, 10},
		{ptr(1.0), 200, 10},
		{ptr(0.01), 2, 10},
		{ptr(0.1), 20, 10},
		{ptr(0.0), 0, 10},
	} {
		var log bytes.Buffer
		h := New(loader, Options{Auth: AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
			Now: func() time.Time { return testNow }, AccessLog: &log, AccessLogHits: tc.share}).Handler()
		serve := func(target string) {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			r.Header.Set("Authorization", tok)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		for range 200 {
			serve("/prodapi/v1/items/hit")
		}
		for range 5 {
			serve("/prodapi/v1/items/miss")
			serve("/prodapi/v1/nothing-here") // 404, no outcome
		}
		hits, other := 0, 0
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, `"cache":"hit"`) {
				hits++
			} else {
				other++
			}
		}
		if hits != tc.wantHits || other != tc.wantOther {
			share := "nil"
			if tc.share != nil {
				share = fmt.Sprint(*tc.share)
			}
			t.Errorf("share %s: %d hit lines and %d others, want %d and %d", share, hits, other, tc.wantHits, tc.wantOther)
		}
	}
}

func ptr[T any](v T) *T { return &v }
