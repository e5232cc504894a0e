// Package codec reads and writes JSON as document values (sources.Doc,
// []any, strings, numbers, times, ObjectIDs): field order kept, strict
// decoding for client input, MongoDB Extended JSON for seed files, and
// the canonical encoding cache keys hash.
package codec

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/prodapi/prodapi/sources"
)

// DecodeOptions control DecodeJSON.
type DecodeOptions struct {
	// Strict refuses what a lenient reader would paper over and a
	// differential parser could exploit: duplicate keys and invalid UTF-8.
	// Client input (where, source, sort, projection) is decoded strictly;
	// stored documents are not.
	Strict bool
	// Extended turns MongoDB Extended JSON wrappers ({"$oid": ...},
	// {"$date": ...}, {"$numberLong": ...}, ...) into ObjectID, time.Time
	// and numbers, as mongoexport writes them.
	Extended bool
	// MaxDepth bounds nesting of objects and arrays; 0 means 512.
	MaxDepth int
}

// A SyntaxError describes malformed JSON. Its message is safe to show to
// the client that sent the input.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at offset %d", e.Msg, e.Offset)
}

// ErrTooDeep reports nesting beyond DecodeOptions.MaxDepth.
var ErrTooDeep = errors.New("nested too deeply")

// DecodeJSON parses one JSON value into document values: objects become
// *Doc (keys in order), arrays []any, integers int64 (float64 when they do
// not fit or have a fraction or exponent), strings string. Trailing data
// after the value is an error.
func DecodeJSON(data []byte, opts DecodeOptions) (any, error) {
	return decode(data, opts, indexKeys)
}

// decode is DecodeJSON with the number of keys from which objects index
// theirs (decoder.indexFrom).
func decode(data []byte, opts DecodeOptions, indexFrom int) (any, error) {
	if opts.MaxDepth == 0 {
		opts.MaxDepth = 512
	}
	d := decoder{data: data, opts: opts, indexFrom: indexFrom}
	d.skipSpace()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, d.errorf("unexpected data after the JSON value")
	}
	return v, nil
}

type decoder struct {
	data []byte
	pos  int
	opts DecodeOptions
	// indexFrom is the number of keys from which an object's keys are
	// looked up in a map rather than by a scan of those before: indexKeys,
	// or, in tests, more than any object holds (the scan alone).
	indexFrom int
}

// indexKeys is where an object being decoded starts a map of its keys,
// to find a repeated one: below, a scan of the keys before is cheaper
// than the map; above, the scans would make an object of n keys cost n²
// (a forged token of 7,000 claims took 65 ms to refuse).
const indexKeys = 64

func (d *decoder) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: d.pos, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of JSON input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		if depth >= d.opts.MaxDepth {
			return nil, fmt.Errorf("%w (more than %d levels)", ErrTooDeep, d.opts.MaxDepth)
		}
		return d.object(depth + 1)
	case c == '[':
		if depth >= d.opts.MaxDepth {
			return nil, fmt.Errorf("%w (more than %d levels)", ErrTooDeep, d.opts.MaxDepth)
		}
		return d.array(depth + 1)
	case c == '"':
		return d.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"):
		return true, nil
	case d.literal("false"):
		return false, nil
	case d.literal("null"):
		return nil, nil
	}
	return nil, d.errorf("invalid character %q looking for a value", d.data[d.pos])
}

func (d *decoder) literal(word string) bool {
	if strings.HasPrefix(string(d.data[d.pos:min(len(d.data), d.pos+len(word))]), word) {
		d.pos += len(word)
		return true
	}
	return false
}

