package mongo

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/grammar"
)

// maxDepth bounds the nesting of a where the translator follows. The
// validator upstream allows 32 levels of JSON; a filter level is at least
// one JSON level, so this is never reached by a valid query.
const maxDepth = 64

// errWhere is wrapped by every translation failure. The query validator
// upstream refuses all of these first, so reaching one means the two
// disagree; the message names the operator or path, never a value.
var errWhere = errors.New("where clause not translatable")

func whereError(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %w", errWhere, fmt.Sprintf(format, args...), sources.ErrInvalid)
}

// A translator rebuilds a validated where as the filter sent to MongoDB,
// operator by operator, from an allow-list: grammar's table, the one the
// validator upstream reads (where_test.go proves every entry translates).
// Nothing a client sent reaches
// the server unless it was recognised here: keys are checked against the
// grammar, values are copied, and documents inside values may not hold
// $-keys.
//
// A 24-hex string matches an ObjectId or the same string, and a date
// string (sources.ParseWhereDate: the API's own format or RFC 3339)
// matches a date or the same string: equality becomes
// {$in: [converted, original]}, $ne becomes $nin, $in/$nin/$all get both
// forms of each element. $gt/$gte/$lt/$lte compare with the converted
// value, as Eve did. Where the two-form rule cannot be written (several
// alternatives inside an $elemMatch or $not on array elements), eve mode
// applies Eve's own rule: the converted value only.
type translator struct {
	eve bool
}

// translateWhere returns the Mongo filter for a validated where (nil: {}).
func translateWhere(w *sources.Doc) (*sources.Doc, error) {
	if w == nil {
		return sources.NewDoc(), nil
	}
	return translator{}.filter(w, 0)
}

// filter translates a filter document: logical operators and field
// clauses, ANDed.
func (t translator) filter(w *sources.Doc, depth int) (*sources.Doc, error) {
	if depth > maxDepth {
		return nil, whereError("nested too deeply")
	}
	out := sources.NewDoc()
	var extra []any // clauses that could not sit under their own path key
	for _, f := range w.Fields() {
		switch f.Key {
		case "$and", "$or", "$nor":
			arr, ok := f.Value.([]any)
			if !ok || len(arr) == 0 {
				return nil, whereError("%s needs a non-empty array", f.Key)
			}
			subs := make([]any, len(arr))
			for i, e := range arr {
				sub, ok := e.(*sources.Doc)
				if !ok {
					return nil, whereError("%s takes documents", f.Key)
				}
				tr, err := t.filter(sub, depth+1)
				if err != nil {
					return nil, err
				}
				subs[i] = tr
			}
			out.Set(f.Key, subs)
		default:
			if err := checkPath(f.Key); err != nil {
				return nil, err
			}
			clauses, err := t.field(f.Key, f.Value, depth+1)
			if err != nil {
				return nil, err
			}
			for _, c := range clauses {
				if k := c.Keys()[0]; k == f.Key && !out.Has(k) {
					v, _ := c.Get(k)
					out.Set(k, v)
				} else {
					extra = append(extra, c)
				}
			}
		}
	}
	appendAnd(out, extra)
	return out, nil
}

// checkPath enforces the field-path rules of the grammar.
func checkPath(p string) error {
	switch {
	case p == "", len(p) > 256:
		return whereError("field path length")
	case p[0] == '$':
		return whereError("operator %.32q not allowed here", p)
	case strings.IndexByte(p, 0) >= 0:
		return whereError("field path holds NUL")
	case slices.Contains(strings.Split(p, "."), ""):
		return whereError("field path %.64q has an empty segment", p)
	}
	return nil
}

// field translates path: v into one or more clauses, ANDed.
func (t translator) field(path string, v any, depth int) ([]*sources.Doc, error) {
	if d, ok := v.(*sources.Doc); ok {
		switch ops, err := isOpDoc(d); {
		case err != nil:
			return nil, err
		case ops:
			return t.opClauses(path, d, depth)
		}
	}
	vs, err := t.variants(v)
	if err != nil {
		return nil, err
	}
	if len(vs) == 1 {
		return []*sources.Doc{sources.D(path, vs[0])}, nil
	}
	return []*sources.Doc{sources.D(path, sources.D("$in", vs))}, nil
}

// isOpDoc reports whether d is an operator document: non-empty, every key
// an operator. Mixing operators and fields is an error.
func isOpDoc(d *sources.Doc) (bool, error) {
	ops := 0
	for _, k := range d.Keys() {
		if strings.HasPrefix(k, "$") {
			ops++
		}
	}
	if ops > 0 && ops != d.Len() {
		return false, whereError("operators mixed with fields")
	}
	return ops > 0, nil
}

