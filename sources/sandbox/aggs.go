package sandbox

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// Terms aggregations, shaped as ES shapes them.

type aggSpec struct {
	name        string
	field       fieldRef
	size        int
	order       []aggOrder
	minDocCount int
	missing     *bucketKey
	include     keyFilter
	exclude     keyFilter
	sub         []*aggSpec
}

type aggOrder struct {
	byKey bool
	desc  bool
}

// A keyFilter is include or exclude: exact values or a regular expression.
type keyFilter struct {
	set bool
	vs  map[string]bool
	re  *regexp.Regexp
}

func (f keyFilter) matches(k bucketKey) bool {
	if f.re != nil {
		return f.re.MatchString(k.text())
	}
	return f.vs[k.text()]
}

// A bucketKey is a term: a string, or a number (dates as epoch millis,
// booleans as 0/1, both with key_as_string).
type bucketKey struct {
	isStr  bool
	str    string
	num    float64
	isInt  bool
	isDate bool
	isBool bool
}

func (k bucketKey) id() string {
	if k.isStr {
		return "s" + k.str
	}
	return "n" + strconv.FormatFloat(k.num, 'g', -1, 64)
}

// text is key_as_string, or the key as a string.
func (k bucketKey) text() string {
	switch {
	case k.isStr:
		return k.str
	case k.isDate:
		return time.UnixMilli(int64(k.num)).UTC().Format("2006-01-02T15:04:05.000Z")
	case k.isBool:
		return strconv.FormatBool(k.num != 0)
	case k.isInt:
		return strconv.FormatInt(int64(k.num), 10)
	}
	return strconv.FormatFloat(k.num, 'f', -1, 64)
}

func compareBucketKeys(a, b bucketKey) int {
	if a.isStr != b.isStr {
		if a.isStr {
			return 1
		}
		return -1
	}
	if a.isStr {
		return strings.Compare(a.str, b.str)
	}
	return cmp.Compare(a.num, b.num)
}

func (env *searchEnv) compileAggs(v any, depth int) ([]*aggSpec, error) {
	if depth > 10 {
		return nil, invalid("aggregations nested too deeply")
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		return nil, invalid("aggs must be an object")
	}
	var specs []*aggSpec
	for _, f := range d.Fields() {
		body, ok := normalize(f.Value).(*sources.Doc)
		if !ok {
			return nil, invalid("aggregation %q must be an object", f.Key)
		}
		a := &aggSpec{name: f.Key}
		hasTerms := false
		for _, af := range body.Fields() {
			var err error
			switch af.Key {
			case "terms":
				hasTerms = true
				err = env.readTerms(a, normalize(af.Value))
			case "aggs", "aggregations":
				a.sub, err = env.compileAggs(normalize(af.Value), depth+1)
			case "meta":
			default:
				err = invalid("unsupported aggregation %q", af.Key)
			}
			if err != nil {
				return nil, err
			}
		}
		if !hasTerms {
			return nil, invalid("aggregation %q: only terms aggregations are supported", f.Key)
		}
		specs = append(specs, a)
	}
	return specs, nil
}

func (env *searchEnv) readTerms(a *aggSpec, v any) error {
	d, ok := v.(*sources.Doc)
	if !ok {
		return invalid("terms aggregation must be an object")
	}
	a.size, a.minDocCount = 10, 1
	hasField := false
	for _, f := range d.Fields() {
		v := normalize(f.Value)
		switch f.Key {
		case "field":
			name, ok := v.(string)
			if !ok {
				return invalid("terms field must be a string")
			}
			fr, err := newFieldRef(name)
			if err != nil || fr.all || fr.pattern {
				return invalid("bad terms field %q", name)
			}
			a.field, hasField = fr, true
		case "size":
			n, ok := asInt(v)
			if !ok || n < 1 {
				return invalid("terms size must be a positive integer")
			}
			a.size = int(min(n, 1<<30))
		case "min_doc_count":
			n, ok := asInt(v)
			if !ok || n < 0 {
				return invalid("bad min_doc_count")
			}
			a.minDocCount = int(min(n, 1<<30))
		case "order":
			list, isList := v.([]any)
			if !isList {
				list = []any{v}
			}
			for _, e := range list {
				od, ok := normalize(e).(*sources.Doc)
				if !ok {
					return invalid("bad terms order")
				}
				for _, of := range od.Fields() {
					dir, _ := normalize(of.Value).(string)
					o := aggOrder{desc: strings.EqualFold(dir, "desc")}
					if !o.desc && !strings.EqualFold(dir, "asc") {
						return invalid("bad terms order direction %v", of.Value)
					}
					switch of.Key {
					case "_count":
					case "_key", "_term":
						o.byKey = true
					default:
						return invalid("terms order by %q is not supported", of.Key)
					}
					a.order = append(a.order, o)
				}
			}
		case "missing":
			k, ok := env.bucketKeyOf(v, true, false)
			if !ok {
				return invalid("bad terms missing value")
			}
			a.missing = &k
		case "include", "exclude":
			kf, err := readKeyFilter(v)
			if err != nil {
				return err
			}
			if f.Key == "include" {
				a.include = kf
			} else {
				a.exclude = kf
			}
		case "shard_size", "show_term_doc_count_error", "execution_hint", "collect_mode", "value_type", "format", "shard_min_doc_count":
		default:
			return invalid("unsupported terms option %q", f.Key)
		}
	}
	if !hasField {
		return invalid("terms aggregation needs a field")
	}
	if len(a.order) == 0 {
		a.order = []aggOrder{{desc: true}}
	}
	a.order = append(a.order, aggOrder{byKey: true}) // ties by key
	return nil
}

