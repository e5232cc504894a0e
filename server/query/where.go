package query

import (
	"slices"
	"strings"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/grammar"
)

// parseWhere reads where: a MongoDB filter on document lists, field
// equality on search lists. Details validate it the same way (Eve echoes
// it in their links) but the backend never sees it.
func (p *parser) parseWhere() error {
	raw := p.args.first("where")
	if raw == "" {
		return nil
	}
	v, err := decodeWhere(raw)
	if err != nil {
		return err
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		return badf("where: must be a JSON object")
	}
	if p.res.Search {
		return p.searchWhere(d)
	}
	w := mongoWhere{res: p.res}
	out, err := w.filter(d, "")
	if err != nil || out.Len() == 0 {
		return err
	}
	// Filter and operator keys are sorted (their order means nothing);
	// values keep their order, as MongoDB compares embedded documents
	// field by field in order. So the ordered encoding is canonical, where
	// AppendCanonicalJSON would merge different queries into one key.
	p.where = string(codec.AppendJSON(nil, out))
	if p.list {
		p.q.Where = out
	}
	return nil
}

// searchWhere reads where on a search resource: {field: scalar, ...},
// each becoming a term filter, as eve-elastic's {"term": where} did when
// it worked at all.
func (p *parser) searchWhere(d *sources.Doc) error {
	only := func() error {
		return badf("where on %s supports field equality only; use source for more", p.res.Name)
	}
	fields := make([]sources.Field, 0, d.Len())
	seen := make(map[string]bool, d.Len())
	for _, f := range d.Fields() {
		k := f.Key
		if strings.HasPrefix(k, "$") {
			return only()
		}
		if k == "_type" {
			k = "_resource" // eve-elastic's fix_query renames the key
		}
		if msg := pathProblem(k); msg != "" {
			return badf("where: %s", msg)
		}
		if hiddenField(p.res, k) {
			return badf("where: field %s cannot be used", quote(k))
		}
		switch f.Value.(type) {
		case string, int64, float64, bool:
		default:
			return only()
		}
		if seen[k] {
			return badf("where: field %s appears twice", quote(k))
		}
		seen[k] = true
		fields = append(fields, sources.Field{Key: k, Value: f.Value})
	}
	if len(fields) == 0 {
		return nil
	}
	sortFields(fields)
	p.where = string(codec.AppendCanonicalJSON(nil, sources.NewDoc(fields...)))
	if p.search() {
		for _, f := range fields {
			p.whereTerms = append(p.whereTerms, termQuery(f.Key, f.Value))
		}
	}
	return nil
}

func termQuery(field string, v any) *sources.Doc {
	return doc1("term", doc1(field, doc1("value", v)))
}

func doc1(k string, v any) *sources.Doc { return sources.NewDoc(sources.Field{Key: k, Value: v}) }

func sortFields(fs []sources.Field) {
	slices.SortStableFunc(fs, func(a, b sources.Field) int { return strings.Compare(a.Key, b.Key) })
}

// mongoWhere validates a filter against the grammar (doc.go) and
// returns it with filter and operator keys sorted. The operators, where
// each may stand and the kind of argument it takes are grammar's table;
// mongoWhere checks each argument by its kind.
type mongoWhere struct {
	res *sources.Resource
}

func opError(k, where string) *Error {
	o, known := grammar.MongoOp(k)
	switch {
	case grammar.BannedMongoOp(k):
		return badf("where: operator %s is not allowed", quote(k))
	case known && o.Place != grammar.Inside:
		return badf("where: operator %s cannot be used %s", quote(k), where)
	case known:
		return badf("where: operator %s can only be used inside %s", quote(k), orList(o.In))
	}
	return badf("where: unknown operator %s", quote(k))
}

// orList writes a, b or c.
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

func isFieldOp(k string) bool   { return grammar.IsMongoOp(k, grammar.Field) }
func isLogicalOp(k string) bool { return grammar.IsMongoOp(k, grammar.Logical) }

