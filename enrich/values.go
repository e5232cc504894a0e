package enrich

import (
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// truthy is Python's truth value of a document value, which is what the
// original's `if doc.get(...)` tests.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case int64:
		return v != 0
	case int:
		return v != 0
	case int32:
		return v != 0
	case float64:
		return v != 0
	case *sources.Doc:
		return v.Len() > 0
	case []any:
		return len(v) > 0
	}
	return true
}

// idOf returns a truthy id value in the form hrefs and lookups use:
// strings as they are, ObjectIDs as hex, integers in decimal. It reports
// false for anything else, the empty string and zero included.
func idOf(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, v != ""
	case sources.ObjectID:
		return v.Hex(), true
	case int64:
		return strconv.FormatInt(v, 10), v != 0
	case int:
		return strconv.Itoa(v), v != 0
	case int32:
		return strconv.FormatInt(int64(v), 10), v != 0
	}
	return "", false
}

// key is how ids are matched: a 24-hex id matches an ObjectID or the same
// string, in either case, so it is compared in lower case; any other id as
// it is.
func key(id string) string {
	if _, ok := sources.ParseObjectID(id); ok {
		return strings.ToLower(id)
	}
	return id
}

// docKey returns the match key of the id at field of d.
func docKey(d *sources.Doc, field string) (string, bool) {
	v, _ := d.Get(field)
	id, ok := idOf(v)
	if !ok {
		return "", false
	}
	return key(id), true
}

// A valueSet collects the distinct values of one lookup, in first-seen
// order.
type valueSet struct {
	values []any
	seen   map[string]bool
}

func (s *valueSet) add(id string) {
	if s.seen == nil {
		s.seen = make(map[string]bool)
	}
	if !s.seen[id] {
		s.seen[id] = true
		s.values = append(s.values, id)
	}
}

func (s *valueSet) len() int { return len(s.values) }

// byKey indexes docs by the match key of field; the first document of a
// key wins (lookups come sorted, so that is the first in sort order).
func byKey(docs []*sources.Doc, field string) map[string]*sources.Doc {
	m := make(map[string]*sources.Doc, len(docs))
	for _, d := range docs {
		if k, ok := docKey(d, field); ok {
			if _, dup := m[k]; !dup {
				m[k] = d
			}
		}
	}
	return m
}

// groupByKey groups docs by the match key of field, keeping their order.
func groupByKey(docs []*sources.Doc, field string) map[string][]*sources.Doc {
	m := make(map[string][]*sources.Doc)
	for _, d := range docs {
		if k, ok := docKey(d, field); ok {
			m[k] = append(m[k], d)
		}
	}
	return m
}

// get returns the value at a dotted path, nil when any part is missing
// or not a document (the original's `(x.get(a) or {}).get(b)`).
func get(d *sources.Doc, path string) any {
	v, _ := d.Path(path)
	return sources.CloneValue(v)
}

// list returns the value of field as an array, if it is one.
func list(d *sources.Doc, field string) ([]any, bool) {
	v, _ := d.Get(field)
	a, ok := v.([]any)
	return a, ok
}

// asDoc returns v as a non-nil document.
func asDoc(v any) (*sources.Doc, bool) {
	d, ok := v.(*sources.Doc)
	return d, ok && d != nil
}

// scheduledTime reads a planning.scheduled value as a time: a datetime
// (Mongo) or the string Elasticsearch stored, in Superdesk's "+0000" form
// or RFC 3339 ("2019-09-10T15:00:00.000Z").
func scheduledTime(v any) (time.Time, bool) {
	switch v := v.(type) {
	case time.Time:
		return v, true
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700"} {
			if t, err := time.Parse(layout, v); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// sameScheduled reports whether two planning.scheduled values sort equal.
func sameScheduled(a, b any) bool {
	ta, okA := scheduledTime(a)
	tb, okB := scheduledTime(b)
	if okA && okB {
		return ta.Equal(tb)
	}
	if okA || okB {
		return false
	}
	return scalar(a) && scalar(b) && a == b
}

// scalar reports whether v is a comparable scalar document value.
func scalar(v any) bool {
	switch v.(type) {
	case nil, string, bool, int64, float64:
		return true
	}
	return false
}