// A cond is one operator and its translated argument.
type cond struct {
	op  string
	arg any
}

// opClauses translates path: {ops}. Usually one clause; more when the
// two-form rule produced operators that cannot share one document.
func (t translator) opClauses(path string, ops *sources.Doc, depth int) ([]*sources.Doc, error) {
	conds, lifted, err := t.conds(path, ops, depth)
	if err != nil {
		return nil, err
	}
	var clauses []*sources.Doc
	for _, od := range pack(conds) {
		clauses = append(clauses, sources.D(path, od))
	}
	return append(clauses, lifted...), nil
}

// pack places conditions into as few operator documents as their keys
// allow, in order. Several conditions in one document are ANDed, exactly
// as separate {path: {...}} clauses are, so the split never changes the
// meaning. $near's modifiers stay with it in the first document; a second
// $nin merges into the first (a union, which is the same AND).
func pack(conds []cond) []*sources.Doc {
	docs := []*sources.Doc{sources.NewDoc()}
	for _, c := range conds {
		if isNearFamily(c.op) {
			docs[0].Set(c.op, c.arg)
			continue
		}
		placed := false
		for _, d := range docs {
			prev, ok := d.Get(c.op)
			if !ok {
				d.Set(c.op, c.arg)
				placed = true
				break
			}
			if c.op == "$nin" {
				d.Set(c.op, append(slices.Clip(prev.([]any)), c.arg.([]any)...))
				placed = true
				break
			}
		}
		if !placed {
			docs = append(docs, sources.D(c.op, c.arg))
		}
	}
	if docs[0].Len() == 0 { // only possible with no conditions at all
		return nil
	}
	return docs
}

func isNearFamily(op string) bool {
	switch op {
	case "$near", "$nearSphere", "$maxDistance", "$minDistance":
		return true
	}
	return false
}

// conds translates the operators of one operator document. path is "" in
// element context (inside $elemMatch's operator form), where lifted
// clauses cannot exist. lifted are whole clauses to AND beside path's (a
// $not whose operand needed several documents).
func (t translator) conds(path string, ops *sources.Doc, depth int) ([]cond, []*sources.Doc, error) {
	if depth > maxDepth {
		return nil, nil, whereError("nested too deeply")
	}
	var (
		out    []cond
		lifted []*sources.Doc
	)
	for _, f := range ops.Fields() {
		op, arg := f.Key, f.Value
		if !grammar.IsMongoOp(op, grammar.Field) {
			return nil, nil, whereError("operator %.32q not allowed", op)
		}
		switch op {
		case "$eq", "$ne":
			vs, err := t.variants(arg)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case len(vs) == 1:
				out = append(out, cond{op, vs[0]})
			case op == "$eq":
				out = append(out, cond{"$in", vs})
			default:
				out = append(out, cond{"$nin", vs})
			}
		case "$in", "$nin":
			arr, ok := arg.([]any)
			if !ok {
				return nil, nil, whereError("%s takes an array", op)
			}
			all := []any{}
			for _, e := range arr {
				vs, err := t.variants(e)
				if err != nil {
					return nil, nil, err
				}
				all = append(all, vs...)
			}
			out = append(out, cond{op, all})
		case "$all":
			cs, err := t.all(arg, depth)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, cs...)
		case "$gt", "$gte", "$lt", "$lte":
			lit, err := literal(arg, 0)
			if err != nil {
				return nil, nil, err
			}
			conv, _ := convert(lit)
			out = append(out, cond{op, conv})
		case "$exists":
			switch arg.(type) {
			case bool, int64, float64:
				out = append(out, cond{op, arg})
			default:
				return nil, nil, whereError("$exists takes a boolean")
			}
		case "$type":
			if !typeArg(arg, true) {
				return nil, nil, whereError("$type takes a number, an alias or an array of them")
			}
			out = append(out, cond{op, sources.CloneValue(arg)})
		case "$size":
			if !isNumber(arg) {
				return nil, nil, whereError("$size takes a number")
			}
			out = append(out, cond{op, arg})
		case "$mod":
			arr, ok := arg.([]any)
			if !ok || len(arr) != 2 || !isNumber(arr[0]) || !isNumber(arr[1]) {
				return nil, nil, whereError("$mod takes [divisor, remainder]")
			}
			out = append(out, cond{op, []any{arr[0], arr[1]}})
		case "$bitsAllClear", "$bitsAllSet", "$bitsAnyClear", "$bitsAnySet":
			if !bitsArg(arg) {
				return nil, nil, whereError("%s takes a number or an array of bit positions", op)
			}
			out = append(out, cond{op, sources.CloneValue(arg)})
		case "$not":
			c, l, err := t.not(path, arg, depth)
			if err != nil {
				return nil, nil, err
			}
			if l != nil {
				lifted = append(lifted, l)
			} else {
				out = append(out, c)
			}
		case "$elemMatch":
			c, err := t.elemMatch(arg, depth)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, c)
		case "$geoWithin", "$geoIntersects":
			g, err := geoArg(op, arg)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, cond{op, g})
		case "$near", "$nearSphere":
			g, err := nearArg(op, arg)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, cond{op, g})
		case "$maxDistance", "$minDistance":
			if !isNumber(arg) {
				return nil, nil, whereError("%s takes a number", op)
			}
			out = append(out, cond{op, arg})
		default:
			return nil, nil, whereError("operator %.32q not translated", op)
		}
	}
	return out, lifted, nil
}

