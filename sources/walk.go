package sources

// WalkBody is the search body of a page of a cursor walk: body with
// tiebreaker appended to its sort, ascending, search_after set to after
// when the walk has begun, and size one more than the page's, so that the
// backend learns whether another page follows without asking for an
// empty one. body is not modified.
func WalkBody(body *Doc, tiebreaker string, after []any) *Doc {
	out := body.Clone()
	var keys []any
	switch sort, _ := out.Get("sort"); sort := sort.(type) {
	case nil:
	case []any:
		keys = sort[:len(sort):len(sort)]
	default:
		keys = []any{sort} // one key, written alone
	}
	out.Set("sort", append(keys, D(tiebreaker, D("order", "asc"))))
	if size, ok := out.Get("size"); ok {
		if n, ok := size.(int64); ok {
			out.Set("size", n+1)
		}
	}
	if after != nil {
		out.Set("search_after", after)
	}
	return out
}

// WalkSize is the size of a walk's page in its search body: the body's
// own size, 10 when it has none (Elasticsearch's default).
func WalkSize(body *Doc) int {
	if size, ok := body.Get("size"); ok {
		if n, ok := size.(int64); ok {
			return int(n)
		}
	}
	return 10
}
