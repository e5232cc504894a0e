package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A convRoom is a sandbox newsroom directory edited as a newsroom's
// editors would: each edit changes one document of one collection and
// writes that collection's file anew, renamed into place. It holds the
// files in memory (one raw document each), so that an edit re-encodes
// only its document, however large the newsroom.
type convRoom struct {
	dir   string
	rng   *rand.Rand
	seed  uint64
	colls map[string]*convColl
	edits []convEdit
	// touched, once set (by once), holds the collection/_id of every
	// document an edit touched; apply then picks only others.
	touched map[string]bool
}

// A convColl is one collection file: its documents, in file order, and
// their _ids.
type convColl struct {
	docs []json.RawMessage
	ids  []string
	oids bool // its _ids are ObjectIds
}

// A convEdit is one edit the room made: the document it changed, as the
// API names it, and the number every edit after it is above. An insert
// or an update writes the number in the document (markerOf reads it); a
// delete removes the document.
type convEdit struct {
	n        int
	resource string
	id       string
	op       string // insert, update or delete
	what     string
}

func (e convEdit) String() string {
	return fmt.Sprintf("#%d %s %s/%s (%s)", e.n, e.op, e.resource, e.id, e.what)
}

// convEdited is the time every edit's _updated counts from: after every
// date of the sample, so that an edited document sorts first.
var convEdited = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// convCollections are the collections the room edits.
var convCollections = []string{"archive", "assignments", "planning", "events", "desks", "users", "contacts"}