// all translates $all. Elements with two forms leave $all for an $in of
// their own (in a separate document when needed): {f: {$all: [a, b]}} is
// {f: a} AND {f: b}. $elemMatch elements are translated in place.
func (t translator) all(arg any, depth int) ([]cond, error) {
	arr, ok := arg.([]any)
	if !ok {
		return nil, whereError("$all takes an array")
	}
	keep := []any{}
	var split []cond
	for _, e := range arr {
		if d, ok := e.(*sources.Doc); ok && d.Len() == 1 && d.Keys()[0] == "$elemMatch" {
			em, _ := d.Get("$elemMatch")
			c, err := t.elemMatch(em, depth)
			if err != nil {
				return nil, err
			}
			keep = append(keep, sources.D(c.op, c.arg))
			continue
		}
		vs, err := t.variants(e)
		if err != nil {
			return nil, err
		}
		if len(vs) == 1 {
			keep = append(keep, vs[0])
		} else {
			split = append(split, cond{"$in", vs})
		}
	}
	if len(keep) > 0 || len(split) == 0 {
		split = append([]cond{{"$all", keep}}, split...)
	}
	return split, nil
}

// not translates {$not: {ops}}. When the operand needs several documents,
// NOT(A AND B) on path is written {$nor: [{$and: [{path: A}, {path: B}]}]}
// (the same documents match, missing fields included) and returned as a
// lifted clause; in element context eve mode keeps it to one document.
func (t translator) not(path string, arg any, depth int) (cond, *sources.Doc, error) {
	d, ok := arg.(*sources.Doc)
	if !ok {
		return cond{}, nil, whereError("$not takes an operator document")
	}
	if ops, err := isOpDoc(d); err != nil || !ops {
		return cond{}, nil, whereError("$not takes an operator document")
	}
	conds, lifted, err := t.conds(path, d, depth+1)
	if err != nil {
		return cond{}, nil, err
	}
	packed := pack(conds)
	if len(packed) == 1 && len(lifted) == 0 {
		return cond{"$not", packed[0]}, nil, nil
	}
	if path == "" {
		conds, _, err := translator{eve: true}.conds("", d, depth+1)
		if err != nil {
			return cond{}, nil, err
		}
		return cond{"$not", pack(conds)[0]}, nil, nil
	}
	var clauses []any
	for _, od := range packed {
		clauses = append(clauses, sources.D(path, od))
	}
	for _, l := range lifted {
		clauses = append(clauses, l)
	}
	if len(clauses) == 1 {
		return cond{}, sources.D("$nor", clauses), nil
	}
	return cond{}, sources.D("$nor", []any{sources.D("$and", clauses)}), nil
}

// elemMatch translates $elemMatch: the operator form (conditions on the
// elements themselves) or the filter form (a filter on document elements).
func (t translator) elemMatch(arg any, depth int) (cond, error) {
	d, ok := arg.(*sources.Doc)
	if !ok {
		return cond{}, whereError("$elemMatch takes a document")
	}
	opForm := d.Len() > 0
	for _, k := range d.Keys() {
		if !strings.HasPrefix(k, "$") || k == "$and" || k == "$or" || k == "$nor" {
			opForm = false
		}
	}
	if !opForm {
		f, err := t.filter(d, depth+1)
		if err != nil {
			return cond{}, err
		}
		return cond{"$elemMatch", f}, nil
	}
	conds, _, err := t.conds("", d, depth+1)
	if err != nil {
		return cond{}, err
	}
	packed := pack(conds)
	if len(packed) != 1 {
		conds, _, err = translator{eve: true}.conds("", d, depth+1)
		if err != nil {
			return cond{}, err
		}
		packed = pack(conds)
	}
	return cond{"$elemMatch", packed[0]}, nil
}

