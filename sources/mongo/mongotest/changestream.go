package mongotest

import (
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
)

// Change streams, as a replica set serves them: an aggregate whose first
// stage is $changeStream opens a cursor on the change log; getMore waits
// (up to maxTimeMS, 1s by default) for events after the cursor's
// position. Every event and every batch carries a resume token,
// {_data: "<16 hex digits of the event's sequence>"}; resumeAfter or
// startAfter continue after one. A token older than the log's start
// (TruncateChanges) fails with ChangeStreamHistoryLost (286), as a
// server whose oplog rolled over does. Until EnableChangeStreams the
// server is a standalone and refuses $changeStream (40573).
//
// Events carry _id, operationType, clusterTime, ns and documentKey;
// later pipeline stages ($match, $project) are accepted and ignored: the
// cursor delivers every event.

const (
	codeChangeStreamHistoryLost = 286
	codeNotReplicaSet           = 40573
)

// A change is one event of the change log.
type change struct {
	seq  int64
	op   string
	db   string
	coll string
	id   string
	at   time.Time
}

type changeLog struct {
	enabled bool
	first   int64 // the oldest sequence still in the log
	events  []change
	wake    chan struct{} // closed and replaced at each event
}

// EnableChangeStreams makes the server answer $changeStream, as a
// replica set member does.
func (s *Server) EnableChangeStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.enabled = true
	if s.log.wake == nil {
		s.log.wake = make(chan struct{})
	}
	if s.log.first == 0 {
		s.log.first = 1
	}
}

// Change appends an event to the change log: a write of op ("insert",
// "update", "replace", "delete") to the document id of coll in Database.
func (s *Server) Change(coll, op, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.log.first + int64(len(s.log.events))
	s.log.events = append(s.log.events, change{seq: seq, op: op, db: Database, coll: coll, id: id, at: time.Now()})
	if s.log.wake != nil {
		close(s.log.wake)
	}
	s.log.wake = make(chan struct{})
}

// TruncateChanges forgets every event so far, as an oplog that rolled
// over: resuming from an earlier token fails with ChangeStreamHistoryLost.
func (s *Server) TruncateChanges() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.first += int64(len(s.log.events)) + 1
	s.log.events = nil
}

func token(seq int64) string { return fmt.Sprintf("%016x", seq) }

