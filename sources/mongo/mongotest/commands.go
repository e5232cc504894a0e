package mongotest

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"github.com/prodapi/prodapi/sources/sandbox"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Server error codes the fake answers with.
const (
	codeBadValue        = 2
	codeFailedToParse   = 9
	codeTypeMismatch    = 14
	codeCursorNotFound  = 43
	codeCommandNotFound = 59
	codeUnknownStage    = 40324
)

// defaultBatch is the server's first batch size when none is asked for.
const defaultBatch = 101

type cursor struct {
	ns   string
	docs []bsoncore.Document
	// A change stream cursor (changestream.go): the sequence of the last
	// event delivered.
	stream bool
	pos    int64
}

func (s *Server) dispatch(name string, req *request, connID int32) bsoncore.Document {
	cmd := req.cmd
	switch name {
	case "hello", "isMaster", "ismaster":
		return hello(name, connID, s.wireVersion())
	case "ping", "endSessions":
		return okReply()
	case "buildInfo", "buildinfo":
		return build(func(b []byte) []byte {
			version, array := s.versionInfo()
			b = bsoncore.AppendStringElement(b, "version", version)
			aidx, b := bsoncore.AppendArrayElementStart(b, "versionArray")
			for i, v := range array {
				b = bsoncore.AppendInt32Element(b, strconv.Itoa(i), v)
			}
			b, _ = bsoncore.AppendArrayEnd(b, aidx)
			b = bsoncore.AppendInt32Element(b, "maxBsonObjectSize", 16*1024*1024)
			return bsoncore.AppendDoubleElement(b, "ok", 1)
		})
	case "find":
		return s.find(cmd)
	case "getMore":
		return s.getMore(cmd)
	case "killCursors":
		return s.killCursors(cmd)
	case "aggregate":
		return s.aggregate(cmd)
	case "count":
		return s.count(cmd)
	case "listIndexes":
		return s.listIndexes(cmd)
	}
	return commandError(codeCommandNotFound, "CommandNotFound", fmt.Sprintf("no such command: '%s'", name))
}

func build(fn func(b []byte) []byte) bsoncore.Document {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = fn(b)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b
}

func okReply() bsoncore.Document {
	return build(func(b []byte) []byte { return bsoncore.AppendDoubleElement(b, "ok", 1) })
}

func commandError(code int32, codeName, msg string, labels ...string) bsoncore.Document {
	return build(func(b []byte) []byte {
		b = bsoncore.AppendDoubleElement(b, "ok", 0)
		b = bsoncore.AppendStringElement(b, "errmsg", msg)
		b = bsoncore.AppendInt32Element(b, "code", code)
		b = bsoncore.AppendStringElement(b, "codeName", codeName)
		if len(labels) > 0 {
			aidx, bb := bsoncore.AppendArrayElementStart(b, "errorLabels")
			for i, l := range labels {
				bb = bsoncore.AppendStringElement(bb, strconv.Itoa(i), l)
			}
			b, _ = bsoncore.AppendArrayEnd(bb, aidx)
		}
		return b
	})
}

func badValue(format string, args ...any) bsoncore.Document {
	return commandError(codeBadValue, "BadValue", fmt.Sprintf(format, args...))
}

func hello(name string, connID, maxWire int32) bsoncore.Document {
	return build(func(b []byte) []byte {
		b = bsoncore.AppendBooleanElement(b, "helloOk", true)
		if name == "hello" {
			b = bsoncore.AppendBooleanElement(b, "isWritablePrimary", true)
		} else {
			b = bsoncore.AppendBooleanElement(b, "ismaster", true)
		}
		b = bsoncore.AppendInt32Element(b, "maxBsonObjectSize", 16*1024*1024)
		b = bsoncore.AppendInt32Element(b, "maxMessageSizeBytes", maxMessage)
		b = bsoncore.AppendInt32Element(b, "maxWriteBatchSize", 100000)
		b = bsoncore.AppendDateTimeElement(b, "localTime", time.Now().UnixMilli())
		b = bsoncore.AppendInt32Element(b, "logicalSessionTimeoutMinutes", 30)
		b = bsoncore.AppendInt32Element(b, "connectionId", connID)
		b = bsoncore.AppendInt32Element(b, "minWireVersion", 0)
		b = bsoncore.AppendInt32Element(b, "maxWireVersion", maxWire)
		b = bsoncore.AppendBooleanElement(b, "readOnly", false)
		return bsoncore.AppendDoubleElement(b, "ok", 1)
	})
}