// variants returns the values an equality on v matches: the converted
// form first (ObjectIDs and dates in place of their strings) and the
// literal, or just one when they are the same or in eve mode.
func (t translator) variants(v any) ([]any, error) {
	lit, err := literal(v, 0)
	if err != nil {
		return nil, err
	}
	conv, changed := convert(lit)
	switch {
	case !changed:
		return []any{lit}, nil
	case t.eve:
		return []any{conv}, nil
	}
	return []any{conv, lit}, nil
}

// literal deep-copies a value, refusing documents that hold operators
// ($-keys) and types a where cannot carry.
func literal(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, whereError("value nested too deeply")
	}
	switch v := v.(type) {
	case nil, bool, int64, float64, string:
		return v, nil
	case sources.ObjectID, time.Time:
		return v, nil
	case []any:
		c := make([]any, len(v))
		for i, e := range v {
			var err error
			if c[i], err = literal(e, depth+1); err != nil {
				return nil, err
			}
		}
		return c, nil
	case *sources.Doc:
		c := sources.NewDoc()
		for _, f := range v.Fields() {
			if strings.HasPrefix(f.Key, "$") {
				return nil, whereError("operator %.32q inside a value", f.Key)
			}
			if strings.IndexByte(f.Key, 0) >= 0 {
				return nil, whereError("key holds NUL")
			}
			e, err := literal(f.Value, depth+1)
			if err != nil {
				return nil, err
			}
			c.Set(f.Key, e)
		}
		return c, nil
	}
	return nil, whereError("unsupported value type %T", v)
}