func appendToken(b []byte, key string, seq int64) []byte {
	idx, b := bsoncore.AppendDocumentElementStart(b, key)
	b = bsoncore.AppendStringElement(b, "_data", token(seq))
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

// streamPos parses a resume token: the sequence of the event it names.
func streamPos(v bsoncore.Value) (int64, bool) {
	d, ok := v.DocumentOK()
	if !ok {
		return 0, false
	}
	data, ok := d.Lookup("_data").StringValueOK()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(data, 16, 64)
	return n, err == nil
}

// changeStream opens a change stream cursor; spec is the $changeStream
// stage's argument.
func (s *Server) changeStream(ns string, spec bsoncore.Value) bsoncore.Document {
	s.mu.Lock()
	enabled, first, next := s.log.enabled, s.log.first, s.log.first+int64(len(s.log.events))
	s.mu.Unlock()
	if !enabled {
		return commandError(codeNotReplicaSet, "Location40573", "The $changeStream stage is only supported on replica sets")
	}
	pos := next - 1 // after the newest event: only what comes next
	if d, ok := spec.DocumentOK(); ok {
		for _, key := range []string{"resumeAfter", "startAfter"} {
			if v, err := d.LookupErr(key); err == nil {
				p, ok := streamPos(v)
				if !ok {
					return badValue("%s must be a resume token", key)
				}
				if p < first-1 {
					return commandError(codeChangeStreamHistoryLost, "ChangeStreamHistoryLost",
						"Resume of change stream was not possible, as the resume point may no longer be in the oplog.", "NonResumableChangeStreamError")
				}
				pos = p
			}
		}
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.cursors[id] = &cursor{ns: ns, stream: true, pos: pos}
	s.mu.Unlock()
	return s.streamReply(id, ns, nil, pos, "firstBatch")
}

// streamGetMore answers a getMore on a change stream cursor: the events
// after its position, waiting up to maxTime for the first.
func (s *Server) streamGetMore(id int64, c *cursor, batch int64, maxTime time.Duration) bsoncore.Document {
	deadline := time.NewTimer(maxTime)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if c.pos < s.log.first-1 {
			s.mu.Unlock()
			return commandError(codeChangeStreamHistoryLost, "ChangeStreamHistoryLost",
				"Resume of change stream was not possible, as the resume point may no longer be in the oplog.", "NonResumableChangeStreamError")
		}
		var out []change
		for _, e := range s.log.events {
			if e.seq > c.pos && (batch <= 0 || int64(len(out)) < batch) {
				out = append(out, e)
			}
		}
		wake := s.log.wake
		if len(out) > 0 {
			c.pos = out[len(out)-1].seq
		}
		s.cursors[id] = c
		pos := c.pos
		s.mu.Unlock()
		if len(out) > 0 {
			return s.streamReply(id, c.ns, out, pos, "nextBatch")
		}
		select {
		case <-wake:
		case <-deadline.C:
			return s.streamReply(id, c.ns, nil, pos, "nextBatch")
		case <-s.done:
			return s.streamReply(id, c.ns, nil, pos, "nextBatch")
		}
	}
}

func (s *Server) streamReply(id int64, ns string, events []change, pos int64, field string) bsoncore.Document {
	return build(func(b []byte) []byte {
		cidx, b := bsoncore.AppendDocumentElementStart(b, "cursor")
		aidx, b := bsoncore.AppendArrayElementStart(b, field)
		for i, e := range events {
			didx, bb := bsoncore.AppendDocumentElementStart(b, strconv.Itoa(i))
			bb = appendToken(bb, "_id", e.seq)
			bb = bsoncore.AppendStringElement(bb, "operationType", e.op)
			bb = bsoncore.AppendTimestampElement(bb, "clusterTime", uint32(e.at.Unix()), uint32(e.seq))
			nidx, bb := bsoncore.AppendDocumentElementStart(bb, "ns")
			bb = bsoncore.AppendStringElement(bb, "db", e.db)
			bb = bsoncore.AppendStringElement(bb, "coll", e.coll)
			bb, _ = bsoncore.AppendDocumentEnd(bb, nidx)
			kidx, bb := bsoncore.AppendDocumentElementStart(bb, "documentKey")
			bb = bsoncore.AppendStringElement(bb, "_id", e.id)
			bb, _ = bsoncore.AppendDocumentEnd(bb, kidx)
			b, _ = bsoncore.AppendDocumentEnd(bb, didx)
		}
		b, _ = bsoncore.AppendArrayEnd(b, aidx)
		b = appendToken(b, "postBatchResumeToken", pos)
		b = bsoncore.AppendInt64Element(b, "id", id)
		b = bsoncore.AppendStringElement(b, "ns", ns)
		b, _ = bsoncore.AppendDocumentEnd(b, cidx)
		return bsoncore.AppendDoubleElement(b, "ok", 1)
	})
}

// Replace writes doc over the document of coll with the same _id (or
// appends it) and logs the change ("replace", or "insert" when it is
// new), as a write on a replica set would.
func (s *Server) Replace(coll string, doc *sources.Doc) error {
	raw, err := bsondoc.FromDoc(doc)
	if err != nil {
		return fmt.Errorf("mongotest: replace in %s: %w", coll, err)
	}
	idv, _ := doc.Get("_id")
	id, ok := sources.IDString(idv)
	if !ok {
		return fmt.Errorf("mongotest: replace in %s: the document's _id is not a string or an ObjectID", coll)
	}
	rec := record{raw: raw, doc: doc.Clone()}
	op := "insert"
	s.mu.Lock()
	recs := s.colls[coll]
	for i, r := range recs {
		if v, _ := r.doc.Get("_id"); v == idv {
			recs[i], op = rec, "replace"
			break
		}
	}
	if op == "insert" {
		s.colls[coll] = append(recs, rec)
	}
	s.mu.Unlock()
	s.Change(coll, op, id)
	return nil
}
