package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// Loading.
//
// Each collection file is read in windows of windowSize, each document
// checked (checker) and copied into blocks, with its _id and the spans of
// its indexed fields: nothing is decoded but those values. The files load
// in parallel, one goroutine each. A reload passes the collections it
// replaces: a document whose text has not changed keeps its place in
// their blocks, and a collection none of whose documents changed is kept
// whole, its orders with it. So a reload costs the changed documents'
// text, the new collections' indexes and a window a file.

// windowSize is how much of a file is read at once; a document larger
// than a window grows it.
const windowSize = 4 << 20

// A loaded collection: what the file held, or why it cannot be used.
type loaded struct {
	coll *coll
	// newest is the latest _updated of its documents.
	newest time.Time
	err    error
}

// loadCollection reads name (<collection>.json) from fsys. prev, when
// set, is the collection the load replaces. A missing file is an empty
// collection.
func loadCollection(fsys fs.FS, name string, prev *coll) loaded {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		if prev != nil && prev.size() == 0 {
			return loaded{coll: prev}
		}
		return loaded{coll: &coll{}}
	}
	if err != nil {
		return loaded{err: fmt.Errorf("sandbox: %w", err)}
	}
	defer f.Close()
	var size int64
	if info, err := f.Stat(); err == nil {
		size = info.Size()
	}
	l := &fileLoader{name: name, prev: prev, w: window{r: f, buf: make([]byte, min(max(size+1, 512), windowSize))},
		c: &coll{ids: map[idKey]int32{}}, same: prev != nil}
	if prev == nil {
		l.blocks.hint = size // all of it is to be written
	}
	if err := l.read(); err != nil {
		if errors.Is(err, errNotArray) {
			return loaded{err: l.slow(fsys)}
		}
		return loaded{err: err}
	}
	if l.err != nil {
		return loaded{err: l.err}
	}
	if l.same && len(l.c.docs) == len(prev.docs) {
		return loaded{coll: prev, newest: l.newest}
	}
	return loaded{coll: l.c, newest: l.newest}
}

// errNotArray: the file does not begin with [; the decoder says what it is.
var errNotArray = errors.New("not an array")

// A fileLoader reads one collection file.
type fileLoader struct {
	name   string
	prev   *coll
	w      window
	blocks blockWriter
	c      *coll
	newest time.Time
	// err is the first document that cannot be served (not a document,
	// no _id, a bad or repeated _id), reported once the whole file has
	// been read: a file that does not parse says so first.
	err     error
	errRank int // 1: a document's shape; 2: its _id
	// same holds while every document so far is prev's, at its place.
	same bool
}

// A window is the part of a file in memory.
type window struct {
	r    io.Reader
	buf  []byte
	data []byte // buf[:filled]
	base int64  // offset in the file of data[0]
	eof  bool
}

// more keeps data[keep:], moved to the front, and reads more after it,
// growing the buffer when what is kept fills it. It reports false when
// the file has nothing more.
func (w *window) more(keep int) (bool, error) {
	if w.eof {
		return false, nil
	}
	n := copy(w.buf, w.data[keep:])
	w.base += int64(keep)
	if n == len(w.buf) {
		w.buf = append(w.buf[:n], make([]byte, len(w.buf))...)
	}
	m, err := io.ReadFull(w.r, w.buf[n:])
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		w.eof = true
	case err != nil:
		return false, fmt.Errorf("sandbox: %w", err)
	}
	w.data = w.buf[:n+m]
	return m > 0, nil
}

// space skips white space from pos, reading more as needed; it returns
// the new pos (data may have moved: keep is kept) and false at the end of
// the file.
func (w *window) space(pos int) (int, bool, error) {
	for {
		for pos < len(w.data) && isSpace(w.data[pos]) {
			pos++
		}
		if pos < len(w.data) {
			return pos, true, nil
		}
		more, err := w.more(pos)
		if err != nil || !more {
			return 0, false, err
		}
		pos = 0
	}
}

// syntaxError is the decoder's error at offset pos of the window.
func (l *fileLoader) syntaxError(pos int, msg string) error {
	return fmt.Errorf("sandbox: %s: %w", l.name, &codec.SyntaxError{Offset: int(l.w.base) + pos, Msg: msg})
}

// read reads the array of documents.
func (l *fileLoader) read() error {
	pos, ok, err := l.w.space(0)
	if err != nil {
		return err
	}
	if !ok || l.w.data[pos] != '[' {
		return errNotArray
	}
	pos++
	if pos, ok, err = l.w.space(pos); err != nil {
		return err
	}
	if ok && l.w.data[pos] == ']' {
		return l.end(pos + 1)
	}
	for n := 0; ; n++ {
		if pos, ok, err = l.w.space(pos); err != nil {
			return err
		}
		if !ok {
			return l.syntaxError(len(l.w.data), "unexpected end of JSON input")
		}
		if pos, err = l.element(pos, n); err != nil {
			return err
		}
		if pos, ok, err = l.w.space(pos); err != nil {
			return err
		}
		if !ok {
			return l.syntaxError(len(l.w.data), "unexpected end of JSON input")
		}
		switch l.w.data[pos] {
		case ',':
			pos++
		case ']':
			return l.end(pos + 1)
		default:
			return l.syntaxError(pos, "expected ',' or ']' after array element")
		}
	}
}

// end checks that nothing but white space follows the array.
func (l *fileLoader) end(pos int) error {
	pos, ok, err := l.w.space(pos)
	if err != nil {
		return err
	}
	if ok {
		return l.syntaxError(pos, "unexpected data after the JSON value")
	}
	return nil
}

