package sandbox

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// Document text.
//
// The Store keeps each document as the JSON text its file holds and
// decodes it with package codec when it is read, whole or only the
// top-level fields a query, a sort or a lookup reads. Loading checks the
// text without decoding it: checker accepts exactly what codec.DecodeJSON
// with Extended accepts (FuzzChecker holds them to it), so that a file
// that would not decode is refused when it loads, and reading a document
// never fails.

// decodeOpts decodes stored text, as Load did when it decoded whole files.
var decodeOpts = codec.DecodeOptions{Extended: true}

// fileDepth is codec's default nesting bound: a collection file is an
// array of documents, one level above them.
const fileDepth = 512

// A text is one document's JSON, held in a block.
type text struct {
	blk *block
	off uint32
	n   uint32
}

// decode decodes the whole document.
func (t text) decode() (*sources.Doc, error) {
	v, err := codec.DecodeJSON(t.blk.mem[t.off:t.off+t.n], decodeOpts)
	runtime.KeepAlive(t.blk) // the block's memory is freed when it is unreachable
	if err != nil {
		return nil, err
	}
	d, _ := v.(*sources.Doc)
	return d, nil
}

// project decodes the top-level fields of the document named in names
// (their order in the result is not the document's: queries, sorts and
// lookups read fields by name). spans, when set, are where the indexed
// fields' values are (see indexed): when every name is indexed, the rest
// of the text is not read.
func (t text) project(names []string, spans *[len(indexed)]span) (*sources.Doc, error) {
	defer runtime.KeepAlive(t.blk) // the block's memory is freed when it is unreachable
	raw := t.blk.mem[t.off : t.off+t.n]
	if spans != nil && allIndexed(names) {
		fields := make([]sources.Field, 0, len(names))
		for _, name := range names {
			s := spans[indexOf(name)]
			if s.n == 0 {
				continue
			}
			v, err := decodeValue(raw[s.off : s.off+s.n])
			if err != nil {
				return nil, err
			}
			fields = append(fields, sources.Field{Key: name, Value: v})
		}
		return sources.NewDoc(fields...), nil
	}
	var fields []sources.Field
	var err error
	topFields(raw, func(key, val []byte) bool {
		k, ok := wanted(key, names)
		if !ok {
			return true
		}
		var v any
		if v, err = decodeValue(val); err != nil {
			return false
		}
		for i := range fields {
			if fields[i].Key == k {
				fields[i].Value = v // a later duplicate replaces the value, as codec does
				return true
			}
		}
		fields = append(fields, sources.Field{Key: k, Value: v})
		return true
	})
	if err != nil {
		return nil, err
	}
	return sources.NewDoc(fields...), nil
}

func allIndexed(names []string) bool {
	for _, n := range names {
		if indexOf(n) < 0 {
			return false
		}
	}
	return true
}

// wanted reports whether a raw key (between its quotes) is one of names,
// and returns it.
func wanted(key []byte, names []string) (string, bool) {
	for _, n := range names {
		if string(key) == n {
			return n, true
		}
	}
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return "", false // the key reads as it is written
	}
	k, ok := unescapeKey(key) // as the decoder reads it
	if !ok {
		return "", false
	}
	for _, n := range names {
		if k == n {
			return n, true
		}
	}
	return "", false
}

// unescapeKey decodes a raw key that holds escapes or bytes that are not
// UTF-8.
func unescapeKey(key []byte) (string, bool) {
	q := make([]byte, 0, len(key)+2)
	q = append(append(append(q, '"'), key...), '"')
	v, err := codec.DecodeJSON(q, codec.DecodeOptions{})
	s, ok := v.(string)
	return s, err == nil && ok
}

// A span is where a value is in a document's text; n is 0 when the
// document has no such field.
type span struct{ off, n uint32 }

// indexed are the top-level fields whose values' spans each document
// keeps: its _id, the _updated Load reads, and the fields of the
// resources' default sorts and walk tiebreakers, so that the orders lists
// and walks read most are built without reading whole documents.
// TestIndexedCoverResources keeps it in step with the resources.
var indexed = [...]string{"_id", "_updated", "guid", "name", "username", "last_name", "dates"}

func indexOf(name string) int {
	for i, n := range indexed {
		if n == name {
			return i
		}
	}
	return -1
}

