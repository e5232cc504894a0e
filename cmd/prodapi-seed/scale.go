package main

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// copiedCollections are the collections a scaled newsroom holds copies
// of: the items and the planning records that link to them or are
// linked from them. The others (desks, users, contacts, content types,
// event files) and the assets stay as they are, and every copy links to
// them.
var copiedCollections = []string{"archive", "planning", "events", "assignments", "events_history"}

// copySpacing is how far back in time each copy moves from the one
// before, give or take its jitter (less than copySpacing, so copies stay
// in order).
const copySpacing = time.Hour

// maxScale bounds -scale: a copy number fits the twelve decimal digits it
// is written with, and a copy's ObjectIds hold it in five bytes.
const maxScale = 1_000_000_000

var (
	uuidPattern  = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	hex24Pattern = regexp.MustCompile(`\b[0-9a-fA-F]{24}\b`)
)

// A scaler makes a newsroom of any number of items out of the one loaded,
// its template. Copy 0 is the template itself; copy k >= 1 is the
// template with, everywhere in its documents:
//
//   - every UUID (in ids, guids, coverage and scheduled-update ids,
//     event_id tags, hrefs) ending in k, in twelve decimal digits, instead
//     of its last twelve hex digits, unless the UUID also appears in a
//     collection that is not copied (it names something all copies
//     share);
//   - every ObjectId that is the _id of a copied document (as a value or
//     as 24 hex digits in a string) made of its first four bytes (its
//     time), k in five bytes, and its rank among those ids in three;
//   - every datetime moved back by k hours and a jitter of whole seconds
//     under an hour drawn from (seed, k);
//   - unique_id moved up by k times the template's range of them, and
//     unique_name ("#<unique_id>") with it; _etag ending in k as a UUID does.
//
// So every link within a copy stays within it, every link to what is not
// copied stays as it is, ids are unique, and the same N and seed give
// the same newsroom. Media are not copied: copies' renditions name the
// template's files.
//
// Every collection of copiedCollections has as many copies as the items
// need, ceil(N / template items); the last copy of the items holds only
// the remainder, chosen among the template's items so that items linking
// to one another (packages and their members, rewrites, embedded
// pictures) are taken or left together.
type scaler struct {
	room   *newsroom
	items  int // N
	copies int
	seed   uint64
	tmpl   map[string][]part        // the copied collections' documents, compiled, in file order
	byID   map[string][]int         // their indexes in ascending _id order
	oids   map[sources.ObjectID]int // rank of each ObjectId _id of a copied document
	keep   map[string]bool          // lower-case UUIDs of the collections not copied
	uuids  map[string]string        // lower-case UUIDs copied, by all but their last twelve digits
	stride int64                    // unique_id distance between copies
	last   []bool                   // the archive templates the last copy holds
	broken bool                     // the last copy leaves out an item one of its items links to
	err    error                    // why a template cannot be copied, the first reason found
}

// A part is a compiled template value: the same in every copy (fixed),
// or made for each copy k >= 1 (make, when not nil).
type part struct {
	fixed any
	make  func(c *copyOf) any
}

func (p part) value(c *copyOf) any {
	if p.make == nil {
		return p.fixed
	}
	return p.make(c)
}

// A copyOf is what sets copy k >= 1 apart.
type copyOf struct {
	k     int
	shift time.Duration // added to every datetime
	mark  string        // k in twelve decimal digits
}

// newScaler compiles room's copied collections for a newsroom of items
// items, and checks that copies will be unique.
func newScaler(room *newsroom, items int, seed uint64) (*scaler, error) {
	per := len(room.colls["archive"])
	if per == 0 {
		return nil, errors.New("seed: -scale: the newsroom has no items (archive.json) to copy")
	}
	if items <= 0 || items > maxScale {
		return nil, fmt.Errorf("seed: -scale must be between 1 and %d", maxScale)
	}
	s := &scaler{room: room, items: items, copies: (items + per - 1) / per, seed: seed,
		tmpl: map[string][]part{}, byID: map[string][]int{}, uuids: map[string]string{}}
	s.keep = keptUUIDs(room)
	s.oids = copiedObjectIDs(room)
	s.stride = uniqueStride(room)
	if err := s.checkObjectIDs(); err != nil {
		return nil, err
	}
	for _, c := range copiedCollections {
		docs, ok := room.colls[c]
		if !ok {
			continue
		}
		parts := make([]part, len(docs))
		for i, d := range docs {
			parts[i] = s.compile(d, "")
			if s.err != nil {
				return nil, fmt.Errorf("seed: -scale: %s: %w", c, s.err)
			}
			id, _ := d.Get("_id")
			if p := s.compile(id, "_id"); p.make == nil {
				return nil, fmt.Errorf("seed: -scale: %s document %v: its _id has no UUID or ObjectId to vary from copy to copy", c, id)
			}
		}
		s.tmpl[c] = parts
		s.byID[c] = idOrder(docs)
	}
	s.last, s.broken = lastCopy(room.colls["archive"], s.itemLinks(), items-(s.copies-1)*per)
	return s, nil
}