// element checks the n-th element of the array, at pos, and keeps it; it
// returns the position after it.
func (l *fileLoader) element(pos, n int) (int, error) {
	var spans [len(indexed)]span
	for {
		spans = [len(indexed)]span{}
		c := checker{data: l.w.data, pos: pos}
		c.top = func(key []byte, v0, v1 int) {
			if k, ok := wanted(key, indexed[:]); ok {
				spans[indexOf(k)] = span{off: uint32(v0 - pos), n: uint32(v1 - v0)}
			}
		}
		var ok bool
		if l.w.data[pos] == '{' {
			ok = c.object(2, true) // a document of the file's array: depth 1, its fields 2
		} else {
			ok = c.value(1)
		}
		switch {
		case ok && (c.pos < len(l.w.data) || l.w.eof):
			return c.pos, l.keep(l.w.data[pos:c.pos], &spans, n)
		case !ok && (!c.short || l.w.eof):
			return 0, l.invalid(pos, n)
		}
		// Out of data: read more.
		if _, err := l.w.more(pos); err != nil {
			return 0, err
		}
		pos = 0
	}
}

// invalid is the decoder's error for the element at pos, which the
// checker refused: the file's first error.
func (l *fileLoader) invalid(pos, n int) error {
	// One level less deep alone than in the file's array.
	_, err := codec.DecodeJSON(l.w.data[pos:], codec.DecodeOptions{Extended: true, MaxDepth: fileDepth - 1})
	var se *codec.SyntaxError
	switch {
	case errors.As(err, &se) && se.Msg != "unexpected data after the JSON value":
		return l.syntaxError(pos+se.Offset, se.Msg)
	case errors.Is(err, codec.ErrTooDeep):
		return fmt.Errorf("sandbox: %s: %w (more than %d levels)", l.name, codec.ErrTooDeep, fileDepth) // the decoder's words, for the file
	case err != nil && se == nil:
		return fmt.Errorf("sandbox: %s: %w", l.name, err)
	}
	return fmt.Errorf("sandbox: %s: document %d at offset %d cannot be read", l.name, n, l.w.base+int64(pos))
}

// fail records the first document that cannot be served.
func (l *fileLoader) fail(rank int, err error) {
	if l.err == nil || rank < l.errRank {
		l.err, l.errRank = err, rank
	}
}

// keep adds the n-th element, raw, to the collection.
func (l *fileLoader) keep(raw []byte, spans *[len(indexed)]span, n int) error {
	if len(raw) > 1<<31 {
		return fmt.Errorf("sandbox: %s: document %d is larger than 2 GB", l.name, n)
	}
	isDoc := raw[0] == '{'
	if isDoc && wrapperCandidate(raw) {
		v, err := codec.DecodeJSON(raw, decodeOpts)
		_, isDoc = v.(*sources.Doc)
		isDoc = isDoc && err == nil
	}
	switch {
	case !isDoc:
		l.fail(1, fmt.Errorf("sandbox: %s: element %d is not a document", l.name, n))
		return nil
	case spans[0].n == 0:
		l.fail(1, fmt.Errorf("sandbox: %s: document %d has no _id", l.name, n))
		return nil
	case l.err != nil:
		return nil // the load fails; what follows only needs checking
	}
	idSpan := spans[0]
	idv, _ := decodeValue(raw[idSpan.off : idSpan.off+idSpan.n])
	k, ok := keyOf(idv)
	if !ok {
		l.fail(2, fmt.Errorf("sandbox: %s: document %d: _id must be a string or an ObjectID, not %s", l.name, n, describe(idv)))
		return nil
	}
	i := int32(len(l.c.docs))
	had := len(l.c.ids)
	if l.c.ids[k] = i; len(l.c.ids) == had { // one lookup; a repeat fails the load
		l.fail(2, fmt.Errorf("sandbox: %s: document %d: duplicate _id %s", l.name, n, describe(idv)))
		return nil
	}
	if s := spans[indexOf("_updated")]; s.n > 0 {
		if t, err := decodeValue(raw[s.off : s.off+s.n]); err == nil {
			if t, ok := t.(time.Time); ok && t.After(l.newest) {
				l.newest = t
			}
		}
	}
	if j, ok := l.prevID(k); ok && l.prev.docs[j].text.equal(raw) {
		l.c.docs = append(l.c.docs, l.prev.docs[j])
		l.same = l.same && j == i
	} else {
		l.c.docs = append(l.c.docs, stored{text: l.blocks.put(raw), id: k, spans: *spans})
		l.same = false
	}
	return nil
}

// prevID finds an _id in the collection the load replaces.
func (l *fileLoader) prevID(k idKey) (int32, bool) {
	if l.prev == nil {
		return 0, false
	}
	j, ok := l.prev.ids[k]
	return j, ok
}

// wrapperCandidate reports whether an object's first key may make it an
// Extended JSON wrapper, which the decoder turns into another value.
func wrapperCandidate(raw []byte) bool {
	i := 1
	for i < len(raw) && isSpace(raw[i]) {
		i++
	}
	return i+1 < len(raw) && raw[i] == '"' && (raw[i+1] == '$' || raw[i+1] == '\\')
}

// slow decodes a file that is not an array, for the decoder's error or
// the refusal of what it holds instead.
func (l *fileLoader) slow(fsys fs.FS) error {
	data, err := fs.ReadFile(fsys, l.name)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	v, err := codec.DecodeJSON(data, decodeOpts)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", l.name, err)
	}
	if _, ok := v.([]any); !ok {
		return fmt.Errorf("sandbox: %s: want a JSON array of documents", l.name)
	}
	return fmt.Errorf("sandbox: %s: cannot be read", l.name) // an array does begin with [
}

// equal reports whether the text is b.
func (t text) equal(b []byte) bool {
	defer runtime.KeepAlive(t.blk)
	return bytes.Equal(t.blk.mem[t.off:t.off+t.n], b)
}