// openConvRoom reads the newsroom in dir; seed makes its edits.
func openConvRoom(t testing.TB, dir string, seed uint64) *convRoom {
	t.Helper()
	r := &convRoom{dir: dir, seed: seed, rng: rand.New(rand.NewPCG(seed, 28)), colls: map[string]*convColl{}}
	for _, name := range convCollections {
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		c := &convColl{}
		if err := json.Unmarshal(b, &c.docs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, d := range c.docs {
			id, oid, err := convIDOf(d)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			c.ids = append(c.ids, id)
			c.oids = c.oids || oid
		}
		r.colls[name] = c
	}
	return r
}

// convIDOf reads a stored document's _id: a string, or an ObjectId
// ({"$oid": hex}, which the API names by its hex).
func convIDOf(doc json.RawMessage) (id string, oid bool, err error) {
	var d struct {
		ID json.RawMessage `json:"_id"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return "", false, err
	}
	if json.Unmarshal(d.ID, &id) == nil {
		return id, false, nil
	}
	var o struct {
		OID string `json:"$oid"`
	}
	if err := json.Unmarshal(d.ID, &o); err != nil || o.OID == "" {
		return "", false, fmt.Errorf("an _id that is neither a string nor an ObjectId: %s", d.ID)
	}
	return o.OID, true, nil
}

// convResource is the API's name of a collection's documents.
func convResource(collection string) string {
	if collection == "archive" {
		return "items"
	}
	return collection
}

// write writes a collection's file anew and renames it into place.
func (r *convRoom) write(t testing.TB, name string) {
	t.Helper()
	path := filepath.Join(r.dir, name+".json")
	file, err := os.Create(path + ".tmp")
	if err != nil {
		t.Fatal(err)
	}
	// Each document written as it is, one call each: the newsroom's
	// megabytes are never copied (what costs, under the race detector).
	_, err = file.Write([]byte("["))
	for i, d := range r.colls[name].docs {
		if err == nil && i > 0 {
			_, err = file.Write([]byte(",\n"))
		}
		if err == nil {
			_, err = file.Write(d)
		}
	}
	if err == nil {
		_, err = file.Write([]byte("]\n"))
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// decode and encode a stored document as a map, numbers kept as written.
func convDecode(t testing.TB, doc json.RawMessage) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func convEncode(t testing.TB, m map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mark writes edit n's number in a document, where its resource's detail
// shows it (items and contacts show only the fields of their projection),
// and moves its _updated, as a save does.
func mark(collection string, m map[string]any, n int) {
	switch collection {
	case "archive":
		m["headline"] = "conv edit " + strconv.Itoa(n)
	case "contacts":
		m["notes"] = "conv edit " + strconv.Itoa(n)
	default:
		m["conv_edit"] = n
	}
	m["_updated"] = map[string]any{"$date": convEdited.Add(time.Duration(n) * time.Second).Format(time.RFC3339)}
}

// markerOf reads the number of the last edit written in a document as
// the API served it (-1 when none is).
func markerOf(resource string, doc json.RawMessage) int {
	var d struct {
		Headline string          `json:"headline"`
		Notes    json.RawMessage `json:"notes"`
		Edit     *int            `json:"conv_edit"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return -1
	}
	text := ""
	switch resource {
	case "items":
		text = d.Headline
	case "contacts":
		json.Unmarshal(d.Notes, &text)
	default:
		if d.Edit != nil {
			return *d.Edit
		}
		return -1
	}
	if n, ok := strings.CutPrefix(text, "conv edit "); ok {
		if v, err := strconv.Atoi(n); err == nil {
			return v
		}
	}
	return -1
}

// pick returns the index of a document of a collection, at random.
func (r *convRoom) pick(name string) int { return r.rng.IntN(len(r.colls[name].ids)) }

// idValue is how a document names another by a link field: its _id as
// a string (an ObjectId's hex).
func (r *convRoom) idValue(name string) string {
	c := r.colls[name]
	return c.ids[r.rng.IntN(len(c.ids))]
}

// newID is an _id no document has, of the collection's kind.
func (r *convRoom) newID(name string, n int) (id string, value any) {
	if r.colls[name].oids {
		id = fmt.Sprintf("c0%06x%016x", r.seed&0xffffff, n)
		return id, map[string]any{"$oid": id}
	}
	id = fmt.Sprintf("urn:conv:%s:%d:%d", name, r.seed, n)
	return id, id
}

// A convKind is a kind of edit: its collection, its weight in the draw,
// and what it does to the document at index i (nil for an insert or a
// delete).
type convKind struct {
	coll   string
	op     string
	what   string
	weight int
	change func(r *convRoom, m map[string]any)
}

// convKinds are the edits the room draws from: updates, inserts and
// deletes of every edited collection, and updates that move a link, so
// that what other documents embed moves with them.
var convKinds = []convKind{
	{"archive", "update", "headline", 12, nil},
	{"archive", "insert", "a copy", 6, nil},
	{"archive", "delete", "", 5, nil},
	{"archive", "update", "assignment_id moved", 9, func(r *convRoom, m map[string]any) {
		if r.rng.IntN(5) == 0 {
			m["assignment_id"] = nil
			return
		}
		m["assignment_id"] = r.idValue("assignments")
	}},
	{"assignments", "update", "assigned_to.state", 8, func(r *convRoom, m map[string]any) {
		at, _ := m["assigned_to"].(map[string]any)
		if at == nil {
			at = map[string]any{}
		}
		at["state"] = []string{"assigned", "in_progress", "completed", "cancelled", "submitted"}[r.rng.IntN(5)]
		m["assigned_to"] = at
	}},
	{"assignments", "update", "planning_item moved", 5, func(r *convRoom, m map[string]any) {
		m["planning_item"] = r.idValue("planning")
	}},
	{"assignments", "insert", "a copy", 3, nil},
	{"assignments", "delete", "", 3, nil},
	{"planning", "update", "a field", 5, nil},
	{"planning", "update", "a coverage's assignment moved", 6, func(r *convRoom, m map[string]any) {
		covs, _ := m["coverages"].([]any)
		if len(covs) == 0 {
			return
		}
		c, _ := covs[r.rng.IntN(len(covs))].(map[string]any)
		if c == nil {
			return
		}
		at, _ := c["assigned_to"].(map[string]any)
		if at == nil {
			at = map[string]any{}
		}
		at["assignment_id"] = r.idValue("assignments")
		c["assigned_to"] = at
	}},
	{"planning", "update", "event_item moved", 6, func(r *convRoom, m map[string]any) {
		m["event_item"] = r.idValue("events")
	}},
	{"planning", "insert", "a copy", 3, nil},
	{"planning", "delete", "", 3, nil},
	{"events", "update", "a field", 5, nil},
	{"events", "insert", "a copy", 3, nil},
	{"events", "delete", "", 3, nil},
	{"desks", "update", "a field", 3, nil},
	{"desks", "insert", "a copy", 1, nil},
	{"desks", "delete", "", 1, nil},
	{"users", "update", "a field", 3, nil},
	{"users", "insert", "a copy", 1, nil},
	{"users", "delete", "", 1, nil},
	{"contacts", "update", "a field", 3, nil},
	{"contacts", "insert", "a copy", 1, nil},
	{"contacts", "delete", "", 1, nil},
}

// edit makes the next edit, drawn at random, and returns it.
func (r *convRoom) edit(t testing.TB) convEdit {
	t.Helper()
	total := 0
	for _, k := range convKinds {
		total += k.weight
	}
	w := r.rng.IntN(total)
	var k convKind
	for _, k = range convKinds {
		if w < k.weight {
			break
		}
		w -= k.weight
	}
	c := r.colls[k.coll]
	if k.op == "delete" && len(c.ids) <= 2 {
		k = convKind{coll: k.coll, op: "update", what: "a field"} // a collection keeps two documents
	}
	return r.apply(t, k)
}

// set is edit with a kind of the caller's choosing: an update of a
// field of one document (the test's last edit, whose entry says the log
// is past every other).
func (r *convRoom) set(t testing.TB, coll string) convEdit {
	t.Helper()
	return r.apply(t, convKind{coll: coll, op: "update", what: "a field"})
}

// once makes an edit of op (insert, update or delete) to a document of
// one of colls, at random, that no edit touched before: each document
// then gets one entry of this room's making, never one of an earlier
// edit. colls must hold documents no link points at, nor any whose
// changes another document embeds, for that to hold of derived entries
// too (items, desks, users, contacts: an item's change derives entries
// of its assignment, planning and events, never of another item).
func (r *convRoom) once(t testing.TB, op string, colls []string) convEdit {
	t.Helper()
	if r.touched == nil {
		r.touched = map[string]bool{}
	}
	var choices []convKind
	for _, coll := range colls {
		c := r.colls[coll]
		untouched := slices.ContainsFunc(c.ids, func(id string) bool { return !r.touched[coll+"/"+id] })
		if op == "insert" || (untouched && (op == "update" || len(c.ids) > 2)) {
			choices = append(choices, convKind{coll: coll, op: op, what: "once"})
		}
	}
	if len(choices) == 0 {
		t.Fatalf("no document of %v left to %s", colls, op)
	}
	k := choices[r.rng.IntN(len(choices))]
	return r.apply(t, k)
}

// apply makes one edit of kind k.
func (r *convRoom) apply(t testing.TB, k convKind) convEdit {
	t.Helper()
	c := r.colls[k.coll]
	n := len(r.edits) + 1
	e := convEdit{n: n, resource: convResource(k.coll), op: k.op, what: k.what}
	i := r.pick(k.coll)
	if r.touched != nil && k.op != "insert" {
		for r.touched[k.coll+"/"+c.ids[i]] {
			i = r.pick(k.coll)
		}
	}
	switch k.op {
	case "delete":
		e.id = c.ids[i]
		c.docs, c.ids = slices.Delete(c.docs, i, i+1), slices.Delete(c.ids, i, i+1)
	case "insert":
		m := convDecode(t, c.docs[i])
		id, value := r.newID(k.coll, n)
		m["_id"] = value
		if _, ok := m["guid"]; ok {
			m["guid"] = id
		}
		mark(k.coll, m, n)
		e.id = id
		c.docs, c.ids = append(c.docs, convEncode(t, m)), append(c.ids, id)
	default:
		m := convDecode(t, c.docs[i])
		if k.change != nil {
			k.change(r, m)
		}
		mark(k.coll, m, n)
		e.id = c.ids[i]
		c.docs[i] = convEncode(t, m)
	}
	r.write(t, k.coll)
	r.edits = append(r.edits, e)
	if r.touched != nil {
		r.touched[k.coll+"/"+e.id] = true
	}
	return e
}
