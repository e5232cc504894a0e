package sandbox

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/grammar"
)

// Match reports whether doc matches the MongoDB filter, with MongoDB's
// semantics for the validated where grammar (see the package comment)
// and the Eve rule for strings: in equality, $in, $nin, $ne and $all a
// 24-hex string matches an ObjectID or the same string, and a date string
// (sources.ParseWhereDate: the API's format or RFC 3339) matches an equal
// date or the same string; for $gt, $gte, $lt and $lte they compare as
// the ObjectID or the date. Typed
// ObjectID and time.Time values in the filter, as a driver sends them,
// match only values of their own type.
//
// A filter it cannot evaluate is an error wrapping sources.ErrInvalid.
func Match(doc, filter *sources.Doc) (bool, error) {
	m, err := eveRules.compileFilter(filter, 0)
	if err != nil {
		return false, err
	}
	return m(doc), nil
}

// MatchLiteral is Match without the Eve rule: a string matches only
// strings, as MongoDB itself matches the filter a driver sends (where
// the adapter has already written out both forms of every value Eve
// would convert). The Mongo adapter's fake uses it.
func MatchLiteral(doc, filter *sources.Doc) (bool, error) {
	m, err := literalRules.compileFilter(filter, 0)
	if err != nil {
		return false, err
	}
	return m(doc), nil
}

// rules are how a filter's strings match: with the Eve rule (a 24-hex
// or DateLayout string also matches the ObjectID or date it spells) or
// literally.
type rules struct{ eve bool }

var (
	eveRules     = rules{eve: true}
	literalRules = rules{}
)

// A docMatcher is a compiled filter.
type docMatcher func(d *sources.Doc) bool

// A pred is a compiled operator on the values a field path reaches.
type pred func(fv *fieldValues) bool

// maxFilterDepth bounds the nesting of filters and operator documents.
const maxFilterDepth = 100

func invalid(format string, args ...any) error {
	return fmt.Errorf("sandbox: "+format+": %w", append(args, sources.ErrInvalid)...)
}

func (r rules) compileFilter(f *sources.Doc, depth int) (docMatcher, error) {
	if depth > maxFilterDepth {
		return nil, invalid("filter nested too deeply")
	}
	var ms []docMatcher
	for _, fl := range f.Fields() {
		m, err := r.compileClause(fl.Key, fl.Value, depth)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return allOf(ms), nil
}

func allOf(ms []docMatcher) docMatcher {
	switch len(ms) {
	case 0:
		return func(*sources.Doc) bool { return true }
	case 1:
		return ms[0]
	}
	return func(d *sources.Doc) bool {
		for _, m := range ms {
			if !m(d) {
				return false
			}
		}
		return true
	}
}

func (r rules) compileClause(key string, v any, depth int) (docMatcher, error) {
	v = normalize(v)
	switch key {
	case "$and", "$or", "$nor":
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, invalid("%s needs a non-empty array", key)
		}
		subs := make([]docMatcher, len(list))
		for i, e := range list {
			sub, ok := e.(*sources.Doc)
			if !ok {
				return nil, invalid("%s elements must be documents", key)
			}
			m, err := r.compileFilter(sub, depth+1)
			if err != nil {
				return nil, err
			}
			subs[i] = m
		}
		switch key {
		case "$and":
			return allOf(subs), nil
		case "$or":
			return func(d *sources.Doc) bool {
				for _, m := range subs {
					if m(d) {
						return true
					}
				}
				return false
			}, nil
		}
		return func(d *sources.Doc) bool {
			for _, m := range subs {
				if m(d) {
					return false
				}
			}
			return true
		}, nil
	}
	if strings.HasPrefix(key, "$") {
		return nil, invalid("unsupported top-level operator %s", key)
	}
	path, err := splitPath(key)
	if err != nil {
		return nil, err
	}
	p, err := r.compileValue(v, depth)
	if err != nil {
		return nil, err
	}
	return func(d *sources.Doc) bool {
		var fv fieldValues
		fv.vals, fv.missing = bsonorder.Reach(d, path)
		return p(&fv)
	}, nil
}

func splitPath(key string) ([]string, error) {
	path := strings.Split(key, ".")
	for _, s := range path {
		if s == "" {
			return nil, invalid("field path %q has an empty segment", key)
		}
	}
	return path, nil
}