// snapshot returns a collection's records; the slice is the caller's.
func (s *Server) snapshot(coll string) []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.colls[coll])
}

func filterRecords(recs []record, filter *sources.Doc) ([]record, error) {
	var out []record
	for _, r := range recs {
		ok, err := sandbox.MatchLiteral(r.doc, filter)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// sortKeys reads a sort document ({field: 1|-1, ...}).
func sortKeys(v bsoncore.Value) ([]sources.SortKey, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("sort must be a document")
	}
	elems, err := d.Elements()
	if err != nil {
		return nil, err
	}
	keys := make([]sources.SortKey, 0, len(elems))
	for _, e := range elems {
		dir, ok := e.Value().AsFloat64OK()
		if !ok || (dir != 1 && dir != -1) {
			return nil, fmt.Errorf("bad sort direction for %q", e.Key())
		}
		keys = append(keys, sources.SortKey{Field: e.Key(), Desc: dir < 0})
	}
	return keys, nil
}

func sortRecords(recs []record, keys []sources.SortKey) []record {
	docs := make([]*sources.Doc, len(recs))
	byDoc := make(map[*sources.Doc]record, len(recs))
	for i, r := range recs {
		docs[i] = r.doc
		byDoc[r.doc] = r
	}
	bsonorder.SortDocs(docs, keys)
	out := make([]record, len(docs))
	for i, d := range docs {
		out[i] = byDoc[d]
	}
	return out
}

// intArg reads an optional numeric argument.
func intArg(cmd bsoncore.Document, key string) (int64, bool, error) {
	v, err := cmd.LookupErr(key)
	if err != nil {
		return 0, false, nil
	}
	n, ok := v.AsInt64OK()
	if !ok {
		return 0, false, fmt.Errorf("%s must be a number", key)
	}
	return n, true, nil
}

func docArg(cmd bsoncore.Document, key string) (*sources.Doc, error) {
	v, err := cmd.LookupErr(key)
	if err != nil {
		return sources.NewDoc(), nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("%s must be a document", key)
	}
	return bsondoc.ToDoc(d)
}

func (s *Server) find(cmd bsoncore.Document) bsoncore.Document {
	coll, ok := cmd.Lookup("find").StringValueOK()
	if !ok {
		return badValue("collection name has invalid type")
	}
	db, _ := cmd.Lookup("$db").StringValueOK()
	filter, err := docArg(cmd, "filter")
	if err != nil {
		return commandError(codeTypeMismatch, "TypeMismatch", err.Error())
	}
	recs, err := filterRecords(s.snapshot(coll), filter)
	if err != nil {
		return badValue("%v", err)
	}
	if v, err := cmd.LookupErr("sort"); err == nil {
		keys, err := sortKeys(v)
		if err != nil {
			return badValue("%v", err)
		}
		recs = sortRecords(recs, keys)
	}
	skip, _, err1 := intArg(cmd, "skip")
	limit, _, err2 := intArg(cmd, "limit")
	batch, hasBatch, err3 := intArg(cmd, "batchSize")
	if err := firstErr(err1, err2, err3); err != nil {
		return commandError(codeFailedToParse, "FailedToParse", err.Error())
	}
	if skip < 0 || batch < 0 {
		return badValue("skip and batchSize must be non-negative")
	}
	single, _ := cmd.Lookup("singleBatch").BooleanOK()
	if limit < 0 {
		limit, single = -limit, true
	}
	recs = window(recs, skip, limit)
	docs := make([]bsoncore.Document, len(recs))
	proj, err := docArg(cmd, "projection")
	if err != nil {
		return commandError(codeTypeMismatch, "TypeMismatch", err.Error())
	}
	for i, r := range recs {
		if docs[i], err = project(r, proj); err != nil {
			return badValue("%v", err)
		}
	}
	if !hasBatch {
		batch = defaultBatch
	}
	return s.cursorReply(db+"."+coll, docs, batch, single, "firstBatch")
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func window(recs []record, skip, limit int64) []record {
	if skip >= int64(len(recs)) {
		return nil
	}
	recs = recs[skip:]
	if limit > 0 && limit < int64(len(recs)) {
		recs = recs[:limit]
	}
	return recs
}

// cursorReply answers with the first batch size docs and keeps the rest
// under a new cursor id. batch 0 means all.
func (s *Server) cursorReply(ns string, docs []bsoncore.Document, batch int64, single bool, field string) bsoncore.Document {
	n := int64(len(docs))
	if batch > 0 && batch < n {
		n = batch
	}
	var id int64
	if n < int64(len(docs)) && !single {
		s.mu.Lock()
		s.nextID++
		id = s.nextID
		s.cursors[id] = &cursor{ns: ns, docs: docs[n:]}
		s.mu.Unlock()
	}
	return build(func(b []byte) []byte {
		cidx, b := bsoncore.AppendDocumentElementStart(b, "cursor")
		aidx, b := bsoncore.AppendArrayElementStart(b, field)
		for i, d := range docs[:n] {
			b = bsoncore.AppendDocumentElement(b, strconv.Itoa(i), d)
		}
		b, _ = bsoncore.AppendArrayEnd(b, aidx)
		b = bsoncore.AppendInt64Element(b, "id", id)
		b = bsoncore.AppendStringElement(b, "ns", ns)
		b, _ = bsoncore.AppendDocumentEnd(b, cidx)
		return bsoncore.AppendDoubleElement(b, "ok", 1)
	})
}

func (s *Server) getMore(cmd bsoncore.Document) bsoncore.Document {
	id, ok := cmd.Lookup("getMore").Int64OK()
	if !ok {
		return commandError(codeTypeMismatch, "TypeMismatch", "getMore takes a long cursor id")
	}
	batch, _, err := intArg(cmd, "batchSize")
	if err != nil || batch < 0 {
		return commandError(codeFailedToParse, "FailedToParse", "bad batchSize")
	}
	s.mu.Lock()
	c, ok := s.cursors[id]
	delete(s.cursors, id)
	s.mu.Unlock()
	if !ok {
		return commandError(codeCursorNotFound, "CursorNotFound", fmt.Sprintf("cursor id %d not found", id))
	}
	if c.stream {
		maxTime := time.Second
		if ms, ok, _ := intArg(cmd, "maxTimeMS"); ok && ms > 0 {
			maxTime = time.Duration(ms) * time.Millisecond
		}
		return s.streamGetMore(id, c, batch, maxTime)
	}
	return s.cursorReply(c.ns, c.docs, batch, false, "nextBatch")
}

func (s *Server) killCursors(cmd bsoncore.Document) bsoncore.Document {
	arr, ok := cmd.Lookup("cursors").ArrayOK()
	if !ok {
		return commandError(codeTypeMismatch, "TypeMismatch", "cursors must be an array")
	}
	vals, _ := arr.Values()
	var killed, missing []int64
	s.mu.Lock()
	for _, v := range vals {
		id, _ := v.AsInt64OK()
		if _, ok := s.cursors[id]; ok {
			delete(s.cursors, id)
			killed = append(killed, id)
		} else {
			missing = append(missing, id)
		}
	}
	s.mu.Unlock()
	return build(func(b []byte) []byte {
		for _, l := range []struct {
			key string
			ids []int64
		}{{"cursorsKilled", killed}, {"cursorsNotFound", missing}, {"cursorsAlive", nil}, {"cursorsUnknown", nil}} {
			aidx, bb := bsoncore.AppendArrayElementStart(b, l.key)
			for i, id := range l.ids {
				bb = bsoncore.AppendInt64Element(bb, strconv.Itoa(i), id)
			}
			b, _ = bsoncore.AppendArrayEnd(bb, aidx)
		}
		return bsoncore.AppendDoubleElement(b, "ok", 1)
	})
}

func (s *Server) count(cmd bsoncore.Document) bsoncore.Document {
	coll, ok := cmd.Lookup("count").StringValueOK()
	if !ok {
		return badValue("collection name has invalid type")
	}
	filter, err := docArg(cmd, "query")
	if err != nil {
		return commandError(codeTypeMismatch, "TypeMismatch", err.Error())
	}
	recs, err := filterRecords(s.snapshot(coll), filter)
	if err != nil {
		return badValue("%v", err)
	}
	skip, _, err1 := intArg(cmd, "skip")
	limit, _, err2 := intArg(cmd, "limit")
	if err := firstErr(err1, err2); err != nil {
		return commandError(codeFailedToParse, "FailedToParse", err.Error())
	}
	n := len(window(recs, max(skip, 0), max(limit, -limit)))
	return build(func(b []byte) []byte {
		b = bsoncore.AppendInt32Element(b, "n", int32(n))
		return bsoncore.AppendDoubleElement(b, "ok", 1)
	})
}

func (s *Server) aggregate(cmd bsoncore.Document) bsoncore.Document {
	db, _ := cmd.Lookup("$db").StringValueOK()
	pipeline, ok := cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return commandError(codeTypeMismatch, "TypeMismatch", "pipeline must be an array")
	}
	stages, err := pipeline.Values()
	if err != nil {
		return badValue("%v", err)
	}
	if len(stages) > 0 {
		if sd, ok := stages[0].DocumentOK(); ok {
			if v, err := sd.LookupErr("$changeStream"); err == nil {
				coll, _ := cmd.Lookup("aggregate").StringValueOK() // "" for a database's stream
				ns := db + "." + coll
				if coll == "" {
					ns = db + ".$cmd.aggregate"
				}
				return s.changeStream(ns, v)
			}
		}
	}
	coll, ok := cmd.Lookup("aggregate").StringValueOK()
	if !ok {
		return badValue("aggregate on a collection only")
	}
	recs := s.snapshot(coll)
	for _, st := range stages {
		sd, ok := st.DocumentOK()
		if !ok {
			return badValue("each pipeline stage must be a document")
		}
		elems, err := sd.Elements()
		if err != nil || len(elems) != 1 {
			return badValue("a pipeline stage must have exactly one field")
		}
		name, arg := elems[0].Key(), elems[0].Value()
		switch name {
		case "$match":
			d, ok := arg.DocumentOK()
			if !ok {
				return badValue("the match filter must be an expression in an object")
			}
			filter, err := bsondoc.ToDoc(d)
			if err == nil {
				recs, err = filterRecords(recs, filter)
			}
			if err != nil {
				return badValue("%v", err)
			}
		case "$sort":
			keys, err := sortKeys(arg)
			if err != nil {
				return badValue("%v", err)
			}
			recs = sortRecords(recs, keys)
		case "$skip", "$limit":
			n, ok := arg.AsInt64OK()
			if !ok || n < 0 || (name == "$limit" && n == 0) {
				return badValue("invalid argument to %s stage", name)
			}
			if name == "$skip" {
				recs = window(recs, n, 0)
			} else {
				recs = window(recs, 0, n)
			}
		case "$count":
			field, ok := arg.StringValueOK()
			if !ok || field == "" || strings.HasPrefix(field, "$") || strings.Contains(field, ".") {
				return badValue("the count field must be a non-empty string without $ or .")
			}
			recs = countStage(recs, field)
		case "$group":
			out, err := groupStage(recs, arg)
			if err != nil {
				return badValue("%v", err)
			}
			recs = out
		default:
			return commandError(codeUnknownStage, "Location40324", fmt.Sprintf("Unrecognized pipeline stage name: '%s'", name))
		}
	}
	batch := int64(defaultBatch)
	if c, ok := cmd.Lookup("cursor").DocumentOK(); ok {
		if n, ok, _ := intArg(c, "batchSize"); ok {
			batch = n
		}
	}
	docs := make([]bsoncore.Document, len(recs))
	for i, r := range recs {
		docs[i] = r.raw
	}
	return s.cursorReply(db+"."+coll, docs, batch, false, "firstBatch")
}

func synthetic(raw bsoncore.Document) record {
	d, _ := bsondoc.ToDoc(raw)
	return record{raw: raw, doc: d}
}

func countStage(recs []record, field string) []record {
	if len(recs) == 0 {
		return nil
	}
	return []record{synthetic(build(func(b []byte) []byte {
		return appendCount(b, field, int64(len(recs)))
	}))}
}

func appendCount(b []byte, key string, n int64) []byte {
	if n <= math.MaxInt32 {
		return bsoncore.AppendInt32Element(b, key, int32(n))
	}
	return bsoncore.AppendInt64Element(b, key, n)
}

// groupStage runs {$group: {_id: <constant>, f: {$sum: <number>}, ...}}:
// every input in one group, as countDocuments' pipeline does.
func groupStage(recs []record, arg bsoncore.Value) ([]record, error) {
	spec, ok := arg.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("a group's fields must be specified in an object")
	}
	elems, err := spec.Elements()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, nil
	}
	out := build(func(b []byte) []byte {
		for _, e := range elems {
			if e.Key() == "_id" {
				if s, ok := e.Value().StringValueOK(); ok && strings.HasPrefix(s, "$") {
					err = fmt.Errorf("mongotest: $group by a field is not supported")
				}
				b = bsoncore.AppendValueElement(b, "_id", e.Value())
				continue
			}
			acc, ok := e.Value().DocumentOK()
			n, okN := acc.Lookup("$sum").AsInt64OK()
			if !ok || !okN {
				err = fmt.Errorf("mongotest: only {$sum: <number>} accumulators are supported")
				continue
			}
			b = appendCount(b, e.Key(), n*int64(len(recs)))
		}
		return b
	})
	if err != nil {
		return nil, err
	}
	return []record{synthetic(out)}, nil
}