// object decodes an object in time linear in its size: a repeated key is
// found by a scan of the keys before it while they are few, and in a map
// of them once they are indexFrom.
func (d *decoder) object(depth int) (any, error) {
	d.pos++ // {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return &sources.Doc{}, nil
	}
	var fields []sources.Field
	var index map[string]int // key -> its place in fields, once there are indexFrom
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("expected a string object key")
		}
		keyPos := d.pos
		key, err := d.string()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errorf("expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		at := -1
		if index != nil {
			if i, ok := index[key]; ok {
				at = i
			}
		} else {
			at = slices.IndexFunc(fields, func(f sources.Field) bool { return f.Key == key })
		}
		switch {
		case at >= 0 && d.opts.Strict:
			return nil, &SyntaxError{Offset: keyPos, Msg: fmt.Sprintf("duplicate key %q", key)}
		case at >= 0:
			fields[at].Value = v // a later duplicate replaces the value in place
		default:
			fields = append(fields, sources.Field{Key: key, Value: v})
			if index != nil {
				index[key] = len(fields) - 1
			} else if len(fields) >= d.indexFrom {
				index = make(map[string]int, 2*len(fields))
				for i, f := range fields {
					index[f.Key] = i
				}
			}
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end of JSON input")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			doc := sources.NewDoc(fields...)
			if d.opts.Extended {
				return extended(doc)
			}
			return doc, nil
		default:
			return nil, d.errorf("expected ',' or '}' after object value")
		}
	}
}

func (d *decoder) array(depth int) (any, error) {
	d.pos++ // [
	arr := []any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return arr, nil
	}
	for {
		d.skipSpace()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end of JSON input")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return arr, nil
		default:
			return nil, d.errorf("expected ',' or ']' after array element")
		}
	}
}

func (d *decoder) string() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			if !utf8.Valid(s) {
				if d.opts.Strict {
					return "", &SyntaxError{Offset: start, Msg: "invalid UTF-8 in string"}
				}
				return strings.ToValidUTF8(string(s), "\uFFFD"), nil
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.errorf("control character in string")
		}
		d.pos++
	}
	var b strings.Builder
	b.Write(d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			s := b.String()
			if !utf8.ValidString(s) {
				if d.opts.Strict {
					return "", &SyntaxError{Offset: start, Msg: "invalid UTF-8 in string"}
				}
				s = strings.ToValidUTF8(s, "\uFFFD")
			}
			return s, nil
		case c < 0x20:
			return "", d.errorf("control character in string")
		case c != '\\':
			b.WriteByte(c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			break
		}
		switch e := d.data[d.pos]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := d.hex4(d.pos + 1)
			if !ok {
				return "", d.errorf("invalid \\u escape")
			}
			d.pos += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if d.pos+6 < len(d.data) && d.data[d.pos+1] == '\\' && d.data[d.pos+2] == 'u' {
					r2, ok2 = d.hex4(d.pos + 3)
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					r = dec
					d.pos += 6
				} else {
					if d.opts.Strict {
						return "", d.errorf("unpaired surrogate in \\u escape")
					}
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
		default:
			return "", d.errorf("invalid escape character %q", e)
		}
		d.pos++
	}
	return "", d.errorf("unterminated string")
}

func (d *decoder) hex4(at int) (rune, bool) {
	if at+4 > len(d.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d.data[at:at+4]), 16, 32)
	return rune(n), err == nil
}

func (d *decoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	intStart := d.pos
	if digits() == 0 {
		return nil, d.errorf("invalid number")
	}
	if d.data[intStart] == '0' && d.pos-intStart > 1 {
		return nil, d.errorf("invalid number: leading zero")
	}
	isFloat := false
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		isFloat = true
		if digits() == 0 {
			return nil, d.errorf("invalid number: no digits after '.'")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		isFloat = true
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, d.errorf("invalid number: no digits in exponent")
		}
	}
	text := string(d.data[start:d.pos])
	if !isFloat {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, &SyntaxError{Offset: start, Msg: "invalid number"}
	}
	if math.IsInf(f, 0) {
		return nil, &SyntaxError{Offset: start, Msg: "number out of range"}
	}
	return f, nil
}