// compileValue compiles the value of a field clause: an operator document
// or a value to equal.
func (r rules) compileValue(v any, depth int) (pred, error) {
	if d, ok := v.(*sources.Doc); ok && isOperatorDoc(d) {
		return r.compileOps(d, depth+1)
	}
	return r.eqPred(v, depth)
}

func isOperatorDoc(d *sources.Doc) bool {
	f := d.Fields()
	return len(f) > 0 && strings.HasPrefix(f[0].Key, "$")
}

// fieldValues are the values a dotted path reaches in a document
// (bsonorder.Reach). Leaf arrays are not expanded there; operators expand
// them as MongoDB does.
type fieldValues struct {
	vals []any
	// missing: some branch of the traversal found no value (the field is
	// absent, or a scalar stood in the way).
	missing bool
}

// normalize is bsonorder.Normalize: the sandbox's documents hold values
// as MongoDB's order knows them.
func normalize(v any) any { return bsonorder.Normalize(v) }

// maxValueDepth bounds recursion into values, so that a pathological
// (cyclic) document cannot exhaust the stack.
const maxValueDepth = 200

// anyExpanded reports whether f holds for a value or, for arrays, for the
// array itself or one of its elements.
func (fv *fieldValues) anyExpanded(f func(v any) bool) bool {
	for _, v := range fv.vals {
		if f(v) {
			return true
		}
		if a, ok := v.([]any); ok {
			for _, e := range a {
				if f(normalize(e)) {
					return true
				}
			}
		}
	}
	return false
}

// looseEqual is equality, with the Eve rule for strings of the filter
// when eve is set.
func looseEqual(v, f any, eve bool, depth int) bool {
	if depth > maxValueDepth {
		return false
	}
	switch f := f.(type) {
	case string:
		switch v := v.(type) {
		case string:
			return v == f
		case sources.ObjectID:
			if !eve {
				return false
			}
			id, ok := sources.ParseObjectID(f)
			return ok && id == v
		case time.Time:
			if !eve {
				return false
			}
			t, ok := sources.ParseWhereDate(f)
			return ok && t.Equal(v)
		}
		return false
	case *sources.Doc:
		d, ok := v.(*sources.Doc)
		if !ok || d.Len() != f.Len() {
			return false
		}
		df, ff := d.Fields(), f.Fields()
		for i := range ff {
			if df[i].Key != ff[i].Key || !looseEqual(normalize(df[i].Value), normalize(ff[i].Value), eve, depth+1) {
				return false
			}
		}
		return true
	case []any:
		a, ok := v.([]any)
		if !ok || len(a) != len(f) {
			return false
		}
		for i := range f {
			if !looseEqual(normalize(a[i]), normalize(f[i]), eve, depth+1) {
				return false
			}
		}
		return true
	}
	r := bsonorder.TypeRank(f)
	return r != bsonorder.RankUnknown && bsonorder.TypeRank(v) == r && bsonorder.Compare(v, f) == 0
}

func (r rules) eqPred(want any, depth int) (pred, error) {
	want = normalize(want)
	if err := checkValue(want, depth); err != nil {
		return nil, err
	}
	return func(fv *fieldValues) bool {
		if want == nil && fv.missing {
			return true
		}
		return fv.anyExpanded(func(v any) bool { return looseEqual(v, want, r.eve, 0) })
	}, nil
}