func needs(op, path, what string) *Error {
	return badf("where: %s on %s needs %s", quote(op), quote(path), what)
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// filter validates {clause, ...}; prefix is the array field an
// $elemMatch filter is relative to ("" at the top).
func (w mongoWhere) filter(d *sources.Doc, prefix string) (*sources.Doc, error) {
	fields := make([]sources.Field, 0, d.Len())
	for _, f := range d.Fields() {
		k := f.Key
		if strings.HasPrefix(k, "$") {
			if !isLogicalOp(k) {
				return nil, opError(k, "at the top of a filter")
			}
			arr, ok := f.Value.([]any)
			if !ok || len(arr) == 0 {
				return nil, badf("where: %s needs a non-empty array of filters", quote(k))
			}
			out := make([]any, len(arr))
			for i, e := range arr {
				sub, ok := e.(*sources.Doc)
				if !ok {
					return nil, badf("where: %s needs an array of objects", quote(k))
				}
				var err error
				if out[i], err = w.filter(sub, prefix); err != nil {
					return nil, err
				}
			}
			fields = append(fields, sources.Field{Key: k, Value: out})
			continue
		}
		full := join(prefix, k)
		if msg := pathProblem(full); msg != "" {
			return nil, badf("where: %s", msg)
		}
		if hiddenField(w.res, full) {
			return nil, badf("where: field %s cannot be used", quote(full))
		}
		v, err := w.cond(full, f.Value)
		if err != nil {
			return nil, err
		}
		fields = append(fields, sources.Field{Key: k, Value: v})
	}
	sortFields(fields)
	return sources.NewDoc(fields...), nil
}

// cond validates the condition on one field: an operator document (every
// key starts with $) or a value to equal.
func (w mongoWhere) cond(path string, v any) (any, error) {
	d, ok := v.(*sources.Doc)
	if !ok || d.Len() == 0 {
		return v, w.literal(path, v)
	}
	ops := 0
	for _, f := range d.Fields() {
		if strings.HasPrefix(f.Key, "$") {
			if !isFieldOp(f.Key) {
				return nil, opError(f.Key, "on a field")
			}
			ops++
		}
	}
	switch ops {
	case 0:
		return v, w.literal(path, v)
	case d.Len():
		return w.ops(path, d)
	}
	return nil, badf("where: the condition on %s mixes operators and fields", quote(path))
}

// literal checks a value compared for equality: no operators anywhere in
// it, and no hidden field inside it (comparing a whole document is an
// oracle on its parts).
func (w mongoWhere) literal(path string, v any) error {
	switch v := v.(type) {
	case *sources.Doc:
		for _, f := range v.Fields() {
			if strings.HasPrefix(f.Key, "$") {
				if grammar.BannedMongoOp(f.Key) || !isFieldOp(f.Key) && !isLogicalOp(f.Key) {
					return opError(f.Key, "")
				}
				return badf("where: operator %s cannot be used inside a value", quote(f.Key))
			}
			if strings.IndexByte(f.Key, 0) >= 0 {
				return badf("where: field name contains NUL")
			}
			sub := path + "." + f.Key
			if hiddenField(w.res, sub) {
				return badf("where: field %s cannot be used", quote(sub))
			}
			if err := w.literal(sub, f.Value); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := w.literal(path, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// ops validates an operator document and returns it with keys sorted.
func (w mongoWhere) ops(path string, d *sources.Doc) (*sources.Doc, error) {
	fields := make([]sources.Field, 0, d.Len())
	for _, f := range d.Fields() {
		k, arg := f.Key, f.Value
		out := arg
		var err error
		o, _ := grammar.MongoOp(k)
		if o.Place != grammar.Field {
			return nil, opError(k, "on a field")
		}
		switch o.Arg {
		case grammar.Value:
			err = w.literal(path, arg)
		case grammar.Values:
			arr, ok := arg.([]any)
			if !ok {
				return nil, needs(k, path, "an array")
			}
			err = w.literal(path, arr)
		case grammar.Flag:
			switch arg.(type) {
			case bool, int64, float64:
			default:
				return nil, needs(k, path, "true or false")
			}
		case grammar.TypeSpec:
			if !typeArg(arg) {
				return nil, needs(k, path, "a BSON type number or alias, or an array of them")
			}
		case grammar.Count:
			if n, ok := arg.(int64); !ok || n < 0 {
				return nil, needs(k, path, "a non-negative integer")
			}
		case grammar.Modulus:
			arr, ok := arg.([]any)
			if !ok || len(arr) != 2 || !isNum(arr[0]) || !isNum(arr[1]) || arr[0] == int64(0) || arr[0] == float64(0) {
				return nil, needs(k, path, "[divisor, remainder] with a non-zero divisor")
			}
		case grammar.Operators:
			sub, ok := arg.(*sources.Doc)
			if !ok || sub.Len() == 0 || !allOps(sub) {
				return nil, needs(k, path, "an operator object")
			}
			out, err = w.ops(path, sub)
		case grammar.ElemMatch:
			sub, ok := arg.(*sources.Doc)
			if !ok || sub.Len() == 0 {
				return nil, needs(k, path, "a non-empty object")
			}
			if allOps(sub) && !hasLogical(sub) {
				out, err = w.ops(path, sub)
			} else {
				// A filter on the elements: its paths are relative to path.
				out, err = w.filter(sub, path)
			}
		case grammar.BitMask:
			if !bitsArg(arg) {
				return nil, needs(k, path, "a non-negative integer or an array of bit positions")
			}
		case grammar.Shape:
			err = shape(path, k, arg)
		case grammar.Point:
			err = nearArg(path, k, arg)
		case grammar.Distance:
			if !slices.ContainsFunc(o.In, d.Has) {
				return nil, badf("where: %s on %s needs %s", quote(k), quote(path), orList(o.In))
			}
			if !isNum(arg) || num(arg) < 0 {
				return nil, needs(k, path, "a non-negative number")
			}
		default:
			return nil, opError(k, "on a field")
		}
		if err != nil {
			return nil, err
		}
		fields = append(fields, sources.Field{Key: k, Value: out})
	}
	sortFields(fields)
	return sources.NewDoc(fields...), nil
}

func allOps(d *sources.Doc) bool {
	for _, f := range d.Fields() {
		if !strings.HasPrefix(f.Key, "$") {
			return false
		}
	}
	return true
}

func hasLogical(d *sources.Doc) bool {
	for _, f := range d.Fields() {
		if isLogicalOp(f.Key) {
			return true
		}
	}
	return false
}

func isNum(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

func num(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

func typeArg(v any) bool {
	switch v := v.(type) {
	case string:
		_, ok := grammar.TypeCodes(v)
		return ok
	case int64:
		return grammar.TypeCode(v)
	case []any:
		if len(v) == 0 {
			return false
		}
		for _, e := range v {
			if _, nested := e.([]any); nested || !typeArg(e) {
				return false
			}
		}
		return true
	}
	return false
}

func bitsArg(v any) bool {
	switch v := v.(type) {
	case int64:
		return v >= 0
	case []any:
		for _, e := range v {
			if n, ok := e.(int64); !ok || n < 0 || n > 1<<20 {
				return false
			}
		}
		return true
	}
	return false
}

// point is a legacy coordinate pair [x, y].
func point(v any) bool {
	arr, ok := v.([]any)
	return ok && len(arr) == 2 && isNum(arr[0]) && isNum(arr[1])
}

// shape checks the argument of $geoWithin or $geoIntersects: one of the
// shape operators the table places inside it.
func shape(path, op string, v any) error {
	if op == "$geoWithin" {
		return geoWithin(path, v)
	}
	sub, ok := v.(*sources.Doc)
	if !ok || sub.Len() != 1 || !sub.Has("$geometry") {
		return needs(op, path, `{"$geometry": ...}`)
	}
	g, _ := sub.Get("$geometry")
	return geometry(path, g)
}

func geoWithin(path string, v any) error {
	d, ok := v.(*sources.Doc)
	if !ok || d.Len() != 1 {
		return needs("$geoWithin", path, "one of $box, $center, $centerSphere, $geometry, $polygon")
	}
	f := d.Fields()[0]
	arr, _ := f.Value.([]any)
	switch f.Key {
	case "$box":
		if len(arr) != 2 || !point(arr[0]) || !point(arr[1]) {
			return needs("$box", path, "[[x, y], [x, y]]")
		}
	case "$center", "$centerSphere":
		if len(arr) != 2 || !point(arr[0]) || !isNum(arr[1]) {
			return needs(f.Key, path, "[[x, y], radius]")
		}
	case "$polygon":
		if len(arr) < 3 || slices.ContainsFunc(arr, func(p any) bool { return !point(p) }) {
			return needs("$polygon", path, "an array of at least three [x, y] points")
		}
	case "$geometry":
		return geometry(path, f.Value)
	default:
		if strings.HasPrefix(f.Key, "$") {
			return opError(f.Key, "inside $geoWithin")
		}
		return needs("$geoWithin", path, "one of $box, $center, $centerSphere, $geometry, $polygon")
	}
	return nil
}

// geometry is a GeoJSON object: {"type": ..., "coordinates": [...]} with
// an optional "crs".
func geometry(path string, v any) error {
	d, ok := v.(*sources.Doc)
	bad := needs("$geometry", path, `a GeoJSON object {"type": ..., "coordinates": [...]}`)
	if !ok {
		return bad
	}
	for _, f := range d.Fields() {
		switch f.Key {
		case "type":
			if _, ok := f.Value.(string); !ok {
				return bad
			}
		case "coordinates":
			if !coordinates(f.Value) {
				return bad
			}
		case "crs":
			crs, ok := f.Value.(*sources.Doc)
			if !ok {
				return bad
			}
			if !plain(crs) {
				return bad
			}
		default:
			return bad
		}
	}
	if !d.Has("type") || !d.Has("coordinates") {
		return bad
	}
	return nil
}

func coordinates(v any) bool {
	arr, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range arr {
		if !isNum(e) && !coordinates(e) {
			return false
		}
	}
	return true
}

func nearArg(path, op string, v any) error {
	if point(v) {
		return nil
	}
	d, ok := v.(*sources.Doc)
	if !ok || !d.Has("$geometry") {
		return needs(op, path, `[x, y] or {"$geometry": ...}`)
	}
	for _, f := range d.Fields() {
		switch f.Key {
		case "$geometry":
			if err := geometry(path, f.Value); err != nil {
				return err
			}
		case "$maxDistance", "$minDistance":
			if !isNum(f.Value) || num(f.Value) < 0 {
				return needs(f.Key, path, "a non-negative number")
			}
		default:
			return opError(f.Key, "inside "+op)
		}
	}
	return nil
}

// plain reports whether a value holds no operator ($-key) and no NUL key.
func plain(v any) bool {
	switch v := v.(type) {
	case *sources.Doc:
		for _, f := range v.Fields() {
			if strings.HasPrefix(f.Key, "$") || strings.IndexByte(f.Key, 0) >= 0 || !plain(f.Value) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !plain(e) {
				return false
			}
		}
	}
	return true
}