// topFields calls fn with each top-level key (raw, between its quotes)
// and value of a checked document's text, until fn returns false.
func topFields(raw []byte, fn func(key, val []byte) bool) {
	s := skipper{data: raw}
	s.pos = 1 // {
	for {
		s.space()
		if s.data[s.pos] == '}' {
			return
		}
		k0 := s.pos + 1
		s.str()
		key := s.data[k0 : s.pos-1]
		s.space()
		s.pos++ // :
		s.space()
		v0 := s.pos
		s.value()
		if !fn(key, s.data[v0:s.pos]) {
			return
		}
		s.space()
		if s.data[s.pos] == ',' {
			s.pos++
		}
	}
}

// A skipper moves over checked JSON text.
type skipper struct {
	data []byte
	pos  int
}

func (s *skipper) space() {
	for s.pos < len(s.data) && isSpace(s.data[s.pos]) {
		s.pos++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// str moves past the string at pos.
func (s *skipper) str() {
	i := s.pos + 1
	for {
		j := bytes.IndexByte(s.data[i:], '"')
		i += j
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		k := i - 1
		for k > s.pos && s.data[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			s.pos = i + 1
			return
		}
		i++
	}
}

// value moves past the value at pos.
func (s *skipper) value() {
	switch s.data[s.pos] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.data[s.pos] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return
				}
			}
			s.pos++
		}
	default: // a number or a literal
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.pos++
		}
	}
}

// A checker checks JSON text as codec.DecodeJSON with Extended reads it:
// it accepts what the decoder accepts and refuses the rest. It does not
// say why: the decoder, run on what was refused, does.
type checker struct {
	data []byte
	pos  int
	// short is set when a check failed for want of data: the text may
	// continue after data.
	short bool
	// top, when set, receives each top-level field of the document being
	// checked by doc: the raw key and the value's bounds.
	top func(key []byte, v0, v1 int)
}

// strSafe are the bytes a string holds as they are: not a quote, a
// backslash or a control character.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (c *checker) space() {
	for c.pos < len(c.data) && isSpace(c.data[c.pos]) {
		c.pos++
	}
}

// end reports whether pos is past the data, which marks the check short.
func (c *checker) end(pos int) bool {
	if pos >= len(c.data) {
		c.short = true
		return true
	}
	return false
}

// value checks the value at pos, nested depth levels deep (the decoder's
// count: a file's documents are at depth 1).
func (c *checker) value(depth int) bool {
	if c.end(c.pos) {
		return false
	}
	switch b := c.data[c.pos]; {
	case b == '{':
		return depth < fileDepth && c.object(depth+1, false)
	case b == '[':
		return depth < fileDepth && c.array(depth+1)
	case b == '"':
		return c.str()
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return false
}

func (c *checker) literal(word string) bool {
	if !bytes.HasPrefix(c.data[c.pos:], []byte(word)) {
		c.short = len(c.data)-c.pos < len(word) && bytes.HasPrefix([]byte(word), c.data[c.pos:])
		return false
	}
	c.pos += len(word)
	return true
}

// object checks an object; top reports its fields to c.top. An object
// whose first key may be an Extended JSON wrapper's ($oid, $date...) is
// decoded, as the decoder converts it and may refuse its value.
func (c *checker) object(depth int, top bool) bool {
	start := c.pos
	c.pos++ // {
	c.space()
	if c.pos < len(c.data) && c.data[c.pos] == '}' {
		c.pos++
		return true
	}
	wrapper := false
	for first := true; ; first = false {
		c.space()
		if c.end(c.pos) || c.data[c.pos] != '"' {
			return false
		}
		k0 := c.pos + 1
		if first && k0 < len(c.data) && (c.data[k0] == '$' || c.data[k0] == '\\') {
			wrapper = true
		}
		if !c.str() {
			return false
		}
		k1 := c.pos - 1
		c.space()
		if c.end(c.pos) || c.data[c.pos] != ':' {
			return false
		}
		c.pos++
		c.space()
		v0 := c.pos
		if !c.value(depth) {
			return false
		}
		if top && c.top != nil {
			c.top(c.data[k0:k1], v0, c.pos)
		}
		if more, ok := c.next('}'); !ok || !more {
			return ok && (!wrapper || validWrapper(c.data[start:c.pos]))
		}
	}
}

// next reads what follows a member of an object or an array: a comma
// (more follow) or its closing character.
func (c *checker) next(closing byte) (more, ok bool) {
	c.space()
	if c.end(c.pos) {
		return false, false
	}
	switch c.data[c.pos] {
	case ',':
		c.pos++
		return true, true
	case closing:
		c.pos++
		return false, true
	}
	return false, false
}

// validWrapper reports whether the decoder takes an object that may be
// an Extended JSON wrapper.
func validWrapper(obj []byte) bool {
	if _, ok := fastWrapper(obj); ok {
		return true
	}
	_, err := codec.DecodeJSON(obj, decodeOpts)
	return err == nil
}

// fastWrapper decodes the commonest wrappers, an ObjectId of 24 hex
// digits and a date in RFC 3339 (the decoder's first layout), as the
// decoder does, without it; ok is false for the rest.
func fastWrapper(obj []byte) (any, bool) {
	if v, ok := bytes.CutPrefix(obj, []byte(`{"$oid":"`)); ok && len(v) == 26 && string(v[24:]) == `"}` {
		id, ok := sources.ParseObjectID(string(v[:24]))
		return id, ok
	}
	if v, ok := bytes.CutPrefix(obj, []byte(`{"$date":"`)); ok && bytes.HasSuffix(v, []byte(`"}`)) {
		s := v[:len(v)-2]
		if !bytes.ContainsAny(s, `"\\`) {
			if t, err := time.Parse(time.RFC3339Nano, string(s)); err == nil {
				return t.UTC(), true
			}
		}
	}
	return nil, false
}

// decodeValue decodes a checked value as the decoder does: strings
// without escapes and the commonest wrappers without it.
func decodeValue(raw []byte) (any, error) {
	switch raw[0] {
	case '"':
		s := raw[1 : len(raw)-1]
		if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
			return string(s), nil
		}
	case '{':
		if v, ok := fastWrapper(raw); ok {
			return v, nil
		}
	}
	return codec.DecodeJSON(raw, decodeOpts)
}