// checkValue refuses filter values that are not document values.
func checkValue(v any, depth int) error {
	if depth > maxFilterDepth {
		return invalid("value nested too deeply")
	}
	switch v := normalize(v).(type) {
	case *sources.Doc:
		for _, f := range v.Fields() {
			if err := checkValue(f.Value, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	default:
		if bsonorder.TypeRank(v) == bsonorder.RankUnknown {
			return invalid("unsupported value of type %T", v)
		}
	}
	return nil
}

// eveConvert converts strings as Eve's _mongotize did: 24-hex strings to
// ObjectIDs, date strings (sources.ParseWhereDate) to dates, recursively.
func eveConvert(v any) any {
	switch v := normalize(v).(type) {
	case string:
		if t, ok := sources.ParseWhereDate(v); ok {
			return t
		}
		if id, ok := sources.ParseObjectID(v); ok {
			return id
		}
		return v
	case *sources.Doc:
		c := sources.NewDoc()
		for _, f := range v.Fields() {
			c.Set(f.Key, eveConvert(f.Value))
		}
		return c
	case []any:
		c := make([]any, len(v))
		for i, e := range v {
			c[i] = eveConvert(e)
		}
		return c
	default:
		return v
	}
}

func not(p pred) pred { return func(fv *fieldValues) bool { return !p(fv) } }

func (r rules) compileOps(ops *sources.Doc, depth int) (pred, error) {
	if depth > maxFilterDepth {
		return nil, invalid("operators nested too deeply")
	}
	var preds []pred
	for _, f := range ops.Fields() {
		arg := normalize(f.Value)
		var p pred
		var err error
		switch f.Key {
		case "$eq":
			p, err = r.eqPred(arg, depth)
		case "$ne":
			p, err = r.eqPred(arg, depth)
			p = notIfOK(p)
		case "$gt", "$gte", "$lt", "$lte":
			p, err = r.cmpPred(f.Key, arg, depth)
		case "$in", "$nin":
			p, err = r.inPred(f.Key, arg, depth)
			if f.Key == "$nin" {
				p = notIfOK(p)
			}
		case "$all":
			p, err = r.allPred(arg, depth)
		case "$exists":
			p, err = existsPred(arg)
		case "$type":
			p, err = typePred(arg)
		case "$size":
			p, err = sizePred(arg)
		case "$mod":
			p, err = modPred(arg)
		case "$not":
			sub, ok := arg.(*sources.Doc)
			if !ok || sub.Len() == 0 || !isOperatorDoc(sub) {
				return nil, invalid("$not needs an operator document")
			}
			p, err = r.compileOps(sub, depth+1)
			p = notIfOK(p)
		case "$elemMatch":
			p, err = r.elemMatchPred(arg, depth)
		case "$bitsAllClear", "$bitsAllSet", "$bitsAnyClear", "$bitsAnySet":
			p, err = bitsPred(f.Key, arg)
		case "$geoWithin", "$geoIntersects", "$near", "$nearSphere":
			p, err = geoPred(f.Key, arg, ops)
		case "$maxDistance", "$minDistance":
			if !ops.Has("$near") && !ops.Has("$nearSphere") {
				return nil, invalid("%s without $near or $nearSphere", f.Key)
			}
			continue // read by $near
		default:
			return nil, invalid("unsupported operator %s", f.Key)
		}
		if err != nil {
			return nil, err
		}
		preds = append(preds, p)
	}
	switch len(preds) {
	case 0:
		return func(*fieldValues) bool { return true }, nil
	case 1:
		return preds[0], nil
	}
	return func(fv *fieldValues) bool {
		for _, p := range preds {
			if !p(fv) {
				return false
			}
		}
		return true
	}, nil
}

func notIfOK(p pred) pred {
	if p == nil {
		return nil
	}
	return not(p)
}

func (r rules) cmpPred(op string, arg any, depth int) (pred, error) {
	if err := checkValue(arg, depth); err != nil {
		return nil, err
	}
	want := arg
	if r.eve {
		want = eveConvert(arg)
	}
	if want == nil {
		if op == "$gte" || op == "$lte" {
			return r.eqPred(nil, depth) // null and missing
		}
		return func(*fieldValues) bool { return false }, nil
	}
	bracket := bsonorder.TypeRank(want)
	test := map[string]func(int) bool{
		"$gt":  func(c int) bool { return c > 0 },
		"$gte": func(c int) bool { return c >= 0 },
		"$lt":  func(c int) bool { return c < 0 },
		"$lte": func(c int) bool { return c <= 0 },
	}[op]
	return func(fv *fieldValues) bool {
		return fv.anyExpanded(func(v any) bool {
			return bsonorder.TypeRank(v) == bracket && test(bsonorder.Compare(v, want))
		})
	}, nil
}

// An inSet answers membership (with the Eve rule when eve is set), in
// constant time for strings, ObjectIDs and numbers.
type inSet struct {
	strs    map[string]struct{}
	oids    map[sources.ObjectID]struct{}
	nums    map[float64]struct{}
	dates   []time.Time
	others  []any
	hasNull bool
	eve     bool
}

func newInSet(list []any, eve bool) *inSet {
	s := &inSet{strs: map[string]struct{}{}, oids: map[sources.ObjectID]struct{}{}, nums: map[float64]struct{}{}, eve: eve}
	for _, e := range list {
		switch e := normalize(e).(type) {
		case nil:
			s.hasNull = true
		case string:
			s.strs[e] = struct{}{}
			if !eve {
				continue
			}
			if id, ok := sources.ParseObjectID(e); ok {
				s.oids[id] = struct{}{}
			}
			if t, ok := sources.ParseWhereDate(e); ok {
				s.dates = append(s.dates, t)
			}
		case sources.ObjectID:
			s.oids[e] = struct{}{}
		case time.Time:
			s.dates = append(s.dates, e)
		case int64:
			if e > -1<<53 && e < 1<<53 {
				s.nums[float64(e)] = struct{}{}
			} else {
				s.others = append(s.others, e)
			}
		case float64:
			if !math.IsNaN(e) {
				s.nums[e] = struct{}{}
			} else {
				s.others = append(s.others, e)
			}
		default:
			s.others = append(s.others, e)
		}
	}
	return s
}

func (s *inSet) has(v any) bool {
	switch v := v.(type) {
	case nil:
		return s.hasNull
	case string:
		_, ok := s.strs[v]
		return ok
	case sources.ObjectID:
		_, ok := s.oids[v]
		return ok
	case time.Time:
		for _, t := range s.dates {
			if t.Equal(v) {
				return true
			}
		}
		return false
	case float64:
		if _, ok := s.nums[v]; ok {
			return true
		}
	case int64:
		if v > -1<<53 && v < 1<<53 {
			if _, ok := s.nums[float64(v)]; ok {
				return true
			}
		}
	}
	for _, o := range s.others {
		if looseEqual(v, o, s.eve, 0) {
			return true
		}
	}
	return false
}

func (r rules) inPred(op string, arg any, depth int) (pred, error) {
	list, ok := arg.([]any)
	if !ok {
		return nil, invalid("%s needs an array", op)
	}
	if err := checkValue(arg, depth); err != nil {
		return nil, err
	}
	set := newInSet(list, r.eve)
	return func(fv *fieldValues) bool {
		if set.hasNull && fv.missing {
			return true
		}
		return fv.anyExpanded(set.has)
	}, nil
}

func (r rules) allPred(arg any, depth int) (pred, error) {
	list, ok := arg.([]any)
	if !ok {
		return nil, invalid("$all needs an array")
	}
	if len(list) == 0 {
		return func(*fieldValues) bool { return false }, nil
	}
	preds := make([]pred, len(list))
	for i, e := range list {
		e = normalize(e)
		var err error
		if d, ok := e.(*sources.Doc); ok && d.Len() == 1 && d.Fields()[0].Key == "$elemMatch" {
			preds[i], err = r.elemMatchPred(normalize(d.Fields()[0].Value), depth+1)
		} else {
			preds[i], err = r.eqPred(e, depth+1)
		}
		if err != nil {
			return nil, err
		}
	}
	return func(fv *fieldValues) bool {
		for _, p := range preds {
			if !p(fv) {
				return false
			}
		}
		return true
	}, nil
}

func truthy(arg any) (bool, bool) {
	switch a := arg.(type) {
	case bool:
		return a, true
	case int64:
		return a != 0, true
	case float64:
		return a != 0, true
	}
	return false, false
}

func existsPred(arg any) (pred, error) {
	want, ok := truthy(arg)
	if !ok {
		return nil, invalid("$exists needs a boolean")
	}
	return func(fv *fieldValues) bool { return (len(fv.vals) > 0) == want }, nil
}

// asInt reads an integral number.
func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case float64:
		if v == math.Trunc(v) && v >= -0x1p63 && v < 0x1p63 {
			return int64(v), true
		}
	}
	return 0, false
}