// project applies a find projection: inclusion ({a: 1, "b.c": 1}, _id
// kept unless {_id: 0}) or exclusion ({a: 0}). Top-level projections work
// on the raw document; dotted ones go through *sources.Doc, where binary
// values would become strings (no test projects those).
func project(r record, proj *sources.Doc) (bsoncore.Document, error) {
	if proj.Len() == 0 {
		return r.raw, nil
	}
	include, idOut := false, false
	dotted := false
	tree := map[string]any{}
	for _, f := range proj.Fields() {
		on, ok := truthy(f.Value)
		if !ok {
			return nil, fmt.Errorf("mongotest: projection values must be 0/1/true/false")
		}
		if f.Key == "_id" {
			idOut = !on
			continue
		}
		include = include || on
		dotted = dotted || strings.Contains(f.Key, ".")
		addPath(tree, strings.Split(f.Key, "."))
	}
	keepID := !idOut
	if !dotted {
		elems, err := r.raw.Elements()
		if err != nil {
			return nil, err
		}
		return build(func(b []byte) []byte {
			for _, e := range elems {
				_, named := tree[e.Key()]
				if (e.Key() == "_id" && keepID) || (e.Key() != "_id" && named == include) {
					b = append(b, e...)
				}
			}
			return b
		}), nil
	}
	d := projectDoc(r.doc, tree, include)
	if !keepID {
		d.Delete("_id")
	} else if id, ok := r.doc.Get("_id"); ok && include {
		d = sources.NewDoc(append([]sources.Field{{Key: "_id", Value: id}}, d.Fields()...)...)
	}
	return bsondoc.FromDoc(d)
}