// extended converts a one-key Extended JSON wrapper; other documents are
// returned as they are.
func extended(doc *sources.Doc) (any, error) {
	if doc.Len() != 1 {
		return doc, nil
	}
	f := doc.Fields()[0]
	s, isString := f.Value.(string)
	switch f.Key {
	case "$oid":
		if id, ok := sources.ParseObjectID(s); ok {
			return id, nil
		}
		return nil, fmt.Errorf("invalid $oid %q", s)
	case "$date":
		return extendedDate(f.Value)
	case "$numberLong", "$numberInt":
		if n, err := strconv.ParseInt(s, 10, 64); isString && err == nil {
			return n, nil
		}
		return nil, fmt.Errorf("invalid %s %v", f.Key, f.Value)
	case "$numberDouble":
		switch s {
		case "NaN", "Infinity", "-Infinity":
			return nil, nil // JSON has no such numbers; render null
		}
		if x, err := strconv.ParseFloat(s, 64); isString && err == nil {
			return x, nil
		}
		return nil, fmt.Errorf("invalid $numberDouble %v", f.Value)
	case "$numberDecimal":
		if isString {
			return s, nil // rendered as a string, as the original did
		}
	}
	return doc, nil
}

func extendedDate(v any) (any, error) {
	switch v := v.(type) {
	case string:
		for _, layout := range []string{time.RFC3339Nano, sources.DateLayout, "2006-01-02T15:04:05.999999999Z0700"} {
			if t, err := time.Parse(layout, v); err == nil {
				return t.UTC(), nil
			}
		}
	case int64:
		return time.UnixMilli(v).UTC(), nil
	case float64:
		return time.UnixMilli(int64(v)).UTC(), nil
	case *sources.Doc:
		if s, ok := v.String("$numberLong"); ok && v.Len() == 1 {
			if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
				return time.UnixMilli(ms).UTC(), nil
			}
		}
	}
	return nil, fmt.Errorf("invalid $date %v", v)
}

// AppendJSON appends the compact JSON encoding of a document value. Keys
// keep their order; datetimes render in DateLayout; ObjectIDs as hex;
// floats as Python's repr would (2.0, 0.1, 1e+16); NaN and infinities as
// null. Strings are UTF-8 and not HTML-escaped.
func AppendJSON(dst []byte, v any) []byte {
	e := encoder{}
	return e.value(dst, v, 0)
}

// AppendJSONIndent is AppendJSON with one element per line, indented by
// indent per level (the ?pretty form).
func AppendJSONIndent(dst []byte, v any, indent string) []byte {
	e := encoder{indent: indent}
	return e.value(dst, v, 0)
}

// AppendCanonicalJSON appends a canonical encoding: compact, keys of every
// object sorted. Equal values encode to equal bytes, whatever their key
// order, which is what cache keys and links need.
func AppendCanonicalJSON(dst []byte, v any) []byte {
	e := encoder{sorted: true}
	return e.value(dst, v, 0)
}

type encoder struct {
	indent string
	sorted bool
}

func (e *encoder) newline(dst []byte, depth int) []byte {
	if e.indent == "" {
		return dst
	}
	dst = append(dst, '\n')
	for range depth {
		dst = append(dst, e.indent...)
	}
	return dst
}

func (e *encoder) value(dst []byte, v any, depth int) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, v)
	case string:
		return AppendJSONString(dst, v)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case int:
		return strconv.AppendInt(dst, int64(v), 10)
	case int32:
		return strconv.AppendInt(dst, int64(v), 10)
	case float64:
		return appendFloat(dst, v)
	case time.Time:
		dst = append(dst, '"')
		dst = appendDate(dst, v)
		return append(dst, '"')
	case sources.ObjectID:
		dst = append(dst, '"')
		dst = hex.AppendEncode(dst, v[:])
		return append(dst, '"')
	case *sources.Doc:
		if v == nil {
			return append(dst, "null"...)
		}
		return e.object(dst, v.Fields(), depth)
	case []any:
		if len(v) == 0 {
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i, el := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.newline(dst, depth+1)
			dst = e.value(dst, el, depth+1)
		}
		dst = e.newline(dst, depth)
		return append(dst, ']')
	case []*sources.Doc:
		a := make([]any, len(v))
		for i, d := range v {
			a[i] = d
		}
		return e.value(dst, a, depth)
	case []string:
		a := make([]any, len(v))
		for i, s := range v {
			a[i] = s
		}
		return e.value(dst, a, depth)
	case map[string]any:
		fields := make([]sources.Field, 0, len(v))
		for k, x := range v {
			fields = append(fields, sources.Field{Key: k, Value: x})
		}
		slices.SortFunc(fields, func(a, b sources.Field) int { return strings.Compare(a.Key, b.Key) })
		return e.object(dst, fields, depth)
	}
	// Not a document value: a programming error upstream. Render it as a
	// string rather than fail a response over it.
	return AppendJSONString(dst, fmt.Sprint(v))
}

