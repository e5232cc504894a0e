package sources

import (
	"encoding/hex"
	"iter"
	"slices"
	"strings"
	"time"
)

// A Doc is a document as a backend stored it: an ordered set of fields.
// Field order is kept from the store to the response, as the original
// service did.
//
// Values are one of: nil, bool, int64, float64, string, time.Time,
// ObjectID, []any (of these values) or *Doc. Backends convert their own
// types at the boundary.
type Doc struct {
	fields []Field
}

// Link is one entry of a document's _links, as Eve wrote them:
// {"title": title, "href": href}. The renderer's self, parent and
// collection links and the enricher's links are all built by it.
func Link(title, href string) *Doc {
	return NewDoc(Field{Key: "title", Value: title}, Field{Key: "href", Value: href})
}

// A Field is one key and value of a Doc.
type Field struct {
	Key   string
	Value any
}

// NewDoc returns a document holding the given fields, in order.
func NewDoc(fields ...Field) *Doc {
	return &Doc{fields: fields}
}

// D builds a document from alternating keys and values; it is meant for
// literals in code and tests: D("_id", "a", "n", int64(1)).
func D(kv ...any) *Doc {
	d := &Doc{fields: make([]Field, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Set(kv[i].(string), kv[i+1])
	}
	return d
}

// Len reports the number of fields.
func (d *Doc) Len() int {
	if d == nil {
		return 0
	}
	return len(d.fields)
}

// Fields returns the fields in order. The caller must not modify the
// slice, which Set and Delete on d change in place.
func (d *Doc) Fields() []Field {
	if d == nil {
		return nil
	}
	return d.fields
}

// All iterates over the fields in order.
func (d *Doc) All() iter.Seq2[string, any] {
	return func(yield func(string, any) bool) {
		if d == nil {
			return
		}
		for _, f := range d.fields {
			if !yield(f.Key, f.Value) {
				return
			}
		}
	}
}

// Keys returns the field names in order.
func (d *Doc) Keys() []string {
	keys := make([]string, d.Len())
	for i, f := range d.Fields() {
		keys[i] = f.Key
	}
	return keys
}

// Has reports whether the document has the top-level field key.
func (d *Doc) Has(key string) bool {
	_, ok := d.Get(key)
	return ok
}

// Get returns the top-level field key.
func (d *Doc) Get(key string) (any, bool) {
	if d == nil {
		return nil, false
	}
	for i := range d.fields {
		if d.fields[i].Key == key {
			return d.fields[i].Value, true
		}
	}
	return nil, false
}

// String returns the top-level field key if it is a string.
func (d *Doc) String(key string) (string, bool) {
	v, _ := d.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Doc returns the top-level field key if it is a document.
func (d *Doc) Doc(key string) (*Doc, bool) {
	v, _ := d.Get(key)
	sub, ok := v.(*Doc)
	return sub, ok && sub != nil
}

// Set replaces the value of key in place, or appends the field.
func (d *Doc) Set(key string, v any) {
	for i := range d.fields {
		if d.fields[i].Key == key {
			d.fields[i].Value = v
			return
		}
	}
	d.fields = append(d.fields, Field{Key: key, Value: v})
}

// Delete removes key and reports whether it was present. The fields
// after it move down in place: shaping deletes a dozen fields of every
// document of a page, and a new array for each was most of a list miss's
// allocation.
func (d *Doc) Delete(key string) bool {
	if d == nil {
		return false
	}
	for i := range d.fields {
		if d.fields[i].Key == key {
			d.fields = slices.Delete(d.fields, i, i+1)
			return true
		}
	}
	return false
}

// Path returns the value at a dotted path such as "task.desk". Arrays on
// the way are not traversed; see Values for Mongo's array semantics.
func (d *Doc) Path(path string) (any, bool) {
	cur := d
	for {
		head, rest, more := strings.Cut(path, ".")
		v, ok := cur.Get(head)
		if !ok || !more {
			return v, ok
		}
		next, isDoc := v.(*Doc)
		if !isDoc || next == nil {
			return nil, false
		}
		cur, path = next, rest
	}
}

// Clone returns a deep copy: documents and arrays are copied, scalars
// shared (they are immutable).
func (d *Doc) Clone() *Doc {
	if d == nil {
		return nil
	}
	c := &Doc{fields: make([]Field, len(d.fields))}
	for i, f := range d.fields {
		c.fields[i] = Field{Key: f.Key, Value: CloneValue(f.Value)}
	}
	return c
}

// CloneValue deep-copies a document value.
func CloneValue(v any) any {
	switch v := v.(type) {
	case *Doc:
		return v.Clone()
	case []any:
		c := make([]any, len(v))
		for i, e := range v {
			c[i] = CloneValue(e)
		}
		return c
	}
	return v
}

// An ObjectID is a MongoDB ObjectId. It renders as 24 lower-case hex digits.
type ObjectID [12]byte

// Hex returns the id as 24 lower-case hex digits.
func (id ObjectID) Hex() string { return hex.EncodeToString(id[:]) }

// String returns the id as hex.
func (id ObjectID) String() string { return id.Hex() }

// Time returns the creation time encoded in the id.
func (id ObjectID) Time() time.Time {
	secs := int64(id[0])<<24 | int64(id[1])<<16 | int64(id[2])<<8 | int64(id[3])
	return time.Unix(secs, 0).UTC()
}

// ParseObjectID parses 24 hex digits (either case).
func ParseObjectID(s string) (ObjectID, bool) {
	var id ObjectID
	if len(s) != 24 {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, false
	}
	return id, true
}

// IDString returns an id value as the string a URL carries: ObjectIDs as
// hex, strings as they are. It reports false for other types.
func IDString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case ObjectID:
		return v.Hex(), true
	}
	return "", false
}

// DateLayout is how datetimes render in responses (the original's
// DATE_FORMAT, "%Y-%m-%dT%H:%M:%S+0000", with a literal +0000 in UTC),
// and the string form the original's `where` turned into a date
// (ParseWhereDate reads RFC 3339 too).
const DateLayout = "2006-01-02T15:04:05+0000"

// ParseDate parses a string in DateLayout.
func ParseDate(s string) (time.Time, bool) {
	if len(s) != len(DateLayout) {
		return time.Time{}, false
	}
	t, err := time.Parse(DateLayout, s)
	return t, err == nil
}

// ParseWhereDate reads a date literal of a MongoDB `where`: a string in
// DateLayout, as the original read it, or an RFC 3339 date-time
// (2026-11-20T00:00:00Z, 2026-11-20T01:00:00+01:00, fractional seconds),
// which the original compared as a string and so silently matched
// nothing. A date alone (2026-11-20) stays a string. The time is in UTC,
// truncated to the millisecond, the precision MongoDB stores dates in,
// so that every backend compares the same instant.
func ParseWhereDate(s string) (time.Time, bool) {
	t, ok := ParseDate(s)
	if !ok {
		// Cheap refusal first: where values are mostly not dates.
		if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[10] != 'T' {
			return time.Time{}, false
		}
		var err error
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return time.Time{}, false
		}
	}
	return t.UTC().Truncate(time.Millisecond), true
}
