package sources_test

import (
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A where's date literal is the original's format or RFC 3339, read as
// the same instant at MongoDB's millisecond precision; anything else
// stays a string.
func TestParseWhereDate(t *testing.T) {
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-11-20T00:00:00+0000", at, true},
		{"2026-11-20T00:00:00Z", at, true},
		{"2026-11-20T01:00:00+01:00", at, true},
		{"2026-11-19T19:00:00-05:00", at, true},
		{"2026-11-20T00:00:00.000Z", at, true},
		{"2026-11-20T00:00:00.123Z", at.Add(123 * time.Millisecond), true},
		{"2026-11-20T00:00:00.123456789Z", at.Add(123 * time.Millisecond), true}, // truncated as MongoDB stores it
		{"2026-11-20T01:00:00.5+01:00", at.Add(500 * time.Millisecond), true},
		{"2026-11-20", time.Time{}, false}, // a date alone is a string
		{"2026-11-20T00:00:00", time.Time{}, false},
		{"2026-11-20 00:00:00Z", time.Time{}, false},
		{"2026-11-20T00:00:00+01", time.Time{}, false},
		{"2026-13-20T00:00:00Z", time.Time{}, false},
		{"66a000000000000000000001", time.Time{}, false},
		{"urn:newsml:localhost:5000:2024-01-01T10:00:00.000000:item-0001", time.Time{}, false},
		{"", time.Time{}, false},
	} {
		got, ok := sources.ParseWhereDate(tc.in)
		if ok != tc.ok || !got.Equal(tc.want) || (ok && got.Location() != time.UTC) {
			t.Errorf("ParseWhereDate(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