// keptUUIDs are the UUIDs of the collections that are not copied.
func keptUUIDs(room *newsroom) map[string]bool {
	keep := map[string]bool{}
	for c, docs := range room.colls {
		if slices.Contains(copiedCollections, c) {
			continue
		}
		for _, d := range docs {
			eachString(d, func(s string) {
				for _, u := range uuidPattern.FindAllString(s, -1) {
					keep[strings.ToLower(u)] = true
				}
			})
		}
	}
	return keep
}

// copiedObjectIDs ranks the ObjectId _ids of copied documents (ObjectIds
// or 24 hex digits), in ascending order.
func copiedObjectIDs(room *newsroom) map[sources.ObjectID]int {
	var ids []sources.ObjectID
	for _, c := range copiedCollections {
		for _, d := range room.colls[c] {
			v, _ := d.Get("_id")
			switch v := v.(type) {
			case sources.ObjectID:
				ids = append(ids, v)
			case string:
				if id, ok := sources.ParseObjectID(v); ok && hex24Pattern.MatchString(v) {
					ids = append(ids, id)
				}
			}
		}
	}
	slices.SortFunc(ids, func(a, b sources.ObjectID) int { return slices.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	ranks := make(map[sources.ObjectID]int, len(ids))
	for i, id := range ids {
		ranks[id] = i
	}
	return ranks
}

// uniqueStride is one more than the range of the copied documents'
// unique_ids, so that copies' ranges do not overlap.
func uniqueStride(room *newsroom) int64 {
	lo, hi, seen := int64(0), int64(0), false
	for _, c := range copiedCollections {
		for _, d := range room.colls[c] {
			eachValue(d, "", func(key string, v any) {
				n, ok := v.(int64)
				if !ok || key != "unique_id" {
					return
				}
				if !seen || n < lo {
					lo = n
				}
				if !seen || n > hi {
					hi = n
				}
				seen = true
			})
		}
	}
	return hi - lo + 1
}

// checkObjectIDs refuses templates holding an ObjectId a copy would make
// (a newsroom scaled before): the copy's id would not be unique.
func (s *scaler) checkObjectIDs() error {
	byRank := make([]sources.ObjectID, len(s.oids))
	for id, r := range s.oids {
		byRank[r] = id
	}
	if len(byRank) >= 1<<24 {
		return fmt.Errorf("seed: -scale: %d ObjectId _ids to copy; at most %d can be", len(byRank), 1<<24-1)
	}
	for _, id := range byRank {
		k := int(id[4])<<32 | int(id[5])<<24 | int(id[6])<<16 | int(id[7])<<8 | int(id[8])
		r := int(id[9])<<16 | int(id[10])<<8 | int(id[11])
		if k >= 1 && k < s.copies && r < len(byRank) && copyOID(byRank[r], r, k) == id {
			return fmt.Errorf("seed: -scale: the _id %s is what copy %d of %s would be: scale the original newsroom instead", id, k, byRank[r])
		}
	}
	return nil
}

// copyOID is copy k's ObjectId for the template id of rank r: its time,
// k, then r.
func copyOID(id sources.ObjectID, r, k int) sources.ObjectID {
	var out sources.ObjectID
	copy(out[:4], id[:4])
	out[4], out[5], out[6], out[7], out[8] = byte(k>>32), byte(k>>24), byte(k>>16), byte(k>>8), byte(k)
	out[9], out[10], out[11] = byte(r>>16), byte(r>>8), byte(r)
	return out
}

// compile turns a template value into a part; key is the field holding
// it ("" in arrays).
func (s *scaler) compile(v any, key string) part {
	switch v := v.(type) {
	case *sources.Doc:
		fields := v.Fields()
		parts := make([]part, len(fields))
		varies := false
		for i, f := range fields {
			parts[i] = s.compile(f.Value, f.Key)
			varies = varies || parts[i].make != nil
		}
		if !varies {
			return part{fixed: v}
		}
		return part{make: func(c *copyOf) any {
			out := make([]sources.Field, len(fields))
			for i, f := range fields {
				out[i] = sources.Field{Key: f.Key, Value: parts[i].value(c)}
			}
			return sources.NewDoc(out...)
		}}
	case []any:
		parts := make([]part, len(v))
		varies := false
		for i, e := range v {
			parts[i] = s.compile(e, "")
			varies = varies || parts[i].make != nil
		}
		if !varies {
			return part{fixed: v}
		}
		return part{make: func(c *copyOf) any {
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p.value(c)
			}
			return out
		}}
	case string:
		return s.compileString(v, key)
	case sources.ObjectID:
		if r, ok := s.oids[v]; ok {
			return part{make: func(c *copyOf) any { return copyOID(v, r, c.k) }}
		}
	case time.Time:
		return part{make: func(c *copyOf) any { return v.Add(c.shift) }}
	case int64:
		if key == "unique_id" {
			return part{make: func(c *copyOf) any { return v + int64(c.k)*s.stride }}
		}
	}
	return part{fixed: v}
}

// An edit replaces str[from:to] in a copy: by the copy's mark, or by the
// copy of an ObjectId of rank r.
type edit struct {
	from, to int
	oid      *sources.ObjectID
	r        int
}

func (s *scaler) compileString(str, key string) part {
	var edits []edit
	for _, m := range uuidPattern.FindAllStringIndex(str, -1) {
		u := strings.ToLower(str[m[0]:m[1]])
		if s.keep[u] {
			continue
		}
		s.noteUUID(u)
		edits = append(edits, edit{from: m[1] - 12, to: m[1]})
	}
	for _, m := range hex24Pattern.FindAllStringIndex(str, -1) {
		id, _ := sources.ParseObjectID(str[m[0]:m[1]])
		if r, ok := s.oids[id]; ok {
			edits = append(edits, edit{from: m[0], to: m[1], oid: &id, r: r})
		}
	}
	switch key {
	case "_etag":
		if len(edits) == 0 && len(str) >= 12 && isHex(str) {
			edits = append(edits, edit{from: len(str) - 12, to: len(str)})
		}
	case "unique_name":
		if n, err := strconv.ParseInt(strings.TrimPrefix(str, "#"), 10, 64); err == nil && strings.HasPrefix(str, "#") {
			return part{make: func(c *copyOf) any { return "#" + strconv.FormatInt(n+int64(c.k)*s.stride, 10) }}
		}
	}
	if len(edits) == 0 {
		return part{fixed: str}
	}
	slices.SortFunc(edits, func(a, b edit) int { return cmp.Compare(a.from, b.from) })
	return part{make: func(c *copyOf) any {
		var b strings.Builder
		b.Grow(len(str))
		at := 0
		for _, e := range edits {
			b.WriteString(str[at:e.from])
			if e.oid != nil {
				b.WriteString(copyOID(*e.oid, e.r, c.k).Hex())
			} else {
				b.WriteString(c.mark)
			}
			at = e.to
		}
		b.WriteString(str[at:])
		return b.String()
	}}
}

// noteUUID records a UUID that copies vary, and refuses two that only
// their last twelve digits tell apart, or one that looks like a copy
// (twelve decimal digits, a copy number this scale makes): copies of
// them would not be unique.
func (s *scaler) noteUUID(u string) {
	prefix := u[:24]
	if other, ok := s.uuids[prefix]; ok && other != u && s.err == nil {
		s.err = fmt.Errorf("the UUIDs %s and %s differ only in their last twelve digits, which copies replace", other, u)
	}
	s.uuids[prefix] = u
	if k, err := strconv.ParseUint(u[24:], 10, 64); err == nil && k >= 1 && k < uint64(s.copies) && s.err == nil {
		s.err = fmt.Errorf("the UUID %s is what copy %d of another would be: scale the original newsroom instead", u, k)
	}
}

func isHex(s string) bool {
	for i := range len(s) {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return false
		}
	}
	return true
}

