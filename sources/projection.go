package sources

import "strings"

// Project applies to d, a document of q's answer once shaped, the fields
// the answer may carry. A client's projection works inside the resource's
// own projection where the resource has one (Resource.Projection: items,
// contacts), as Eve intersects them: once a client chose fields (a
// projection, inclusive or exclusive, or a _source filter in a search
// body), on a list or a detail, nothing outside the resource's projection
// comes back, whatever the client named. Without a client's choice a list
// keeps every stored field, as the original's lists do, and a detail has
// had the resource's projection applied by its shaping (package enrich).
// An exclusion drops its fields (Eve 1.1.2 ignored exclusions).
func (q *Query) Project(d *Doc) {
	if q.Resource != nil && q.Resource.Projection != nil && q.narrowed() {
		Projection{Fields: q.Resource.Projection}.Apply(d)
	}
	q.Fields.Apply(d)
}

// narrowed reports whether the client chose the fields of the answer.
func (q *Query) narrowed() bool {
	if !q.Fields.IsZero() {
		return true
	}
	return q.Search != nil && q.Search.Has("_source")
}

// Apply projects d in place: an inclusive projection keeps _id and the
// named fields (dotted names reach into sub-documents and arrays of them);
// an exclusive one drops the named fields. It is both the client's
// ?projection and a resource's datasource projection of details.
func (p Projection) Apply(d *Doc) {
	if p.IsZero() {
		return
	}
	if p.Exclude {
		for _, f := range p.Fields {
			dropPath(d, f)
		}
		return
	}
	keep := map[string][]string{} // top-level field → sub-paths (nil: whole field)
	for _, f := range p.Fields {
		head, rest, dotted := strings.Cut(f, ".")
		if !dotted {
			keep[head] = nil
			continue
		}
		if sub, ok := keep[head]; !ok || sub != nil {
			keep[head] = append(sub, rest)
		}
	}
	keep["_id"] = nil
	for _, key := range d.Keys() {
		sub, ok := keep[key]
		switch {
		case !ok:
			d.Delete(key)
		case sub != nil:
			v, _ := d.Get(key)
			if kept, any := keepPaths(v, sub); any {
				d.Set(key, kept)
			} else {
				d.Delete(key)
			}
		}
	}
}

// keepPaths projects a value to the given sub-paths, reporting whether
// anything is left.
func keepPaths(v any, paths []string) (any, bool) {
	switch v := v.(type) {
	case *Doc:
		c := v.Clone()
		Projection{Fields: paths}.Apply(c)
		c.Delete("_id")
		if inner, ok := v.Get("_id"); ok && containsString(paths, "_id") {
			c.Set("_id", inner)
		}
		return c, c.Len() > 0
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			if kept, ok := keepPaths(e, paths); ok {
				out = append(out, kept)
			}
		}
		return out, true
	}
	return nil, false
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// dropPath removes a dotted field, through sub-documents and arrays.
func dropPath(v any, path string) {
	head, rest, dotted := strings.Cut(path, ".")
	switch v := v.(type) {
	case *Doc:
		if !dotted {
			v.Delete(head)
			return
		}
		if sub, ok := v.Get(head); ok {
			dropPath(sub, rest)
		}
	case []any:
		for _, e := range v {
			dropPath(e, path)
		}
	}
}