func sizePred(arg any) (pred, error) {
	n, ok := asInt(arg)
	if !ok || n < 0 {
		return nil, invalid("$size needs a non-negative integer")
	}
	return func(fv *fieldValues) bool {
		for _, v := range fv.vals {
			if a, ok := v.([]any); ok && int64(len(a)) == n {
				return true
			}
		}
		return false
	}, nil
}

// typeCode is the BSON type a value would be stored as. Integers are int
// (16) when they fit in 32 bits and long (18) otherwise, as the Python
// driver stores them.
func typeCode(v any) int {
	switch v := v.(type) {
	case nil:
		return 10
	case float64:
		return 1
	case string:
		return 2
	case *sources.Doc:
		return 3
	case []any:
		return 4
	case sources.ObjectID:
		return 7
	case bool:
		return 8
	case time.Time:
		return 9
	case int64:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return 16
		}
		return 18
	}
	return 0
}

func typePred(arg any) (pred, error) {
	list, isList := arg.([]any)
	if !isList {
		list = []any{arg}
	}
	if len(list) == 0 {
		return nil, invalid("$type needs a type")
	}
	want := map[int]bool{}
	for _, e := range list {
		switch e := normalize(e).(type) {
		case string:
			codes, ok := grammar.TypeCodes(e)
			if !ok {
				return nil, invalid("unknown $type %q", e)
			}
			for _, c := range codes {
				want[c] = true
			}
		default:
			n, ok := asInt(e)
			if !ok || !grammar.TypeCode(n) {
				return nil, invalid("unknown $type %v", e)
			}
			want[int(n)] = true
		}
	}
	return func(fv *fieldValues) bool {
		return fv.anyExpanded(func(v any) bool { return want[typeCode(v)] })
	}, nil
}