// convert applies Eve's _mongotize to a literal: a date string (the API's
// format, as Eve read it, or RFC 3339) becomes a time.Time, then any
// 24-hex string an ObjectID, recursively. It reports whether anything
// changed. The literal is not modified.
func convert(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		if t, ok := sources.ParseWhereDate(v); ok {
			return t, true
		}
		if id, ok := sources.ParseObjectID(v); ok {
			return id, true
		}
		return v, false
	case []any:
		var out []any
		for i, e := range v {
			c, changed := convert(e)
			if changed && out == nil {
				out = slices.Clone(v)
			}
			if out != nil {
				out[i] = c
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case *sources.Doc:
		var out *sources.Doc
		for i, f := range v.Fields() {
			c, changed := convert(f.Value)
			if changed && out == nil {
				out = sources.NewDoc(slices.Clone(v.Fields())...)
			}
			if out != nil {
				out.Set(v.Fields()[i].Key, c)
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

func typeArg(v any, arrayOK bool) bool {
	switch v := v.(type) {
	case int64, float64:
		return true
	case string:
		_, ok := grammar.TypeCodes(v)
		return ok
	case []any:
		if !arrayOK || len(v) == 0 {
			return false
		}
		for _, e := range v {
			if !typeArg(e, false) {
				return false
			}
		}
		return true
	}
	return false
}

func bitsArg(v any) bool {
	switch v := v.(type) {
	case int64, float64:
		return true
	case []any:
		for _, e := range v {
			if !isNumber(e) {
				return false
			}
		}
		return true
	}
	return false
}

// geoArg translates the argument of $geoWithin and $geoIntersects: a
// document with exactly one shape operator, whose value is plain data.
func geoArg(op string, arg any) (*sources.Doc, error) {
	d, ok := arg.(*sources.Doc)
	if !ok || d.Len() != 1 {
		return nil, whereError("%s takes one shape", op)
	}
	shape := d.Keys()[0]
	if s, ok := grammar.MongoOp(shape); !ok || s.Place != grammar.Inside || !slices.Contains(s.In, op) {
		return nil, whereError("%s does not take %.32q", op, shape)
	}
	v, _ := d.Get(shape)
	lit, err := literal(v, 0)
	if err != nil {
		return nil, err
	}
	return sources.D(shape, lit), nil
}

// nearArg translates the argument of $near and $nearSphere: a legacy point
// (array or plain document) or {$geometry, $maxDistance, $minDistance}.
func nearArg(op string, arg any) (any, error) {
	d, ok := arg.(*sources.Doc)
	if !ok {
		if _, isArr := arg.([]any); !isArr {
			return nil, whereError("%s takes a point", op)
		}
		return literal(arg, 0)
	}
	if ops, err := isOpDoc(d); err != nil || !ops {
		if err != nil {
			return nil, err
		}
		return literal(d, 0)
	}
	out := sources.NewDoc()
	for _, f := range d.Fields() {
		switch f.Key {
		case "$geometry":
			g, err := literal(f.Value, 0)
			if err != nil {
				return nil, err
			}
			out.Set(f.Key, g)
		case "$maxDistance", "$minDistance":
			if !isNumber(f.Value) {
				return nil, whereError("%s takes a number", f.Key)
			}
			out.Set(f.Key, f.Value)
		default:
			return nil, whereError("%s does not take %.32q", op, f.Key)
		}
	}
	if !out.Has("$geometry") {
		return nil, whereError("%s needs $geometry", op)
	}
	return out, nil
}

// earthRadius is the radius, in meters, MongoDB's manual uses to turn
// meters into the radians of $centerSphere.
const earthRadius = 6378100.0

// countFilter rewrites $near and $nearSphere, which the aggregation behind
// countDocuments refuses, into the $geoWithin forms MongoDB's manual gives
// for counting: $maxDistance d around the point becomes $center (legacy
// $near, planar units) or $centerSphere (legacy $nearSphere in radians;
// GeoJSON forms in meters, divided by the Earth's radius); $minDistance
// becomes a $not of the same; with neither, the field must exist. Counts
// can differ from the page only on points exactly at a boundary. MongoDB
// allows $near only at the top level or in a top-level $and, so only
// those are rewritten.
func countFilter(f *sources.Doc) *sources.Doc {
	out := sources.NewDoc()
	var extra []any
	for _, fl := range f.Fields() {
		k, v := fl.Key, fl.Value
		od, isDoc := v.(*sources.Doc)
		switch {
		case k == "$and":
			arr, _ := v.([]any)
			subs := make([]any, len(arr))
			for i, e := range arr {
				if d, ok := e.(*sources.Doc); ok {
					subs[i] = countFilter(d)
				} else {
					subs[i] = e
				}
			}
			out.Set(k, subs)
		case strings.HasPrefix(k, "$") || !isDoc || !(od.Has("$near") || od.Has("$nearSphere")):
			out.Set(k, v)
		default:
			for i, c := range nearClauses(k, od) {
				if i == 0 {
					v, _ := c.Get(k)
					out.Set(k, v)
				} else {
					extra = append(extra, c)
				}
			}
		}
	}
	appendAnd(out, extra)
	return out
}

func nearClauses(path string, od *sources.Doc) []*sources.Doc {
	var (
		conds          []cond
		op             string
		arg            any
		maxD, minD     any
		sphere, meters bool
	)
	for _, f := range od.Fields() {
		switch f.Key {
		case "$near", "$nearSphere":
			op, arg = f.Key, f.Value
		case "$maxDistance":
			maxD = f.Value
		case "$minDistance":
			minD = f.Value
		default:
			conds = append(conds, cond{f.Key, f.Value})
		}
	}
	center := arg
	if d, ok := arg.(*sources.Doc); ok && d.Has("$geometry") {
		g, _ := d.Doc("$geometry")
		center, _ = g.Get("coordinates")
		if v, ok := d.Get("$maxDistance"); ok {
			maxD = v
		}
		if v, ok := d.Get("$minDistance"); ok {
			minD = v
		}
		sphere, meters = true, true
	} else {
		sphere = op == "$nearSphere"
	}
	shape := "$center"
	if sphere {
		shape = "$centerSphere"
	}
	radius := func(v any) any {
		if !meters {
			return v
		}
		switch n := v.(type) {
		case int64:
			return float64(n) / earthRadius
		case float64:
			return n / earthRadius
		}
		return v
	}
	within := func(r any) *sources.Doc {
		return sources.D("$geoWithin", sources.D(shape, []any{center, radius(r)}))
	}
	if maxD != nil {
		g, _ := within(maxD).Get("$geoWithin")
		conds = append(conds, cond{"$geoWithin", g})
	}
	if minD != nil {
		conds = append(conds, cond{"$not", within(minD)})
	}
	if maxD == nil && minD == nil {
		conds = append(conds, cond{"$exists", true})
	}
	var clauses []*sources.Doc
	for _, d := range pack(conds) {
		clauses = append(clauses, sources.D(path, d))
	}
	return clauses
}

// appendAnd adds clauses to out's $and, creating it when needed.
func appendAnd(out *sources.Doc, clauses []any) {
	if len(clauses) == 0 {
		return
	}
	if and, ok := out.Get("$and"); ok {
		out.Set("$and", append(and.([]any), clauses...))
		return
	}
	out.Set("$and", clauses)
}