func readKeyFilter(v any) (keyFilter, error) {
	kf := keyFilter{set: true}
	switch x := v.(type) {
	case string:
		re, err := regexp.Compile("^(?:" + x + ")$")
		if err != nil {
			return kf, invalid("bad include/exclude pattern")
		}
		kf.re = re
	case []any:
		kf.vs = map[string]bool{}
		for _, e := range x {
			switch ev := normalize(e).(type) {
			case string:
				kf.vs[ev] = true
			case int64:
				kf.vs[strconv.FormatInt(ev, 10)] = true
			case float64:
				kf.vs[strconv.FormatFloat(ev, 'f', -1, 64)] = true
			case bool:
				kf.vs[strconv.FormatBool(ev)] = true
			default:
				return kf, invalid("bad include/exclude value")
			}
		}
	default:
		return kf, invalid("include/exclude partitions are not supported")
	}
	return kf, nil
}

// bucketKeyOf reads a stored value as a term; strings that are dates are
// date terms unless meant exactly (.keyword).
func (env *searchEnv) bucketKeyOf(v any, kw, html bool) (bucketKey, bool) {
	switch v := v.(type) {
	case string:
		if !kw {
			if a := env.an.analyze(v, html); a.isDate {
				return bucketKey{num: float64(a.date.UnixMilli()), isDate: true}, true
			}
		}
		return bucketKey{isStr: true, str: v}, true
	case sources.ObjectID:
		return bucketKey{isStr: true, str: v.Hex()}, true
	case int64:
		return bucketKey{num: float64(v), isInt: true}, true
	case float64:
		return bucketKey{num: v}, true
	case bool:
		k := bucketKey{isBool: true}
		if v {
			k.num = 1
		}
		return k, true
	case time.Time:
		return bucketKey{num: float64(v.UnixMilli()), isDate: true}, true
	}
	return bucketKey{}, false
}

// docKeys returns the distinct terms of a document's field.
func (c *evalCtx) docKeys(d *sources.Doc, a *aggSpec) []bucketKey {
	var keys []bucketKey
	c.visit(d, &a.field, func(v any, kw, html bool) bool {
		k, ok := c.env.bucketKeyOf(v, kw, html)
		if ok && !slices.ContainsFunc(keys, func(o bucketKey) bool { return o.id() == k.id() }) {
			keys = append(keys, k)
		}
		return false
	})
	if len(keys) == 0 && a.missing != nil {
		keys = []bucketKey{*a.missing}
	}
	return keys
}

type bucket struct {
	key  bucketKey
	docs []*sources.Doc
}

func (c *evalCtx) runAggs(specs []*aggSpec, docs, all []*sources.Doc) (*sources.Doc, error) {
	out := make([]sources.Field, 0, len(specs))
	for _, a := range specs {
		r, err := c.runTerms(a, docs, all)
		if err != nil {
			return nil, err
		}
		out = append(out, sources.Field{Key: a.name, Value: r})
	}
	return sources.NewDoc(out...), nil
}

func (c *evalCtx) runTerms(a *aggSpec, docs, all []*sources.Doc) (*sources.Doc, error) {
	byID := map[string]*bucket{}
	var buckets []*bucket
	add := func(k bucketKey, d *sources.Doc) {
		b, ok := byID[k.id()]
		if !ok {
			b = &bucket{key: k}
			byID[k.id()] = b
			buckets = append(buckets, b)
		}
		if d != nil {
			b.docs = append(b.docs, d)
		}
	}
	for _, d := range docs {
		for _, k := range c.docKeys(d, a) {
			add(k, d)
		}
	}
	if a.minDocCount == 0 {
		for _, d := range all {
			if d == nil {
				continue
			}
			for _, k := range c.docKeys(d, a) {
				add(k, nil)
			}
		}
	}
	buckets = slices.DeleteFunc(buckets, func(b *bucket) bool {
		return len(b.docs) < a.minDocCount ||
			(a.include.set && !a.include.matches(b.key)) ||
			(a.exclude.set && a.exclude.matches(b.key))
	})
	slices.SortStableFunc(buckets, func(x, y *bucket) int {
		for _, o := range a.order {
			var r int
			if o.byKey {
				r = compareBucketKeys(x.key, y.key)
			} else {
				r = cmp.Compare(len(x.docs), len(y.docs))
			}
			if o.desc {
				r = -r
			}
			if r != 0 {
				return r
			}
		}
		return 0
	})
	other := 0
	if len(buckets) > a.size {
		for _, b := range buckets[a.size:] {
			other += len(b.docs)
		}
		buckets = buckets[:a.size]
	}
	list := make([]any, 0, len(buckets))
	for _, b := range buckets {
		fields := []sources.Field{{Key: "key", Value: b.key.value()}}
		if b.key.isDate || b.key.isBool {
			fields = append(fields, sources.Field{Key: "key_as_string", Value: b.key.text()})
		}
		fields = append(fields, sources.Field{Key: "doc_count", Value: int64(len(b.docs))})
		if len(a.sub) > 0 {
			sub, err := c.runAggs(a.sub, b.docs, all)
			if err != nil {
				return nil, err
			}
			fields = append(fields, sub.Fields()...)
		}
		list = append(list, sources.NewDoc(fields...))
	}
	return sources.D(
		"doc_count_error_upper_bound", int64(0),
		"sum_other_doc_count", int64(other),
		"buckets", list,
	), nil
}

// value is the bucket's "key" as ES writes it.
func (k bucketKey) value() any {
	switch {
	case k.isStr:
		return k.str
	case k.isInt || k.isDate || k.isBool:
		return int64(k.num)
	}
	return k.num
}
