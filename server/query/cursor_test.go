package query

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// testClock is a clock a test moves by hand.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newTestCursors(t *testing.T, secret string) (*Cursors, *testClock) {
	t.Helper()
	clock := &testClock{t: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)}
	c, err := NewCursors([]byte(secret), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

// walkPage parses a list request of a walk, failing the test on a
// refusal.
func walkPage(t *testing.T, c *Cursors, res, raw string) *sources.Query {
	t.Helper()
	q, err := c.Parse(resource(t, res), "", raw)
	if err != nil {
		t.Fatalf("Parse(%s?%s): %v", res, raw, err)
	}
	if q.Cursor == nil {
		t.Fatalf("Parse(%s?%s): not a walk", res, raw)
	}
	return q
}

// sealed is the cursor the page of q gives for p.
func sealed(t *testing.T, q *sources.Query, p sources.Position) string {
	t.Helper()
	s, err := q.Cursor.Seal(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cursorRefusal(t *testing.T, err error) string {
	t.Helper()
	qe, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %v (%T), want a *query.Error", err, err)
	}
	if qe.Status != 400 {
		t.Errorf("status %d, want 400", qe.Status)
	}
	if !strings.HasPrefix(qe.Message, "cursor: ") {
		t.Errorf("message %q does not name the parameter", qe.Message)
	}
	return qe.Message
}

func TestCursorStartsAWalk(t *testing.T) {
	c, _ := newTestCursors(t, "a secret of the fleet's, at least thirty-two bytes")
	for _, res := range sources.Resources() {
		q := walkPage(t, c, res.Name, "cursor=")
		if q.Cursor.After != nil || q.Page != 1 || q.Skip() != 0 {
			t.Errorf("%s: first page After %v, page %d, skip %d", res.Name, q.Cursor.After, q.Page, q.Skip())
		}
		if diff := cmp.Diff(q.Params, []sources.Param{{Name: "cursor", Value: ""}}); diff != "" {
			t.Errorf("%s params (-got +want):\n%s", res.Name, diff)
		}
		if res.Search {
			if q.Search.Has("from") {
				t.Errorf("%s: a walk's search body has from: %s", res.Name, js(q.Search))
			}
		}
	}
	// Details ignore it, as any parameter a detail does not read.
	q, err := c.Parse(resource(t, "items"), "urn:1", "cursor=abc")
	if err != nil || q.Cursor != nil || len(q.Params) != 0 {
		t.Errorf("detail with a cursor: %+v, %v", q, err)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	c, _ := newTestCursors(t, "a secret of the fleet's, at least thirty-two bytes")
	oid, _ := sources.ParseObjectID("66a000000000000000000001")
	pos := sources.Position{
		Values: []any{nil, true, false, int64(-42), int64(9223372036854775807), 2.5, "déjà vu", oid,
			time.Date(2026, 11, 20, 10, 0, 0, 123456789, time.UTC), sources.D("a", int64(1), "b", []any{"x"}), []any{}},
		PIT:   "46ToAwMDaWR5BXV1aWQyKwZub2RlXzMAAAAAAAAAACoBYwADaWR4BXV1aWQxAgZub2RlXzEAAAAAAAAAAAEBYQADaWR5BXV1aWQy",
		Total: 10000,
	}
	first := walkPage(t, c, "users", qs("sort", "-username", "where", `{"is_active": true}`, "cursor", ""))
	token := sealed(t, first, pos)
	if strings.Trim(token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		t.Errorf("cursor %q is not URL-safe base64", token)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	for _, plain := range []string{"déjà vu", pos.PIT[:20]} {
		if bytes.Contains(raw, []byte(plain)) {
			t.Errorf("the cursor carries %q in the clear", plain)
		}
	}
	// The same walk, max_results and pretty changed: still its cursor.
	next := walkPage(t, c, "users", qs("where", `{"is_active": true}`, "sort", "-username", "max_results", "3", "pretty", "", "cursor", token))
	sameDoc := cmp.Comparer(func(a, b *sources.Doc) bool { return js(a) == js(b) })
	if diff := cmp.Diff(next.Cursor.After, &pos, sameDoc); diff != "" {
		t.Errorf("position (-got +want):\n%s", diff)
	}
	if got := next.Params[len(next.Params)-2]; got.Name != "cursor" || got.Value != token {
		t.Errorf("params %v do not carry the cursor", next.Params)
	}
	// Two seals of one position differ (each has its own salt) and both open.
	again := sealed(t, first, pos)
	if again == token {
		t.Error("two cursors sealed alike")
	}
	if _, err := c.Parse(resource(t, "users"), "", qs("where", `{"is_active": true}`, "sort", "-username", "cursor", again)); err != nil {
		t.Error(err)
	}
	// A position without a total (and every cursor sealed before
	// positions carried one) opens with none.
	for _, total := range []int{0, 1, 41} {
		p := sources.Position{Values: []any{"jdoe", int64(7)}, Total: total}
		got := walkPage(t, c, "users", qs("where", `{"is_active": true}`, "sort", "-username", "cursor", sealed(t, first, p)))
		if diff := cmp.Diff(got.Cursor.After, &p); diff != "" {
			t.Errorf("position of total %d (-got +want):\n%s", total, diff)
		}
	}
}

func TestCursorRefused(t *testing.T) {
	c, clock := newTestCursors(t, "a secret of the fleet's, at least thirty-two bytes")
	other, _ := newTestCursors(t, "another fleet's secret, also thirty-two bytes long")
	pos := sources.Position{Values: []any{"2026-11-20", "urn:1"}}
	items := walkPage(t, c, "items", qs("sort", "-versioncreated", "q", "flood", "cursor", ""))
	token := sealed(t, items, pos)
	foreignKey := sealed(t, walkPage(t, other, "items", qs("sort", "-versioncreated", "q", "flood", "cursor", "")), pos)
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	flipped := bytes.Clone(raw)
	flipped[len(flipped)/2] ^= 1
	enc := base64.RawURLEncoding.EncodeToString

	for _, tc := range []struct {
		name, res, raw string
		want           string // a word of the message
	}{
		{"forged", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", enc(flipped)), "not a cursor this service issued"},
		{"truncated", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", token[:len(token)-4]), "not a cursor"},
		{"not base64", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", "%%%"), "not a cursor"},
		{"too short", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", "AQ"), "not a cursor"},
		{"made up", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", enc([]byte(`{"after":["x"]}`))), "not a cursor"},
		{"another secret", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", foreignKey), "not a cursor"},
		{"too long", "items", qs("sort", "-versioncreated", "q", "flood", "cursor", strings.Repeat("A", maxCursor+1)), "not a cursor"},
		{"another sort", "items", qs("sort", "versioncreated", "q", "flood", "cursor", token), "another request"},
		{"another search", "items", qs("sort", "-versioncreated", "q", "fire", "cursor", token), "another request"},
		{"a filter added", "items", qs("sort", "-versioncreated", "q", "flood", "filter", `{"term": {"type": "text"}}`, "cursor", token), "another request"},
		{"another projection", "items", qs("sort", "-versioncreated", "q", "flood", "projection", `{"headline": 1}`, "cursor", token), "another request"},
		{"another resource", "planning", qs("sort", "-versioncreated", "q", "flood", "cursor", token), "another request"},
		{"with page", "items", qs("sort", "-versioncreated", "q", "flood", "page", "2", "cursor", token), "page"},
		{"first page with page", "items", qs("page", "1", "cursor", ""), "page"},
		{"with from", "items", qs("source", `{"from": 10}`, "cursor", ""), "from"},
		{"by score", "items", qs("source", `{"sort": ["_score"]}`, "cursor", ""), "_score"},
		{"by _doc", "contacts", qs("source", `{"sort": [{"_doc": "asc"}]}`, "cursor", ""), "_doc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Parse(resource(t, tc.res), "", tc.raw)
			if msg := cursorRefusal(t, err); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to say %q", msg, tc.want)
			}
		})
	}

	t.Run("expired", func(t *testing.T) {
		ok := qs("sort", "-versioncreated", "q", "flood", "cursor", token)
		clock.t = clock.t.Add(CursorLifetime - time.Second)
		if _, err := c.Parse(resource(t, "items"), "", ok); err != nil {
			t.Fatalf("a cursor within its lifetime: %v", err)
		}
		clock.t = clock.t.Add(time.Second)
		if msg := cursorRefusal(t, errOf(c.Parse(resource(t, "items"), "", ok))); !strings.Contains(msg, "expired") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("expired with its point in time", func(t *testing.T) {
		pit := sources.Position{Values: []any{int64(1)}, PIT: "p", Expires: clock.t.Add(time.Hour)}
		q := walkPage(t, c, "contacts", "cursor=")
		raw := qs("cursor", sealed(t, q, pit))
		if _, err := c.Parse(resource(t, "contacts"), "", raw); err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(time.Hour)
		if msg := cursorRefusal(t, errOf(c.Parse(resource(t, "contacts"), "", raw))); !strings.Contains(msg, "expired") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("without Cursors", func(t *testing.T) {
		cursorRefusal(t, errOf(Parse(resource(t, "items"), "", "cursor=")))
	})
	t.Run("a hidden field is refused before the cursor is read", func(t *testing.T) {
		_, err := c.Parse(resource(t, "users"), "", qs("sort", "password", "cursor", token))
		if qe, ok := errors.AsType[*Error](err); !ok || !strings.HasPrefix(qe.Message, "sort: ") {
			t.Errorf("error %v, want the sort's refusal", err)
		}
	})
}

func errOf(_ *sources.Query, err error) error { return err }

// A next link must stay followable: a walk is refused with 414 when its
// parameters leave no room for the cursor that would continue it.
func TestCursorLeavesRoomForTheNextLink(t *testing.T) {
	c, _ := newTestCursors(t, "a secret of the fleet's, at least thirty-two bytes")
	q := strings.Repeat("a", MaxTarget-linkReserve-maxCursor/2)
	if _, err := c.Parse(resource(t, "items"), "", qs("q", q)); err != nil {
		t.Fatalf("without a cursor: %v", err)
	}
	_, err := c.Parse(resource(t, "items"), "", qs("q", q, "cursor", ""))
	if qe, ok := errors.AsType[*Error](err); !ok || qe.Status != 414 {
		t.Errorf("a walk with no room for its next cursor: %v, want 414", err)
	}
}

// A position whose values would make the next link too long is a 400
// for the page, not a link nobody can follow.
func TestCursorTooLongToSeal(t *testing.T) {
	c, _ := newTestCursors(t, "a secret of the fleet's, at least thirty-two bytes")
	q := walkPage(t, c, "desks", "cursor=")
	_, err := q.Cursor.Seal(sources.Position{Values: []any{strings.Repeat("x", maxCursor), "id"}})
	if qe, ok := errors.AsType[*Error](err); !ok || qe.Status != 400 || !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("sealing an oversized position: %v, want a 400 that is an ErrInvalid", err)
	}
}

func TestNewCursorsNeedsASecret(t *testing.T) {
	if _, err := NewCursors(nil, nil); err == nil {
		t.Error("NewCursors without a secret worked")
	}
}