func (e *encoder) object(dst []byte, fields []sources.Field, depth int) []byte {
	if len(fields) == 0 {
		return append(dst, "{}"...)
	}
	if e.sorted && !slices.IsSortedFunc(fields, func(a, b sources.Field) int { return strings.Compare(a.Key, b.Key) }) {
		fields = slices.Clone(fields)
		slices.SortStableFunc(fields, func(a, b sources.Field) int { return strings.Compare(a.Key, b.Key) })
	}
	dst = append(dst, '{')
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = e.newline(dst, depth+1)
		dst = AppendJSONString(dst, f.Key)
		dst = append(dst, ':')
		if e.indent != "" {
			dst = append(dst, ' ')
		}
		dst = e.value(dst, f.Value, depth+1)
	}
	dst = e.newline(dst, depth)
	return append(dst, '}')
}

// appendDate appends t in DateLayout, as AppendFormat does, without
// interpreting the layout: a list has a hundred dates.
func appendDate(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, sources.DateLayout)
	}
	hour, minute, sec := t.Clock()
	two := func(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }
	dst = two(dst, year/100)
	dst = two(dst, year%100)
	dst = append(dst, '-')
	dst = two(dst, int(month))
	dst = append(dst, '-')
	dst = two(dst, day)
	dst = append(dst, 'T')
	dst = two(dst, hour)
	dst = append(dst, ':')
	dst = two(dst, minute)
	dst = append(dst, ':')
	dst = two(dst, sec)
	return append(dst, "+0000"...)
}

// appendFloat follows Python's repr: the shortest digits that round-trip,
// positional between 1e-4 and 1e16, and a ".0" on integral values.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		b := strconv.AppendFloat(dst, f, 'e', -1, 64)
		// Python writes 1e+16 and 1e-05; Go writes 1e+16 and 1e-05 too.
		return b
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	for _, c := range dst[start:] {
		if c == '.' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string literal. Invalid UTF-8 is
// replaced by U+FFFD.
//
// Runs of plain ASCII are skipped eight bytes at a time, then a byte at
// a time through a table: a list body is mostly strings, long ones
// (body_html) and short ones (keys), and a byte-by-byte loop with three
// comparisons a byte was most of its encoding.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for {
		for i+8 <= len(s) {
			if x := load64(s, i); x&highs != 0 || needsEscape(x) {
				break
			}
			i += 8
		}
		for i < len(s) && plain[s[i]] == '1' {
			i++
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			start = i + 1
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plain marks with a 1 the bytes a JSON string holds as they are: ASCII
// from 0x20, but for the quote and the backslash. Bytes from 0x80 start
// a rune to check.
const plain = "" +
	"00000000000000000000000000000000" + // 0x00-0x1f: controls
	"11011111111111111111111111111111" + // 0x20-0x3f: not the quote
	"11111111111111111111111111110111" + // 0x40-0x5f: not the backslash
	"11111111111111111111111111111111" + // 0x60-0x7f
	"00000000000000000000000000000000" + // 0x80-0xff: runes
	"00000000000000000000000000000000" +
	"00000000000000000000000000000000" +
	"00000000000000000000000000000000"

// load64 reads 8 bytes of s from i, little-endian (one load on amd64).
func load64(s string, i int) uint64 {
	t := s[i : i+8]
	return uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
		uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// needsEscape reports whether one of the 8 bytes of x is below 0x20, a
// quote or a backslash. Bytes from 0x80 never count.
func needsEscape(x uint64) bool {
	hasZero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return ((x-ones*0x20)&^x&highs)|hasZero(x^(ones*'"'))|hasZero(x^(ones*'\\')) != 0
}

// appendEscape appends the escape of an ASCII control, quote or
// backslash.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