func truthy(v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case int64:
		return v != 0, true
	case float64:
		return v != 0, true
	}
	return false, false
}

func addPath(tree map[string]any, segs []string) {
	if len(segs) == 1 {
		tree[segs[0]] = nil
		return
	}
	sub, ok := tree[segs[0]].(map[string]any)
	if !ok {
		if _, leaf := tree[segs[0]]; leaf {
			return
		}
		sub = map[string]any{}
		tree[segs[0]] = sub
	}
	addPath(sub, segs[1:])
}

func projectDoc(d *sources.Doc, tree map[string]any, include bool) *sources.Doc {
	out := sources.NewDoc()
	for _, f := range d.Fields() {
		if f.Key == "_id" {
			continue
		}
		node, named := tree[f.Key]
		sub, _ := node.(map[string]any)
		switch {
		case !named:
			if !include {
				out.Set(f.Key, f.Value)
			}
		case sub == nil: // a leaf
			if include {
				out.Set(f.Key, f.Value)
			}
		default:
			if v, ok := projectValue(f.Value, sub, include); ok {
				out.Set(f.Key, v)
			}
		}
	}
	return out
}

func projectValue(v any, tree map[string]any, include bool) (any, bool) {
	switch v := v.(type) {
	case *sources.Doc:
		return projectDoc(v, tree, include), true
	case []any:
		var out []any
		for _, e := range v {
			if p, ok := projectValue(e, tree, include); ok {
				out = append(out, p)
			}
		}
		return out, true
	}
	return v, !include
}