func (c *checker) array(depth int) bool {
	c.pos++ // [
	c.space()
	if c.pos < len(c.data) && c.data[c.pos] == ']' {
		c.pos++
		return true
	}
	for {
		c.space()
		if !c.value(depth) {
			return false
		}
		if more, ok := c.next(']'); !ok || !more {
			return ok
		}
	}
}

func (c *checker) str() bool {
	data := c.data
	i := c.pos + 1
	for {
		i += safeWords(data[i:])
		for i < len(data) && strSafe[data[i]] {
			i++
		}
		if c.end(i) {
			return false
		}
		switch data[i] {
		case '"':
			c.pos = i + 1
			return true
		case '\\':
			if c.end(i + 1) {
				return false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if c.end(i+5) || !isHex4(data[i+2:i+6]) {
					return false
				}
				i += 6
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

// safeWords counts the leading bytes of b that a string holds as they
// are, eight at a time: it stops at the first eight that hold a quote, a
// backslash or a control character (or at fewer than eight left).
func safeWords(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	n := 0
	for ; n+8 <= len(b); n += 8 {
		x := binary.LittleEndian.Uint64(b[n:])
		control := (x - ones*0x20) & ^x & highs // a byte below 0x20
		quote := x ^ (ones * '"')
		backslash := x ^ (ones * '\\')
		zero := ((quote-ones) & ^quote | (backslash-ones) & ^backslash) & highs // a byte equal to either
		if control|zero != 0 {
			break
		}
	}
	return n
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number checks a number as the decoder reads it: JSON's grammar, and a
// magnitude a float64 can hold.
func (c *checker) number() bool {
	data := c.data
	start := c.pos
	if data[c.pos] == '-' {
		c.pos++
	}
	digits := func() int {
		n := 0
		for c.pos < len(data) && data[c.pos] >= '0' && data[c.pos] <= '9' {
			c.pos++
			n++
		}
		return n
	}
	intStart := c.pos
	n := digits()
	if n == 0 {
		c.end(c.pos)
		return false
	}
	if data[intStart] == '0' && n > 1 {
		return false
	}
	exp := false
	if c.pos < len(data) && data[c.pos] == '.' {
		c.pos++
		if digits() == 0 {
			c.end(c.pos)
			return false
		}
	}
	if c.pos < len(data) && (data[c.pos] == 'e' || data[c.pos] == 'E') {
		c.pos++
		exp = true
		if c.pos < len(data) && (data[c.pos] == '+' || data[c.pos] == '-') {
			c.pos++
		}
		if digits() == 0 {
			c.end(c.pos)
			return false
		}
	}
	if exp || c.pos-start > 300 {
		// Only an exponent or some 309 digits reach past float64's range,
		// which the decoder refuses.
		f, _ := strconv.ParseFloat(string(data[start:c.pos]), 64)
		return !math.IsInf(f, 0)
	}
	return true
}
