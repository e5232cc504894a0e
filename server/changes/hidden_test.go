package changes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/sources"
)

// The feed says nothing of what a token may not read. A DESKS_READ-only
// token follows a log of desk edits, pulled, long-polled and streamed,
// once alone and once with item edits between them: every answer and
// every byte of its stream are the same, once the positions (each of
// one length) are masked. Nothing in since, next, an event's id or a
// keepalive says whether, when or how many items changed.
func TestChangesSayNothingOfHiddenEntries(t *testing.T) {
	transcript := func(t *testing.T, items bool) []string {
		cs := newChangesServer(t)
		desks := token(t, sources.ScopeDesks)
		n := 0
		hidden := func() {
			if items {
				for range 3 {
					n++
					cs.log.Append("items", "urn:"+string(rune('a'+n)), sources.OpUpdate, changeAt.Add(time.Duration(n)*time.Second))
				}
			}
		}
		var out []string
		record := func(what, s string) {
			t.Helper()
			for _, pos := range positionRE.FindAllString(s, -1) {
				if len(pos) != changes.PositionLen(cs.feed) {
					t.Errorf("%s: a position of %d bytes, not %d: %s", what, len(pos), changes.PositionLen(cs.feed), pos)
				}
			}
			out = append(out, what+": "+positionRE.ReplaceAllString(s, "<position>"))
		}

		hidden()
		cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
		hidden()
		res, p := cs.get(t, "?since=now", desks)
		if p == nil {
			t.Fatalf("since=now: %d %s", res.status, res.body)
		}
		record("since=now", res.body)
		hidden()
		cs.log.Append("desks", "d2", sources.OpUpdate, changeAt)
		hidden()
		res, p = cs.get(t, "?since="+p.Meta.Since, desks)
		if p == nil {
			t.Fatalf("pulled: %d %s", res.status, res.body)
		}
		record("pulled", res.body)
		from := p.Meta.Since

		// A long poll woken by a desk edit, past item edits.
		ch := make(chan response, 1)
		go func() { // ends when the poll is answered
			res, _ := cs.get(t, "?wait=30&since="+from, desks)
			ch <- res
		}()
		cs.log.AwaitWaiter(t)
		hidden()
		if items {
			cs.log.AwaitWaiter(t)
		}
		cs.log.Append("desks", "d3", sources.OpUpdate, changeAt)
		res = <-ch
		record("long poll", res.body)

		// A long poll that sees nothing it may read.
		res, caught := cs.get(t, "?since=now", desks)
		if caught == nil {
			t.Fatalf("since=now: %d %s", res.status, res.body)
		}
		go func() { // ends when the poll is answered
			res, _ := cs.get(t, "?wait=30&since="+caught.Meta.Since, desks)
			ch <- res
		}()
		cs.log.AwaitWaiter(t)
		hidden()
		if items {
			cs.log.AwaitWaiter(t)
		}
		cs.timers.fire(t, 30*time.Second)
		res = <-ch
		record("long poll, nothing", res.body)

		// A stream from the position after d2: d3's event, then, past
		// item edits, a keepalive, then d4's.
		_, r := cs.openStream(t, "?since="+from, desks)
		ev := mustEvent(t, r)
		record("event", "id: "+ev.id+"\nevent: "+ev.event+"\ndata: "+ev.data+"\ncomments: "+strings.Join(ev.comments, ","))
		cs.log.AwaitWaiter(t)
		hidden()
		if items {
			cs.log.AwaitWaiter(t)
		}
		cs.timers.fire(t, changes.DefaultHeartbeat)
		ev = mustEvent(t, r)
		record("keepalive", "id: "+ev.id+" has id: "+map[bool]string{true: "yes", false: "no"}[ev.hasID]+"\nevent: "+ev.event+"\ndata: "+ev.data+"\ncomments: "+strings.Join(ev.comments, ","))
		cs.log.Append("desks", "d4", sources.OpUpdate, changeAt)
		ev = mustEvent(t, r)
		record("event", "id: "+ev.id+"\nevent: "+ev.event+"\ndata: "+ev.data)
		return out
	}
	var alone, among []string
	t.Run("desk edits alone", func(t *testing.T) { alone = transcript(t, false) })
	t.Run("desk edits among item edits", func(t *testing.T) { among = transcript(t, true) })
	if len(alone) < 7 {
		t.Fatalf("a transcript of %d answers", len(alone))
	}
	if diff := cmp.Diff(alone, among); diff != "" {
		t.Errorf("what the token read differs when items change (-alone +among item edits):\n%s", diff)
	}
}