func modPred(arg any) (pred, error) {
	list, ok := arg.([]any)
	if !ok || len(list) != 2 {
		return nil, invalid("$mod needs [divisor, remainder]")
	}
	var dr [2]int64
	for i, e := range list {
		switch e := normalize(e).(type) {
		case int64:
			dr[i] = e
		case float64:
			if math.IsNaN(e) || math.IsInf(e, 0) || e >= 0x1p63 || e < -0x1p63 {
				return nil, invalid("$mod needs finite numbers")
			}
			dr[i] = int64(e)
		default:
			return nil, invalid("$mod needs numbers")
		}
	}
	if dr[0] == 0 {
		return nil, invalid("$mod by zero")
	}
	return func(fv *fieldValues) bool {
		return fv.anyExpanded(func(v any) bool {
			var n int64
			switch v := v.(type) {
			case int64:
				n = v
			case float64:
				if math.IsNaN(v) || math.IsInf(v, 0) || v >= 0x1p63 || v < -0x1p63 {
					return false
				}
				n = int64(v)
			default:
				return false
			}
			if dr[0] == -1 {
				return dr[1] == 0
			}
			return n%dr[0] == dr[1]
		})
	}, nil
}

func bitsPred(op string, arg any) (pred, error) {
	var positions []int
	switch a := arg.(type) {
	case []any:
		for _, e := range a {
			n, ok := asInt(normalize(e))
			if !ok || n < 0 || n > 1<<20 {
				return nil, invalid("%s positions must be non-negative integers", op)
			}
			positions = append(positions, int(n))
		}
	default:
		mask, ok := asInt(a)
		if !ok || mask < 0 {
			return nil, invalid("%s needs a non-negative integer mask or an array of positions", op)
		}
		for p := range 63 {
			if mask&(1<<p) != 0 {
				positions = append(positions, p)
			}
		}
	}
	wantSet := op == "$bitsAllSet" || op == "$bitsAnySet"
	all := op == "$bitsAllSet" || op == "$bitsAllClear"
	return func(fv *fieldValues) bool {
		return fv.anyExpanded(func(v any) bool {
			n, ok := asInt(v)
			if !ok {
				return false
			}
			for _, p := range positions {
				set := (n>>min(p, 63))&1 == 1
				if all && set != wantSet {
					return false
				}
				if !all && set == wantSet {
					return true
				}
			}
			return all
		})
	}, nil
}

func (r rules) elemMatchPred(arg any, depth int) (pred, error) {
	sub, ok := arg.(*sources.Doc)
	if !ok {
		return nil, invalid("$elemMatch needs a document")
	}
	valueForm := false
	for _, f := range sub.Fields() {
		if strings.HasPrefix(f.Key, "$") && f.Key != "$and" && f.Key != "$or" && f.Key != "$nor" {
			valueForm = true
		}
	}
	var test func(e any) bool
	if valueForm {
		p, err := r.compileOps(sub, depth+1)
		if err != nil {
			return nil, err
		}
		test = func(e any) bool { return p(&fieldValues{vals: []any{e}}) }
	} else {
		m, err := r.compileFilter(sub, depth+1)
		if err != nil {
			return nil, err
		}
		test = func(e any) bool {
			d, ok := e.(*sources.Doc)
			return ok && m(d)
		}
	}
	return func(fv *fieldValues) bool {
		for _, v := range fv.vals {
			if a, ok := v.([]any); ok {
				for _, e := range a {
					if test(normalize(e)) {
						return true
					}
				}
			}
		}
		return false
	}, nil
}
