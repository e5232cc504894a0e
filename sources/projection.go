package sources

import "strings"

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