// copy returns what sets copy k >= 1 apart: its time shift (from seed
// and k alone, so that any prefix of copies is the same whatever N) and
// its mark.
func (s *scaler) copy(k int) *copyOf {
	r := rand.New(rand.NewPCG(s.seed, uint64(k)))
	jitter := time.Duration(r.Int64N(int64(copySpacing/time.Second))) * time.Second
	return &copyOf{k: k, shift: -(time.Duration(k)*copySpacing + jitter), mark: fmt.Sprintf("%012d", k)}
}

// corpus is the scaled newsroom: copies of the copied collections, the
// others and the assets as the template has them.
func (s *scaler) corpus() *corpus {
	out := s.room.corpus()
	for c := range s.tmpl {
		n := len(s.tmpl[c]) * s.copies
		if c == "archive" {
			n = s.items
		}
		out.colls[c] = collection{n: n, docs: func(byID bool) iter.Seq[*sources.Doc] { return s.docs(c, byID) }}
	}
	return out
}

// docs yields collection c copy after copy, each in file order or, with
// byID, in ascending _id order (copies' ids sort as their templates' do
// only where a UUID's last digits do not decide).
func (s *scaler) docs(c string, byID bool) iter.Seq[*sources.Doc] {
	return func(yield func(*sources.Doc) bool) {
		tmpl := s.room.colls[c]
		order := s.byID[c]
		if !byID {
			order = make([]int, len(tmpl))
			for i := range order {
				order[i] = i
			}
		}
		for k := range s.copies {
			var cp *copyOf
			if k > 0 {
				cp = s.copy(k)
			}
			for _, i := range order {
				if c == "archive" && k == s.copies-1 && !s.last[i] {
					continue
				}
				d := tmpl[i]
				if cp != nil {
					d = s.tmpl[c][i].value(cp).(*sources.Doc)
				}
				if !yield(d) {
					return
				}
			}
		}
	}
}

// itemLinks lists, for each archive template, the other archive templates
// it names (by a copied UUID or ObjectId of their _id): package members,
// the packages an item is in, rewrites, embedded pictures.
func (s *scaler) itemLinks() [][]int {
	items := s.room.colls["archive"]
	owner := map[string]int{} // id token (lower-case UUID or ObjectId hex) -> item
	for i, d := range items {
		id, _ := d.Get("_id")
		for _, t := range s.tokens(id) {
			owner[t] = i
		}
	}
	links := make([][]int, len(items))
	for i, d := range items {
		for _, t := range s.tokens(d) {
			if j, ok := owner[t]; ok && j != i && !slices.Contains(links[i], j) {
				links[i] = append(links[i], j)
			}
		}
	}
	return links
}

// tokens are the copied UUIDs (lower-case) and ObjectIds (hex) that v
// holds.
func (s *scaler) tokens(v any) []string {
	var out []string
	eachValue(v, "", func(_ string, v any) {
		switch v := v.(type) {
		case sources.ObjectID:
			if _, ok := s.oids[v]; ok {
				out = append(out, v.Hex())
			}
		case string:
			for _, u := range uuidPattern.FindAllString(v, -1) {
				if u = strings.ToLower(u); !s.keep[u] {
					out = append(out, u)
				}
			}
			for _, h := range hex24Pattern.FindAllString(v, -1) {
				id, _ := sources.ParseObjectID(h)
				if _, ok := s.oids[id]; ok {
					out = append(out, id.Hex())
				}
			}
		}
	})
	return out
}

// lastCopy chooses want of the templates linked by links for the last
// copy: as many items as can be in whole groups of linked items
// (connected components of two or more), then items that link to no
// other, each in template order. When no choice adds up to want, it
// fills up with the first items left, and reports that some of their
// links point outside the copy.
func lastCopy(items []*sources.Doc, links [][]int, want int) (in []bool, broken bool) {
	n := len(items)
	root := make([]int, n)
	for i := range root {
		root[i] = i
	}
	find := func(i int) int {
		for root[i] != i {
			root[i] = root[root[i]]
			i = root[i]
		}
		return i
	}
	for i, js := range links {
		for _, j := range js {
			if a, b := find(i), find(j); a != b {
				root[max(a, b)] = min(a, b)
			}
		}
	}
	members := map[int][]int{}
	for i := range n {
		members[find(i)] = append(members[find(i)], i)
	}
	var groups [][]int // of two items or more, in order of their first item
	var singles []int
	for i := range n {
		switch g := members[i]; {
		case len(g) == 1:
			singles = append(singles, i)
		case len(g) > 1:
			groups = append(groups, g)
		}
	}
	// reach[g][x]: groups g and after can make exactly x items.
	reach := make([][]bool, len(groups)+1)
	reach[len(groups)] = make([]bool, want+1)
	reach[len(groups)][0] = true
	for g := len(groups) - 1; g >= 0; g-- {
		reach[g] = slices.Clone(reach[g+1])
		for x := len(groups[g]); x <= want; x++ {
			reach[g][x] = reach[g][x] || reach[g+1][x-len(groups[g])]
		}
	}
	x := want
	for x > 0 && !reach[0][x] {
		x--
	}
	in = make([]bool, n)
	left := x
	for g, members := range groups {
		if len(members) <= left && reach[g+1][left-len(members)] {
			for _, i := range members {
				in[i] = true
			}
			left -= len(members)
		}
	}
	for _, i := range singles[:min(len(singles), want-x)] {
		in[i] = true
	}
	taken := x + min(len(singles), want-x)
	for i := 0; i < n && taken < want; i++ {
		if !in[i] {
			in[i], broken = true, true
			taken++
		}
	}
	return in, broken
}

// eachValue calls f with every scalar within v and the key holding it
// ("" in arrays).
func eachValue(v any, key string, f func(key string, v any)) {
	switch v := v.(type) {
	case *sources.Doc:
		for k, e := range v.All() {
			eachValue(e, k, f)
		}
	case []any:
		for _, e := range v {
			eachValue(e, "", f)
		}
	default:
		f(key, v)
	}
}

// eachString calls f with every string within v.
func eachString(v any, f func(string)) {
	eachValue(v, "", func(_ string, v any) {
		if s, ok := v.(string); ok {
			f(s)
		}
	})
}
