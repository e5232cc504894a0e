package main

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/test/realserver"
)

// The sample's assignment of the car show's first planning item, which
// covers the car show event.
const (
	derivedAssignment = "6af58e98957184d45484e9b5"
	derivedPlanning   = "urn:newsml:riverton.example:2026-11-12T10:00:57.705948:2d9cf439-699f-462a-942a-4dafff35f810"
	derivedEvent      = "urn:newsml:riverton.example:2026-10-28T11:20:15.394158:9f6d26b2-d4ae-4af5-bb68-eb68bda03923"
)

// setAssignmentState gives the assignment's assigned_to a new state, as
// an editor's save would.
func (d *newsroomDir) setAssignmentState(t *testing.T, id, state string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	found := false
	d.rewrite(t, "assignments", func(doc map[string]json.RawMessage) {
		if !strings.Contains(string(doc["_id"]), `"`+id+`"`) {
			return
		}
		var at map[string]json.RawMessage
		if err := json.Unmarshal(doc["assigned_to"], &at); err != nil {
			t.Fatal(err)
		}
		at["state"], _ = json.Marshal(state)
		doc["assigned_to"], _ = json.Marshal(at)
		found = true
	})
	if !found {
		t.Fatalf("no assignment %s", id)
	}
}

// assignmentStates returns, from a planning or event detail, the state
// its _links give the assignment, and for a planning the state its
// coverages' assigned_to gives it ("" for each it does not give).
func assignmentStates(t *testing.T, body []byte, assignment string) (linked, covered string) {
	t.Helper()
	var doc struct {
		Coverages []struct {
			AssignedTo struct {
				AssignmentID any    `json:"assignment_id"`
				State        string `json:"state"`
			} `json:"assigned_to"`
		} `json:"coverages"`
		Links struct {
			Assignments []struct {
				Href  string `json:"href"`
				State string `json:"state"`
			} `json:"assignments"`
		} `json:"_links"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %.300s", err, body)
	}
	for _, a := range doc.Links.Assignments {
		if a.Href == "assignments/"+assignment {
			linked = a.State
		}
	}
	for _, c := range doc.Coverages {
		if id, _ := c.AssignedTo.AssignmentID.(string); id == assignment {
			covered = c.AssignedTo.State
		}
	}
	return linked, covered
}

// Two replicas on one Redis and one sandbox directory: an assignment's
// state edited, /changes carries the assignment's entry and then those
// of the planning and the event that embed its state, and their detail
// answers, cached before on both replicas, show the new state.
func TestFleetDerivedEntries(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	room := newNewsroomDir(t)
	room.rewrite(t, "assignments", func(map[string]json.RawMessage) {}) // in the form an edit writes
	fleet := startFleet(t, 2, room.dir, rs.URL())
	auth := bearer(t, devSecret, "ASSIGNMENTS_READ", "PLANNING_READ", "EVENTS_READ")
	planning, event := "/prodapi/v1/planning/"+url.PathEscape(derivedPlanning), "/prodapi/v1/events/"+url.PathEscape(derivedEvent)
	for _, in := range fleet {
		for _, path := range []string{planning, event} {
			for range 2 { // the second from the cache
				status, _, body := in.get(t, path, auth)
				if status != 200 {
					t.Fatalf("%s: %d %.300s", path, status, body)
				}
				if linked, _ := assignmentStates(t, body, derivedAssignment); linked != "completed" {
					t.Fatalf("%s: the assignment's state %q before the edit, want completed", path, linked)
				}
			}
		}
	}

	s := follow(t, fleet[0].base, auth, "")
	room.setAssignmentState(t, derivedAssignment, "cancelled")
	var got []string
	want := []string{"update assignments/" + derivedAssignment, "update planning/" + derivedPlanning, "update events/" + derivedEvent}
	s.until(t, "the entries of the assignment, its planning and its event", func(ev change) {
		got = append(got, ev.Op+" "+ev.Resource+"/"+ev.DocID)
	}, func() bool {
		return !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, w) })
	})
	if i, j, k := slices.Index(got, want[0]), slices.Index(got, want[1]), slices.Index(got, want[2]); !(i < j && i < k) {
		t.Errorf("entries %v: the assignment's must come first", got)
	}

	for n, in := range fleet {
		for _, path := range []string{planning, event} {
			var linked, covered string
			eventually(t, "the new state in "+path, func() bool {
				status, _, body := in.get(t, path, auth)
				if status != 200 {
					t.Fatalf("%s: %d %.300s", path, status, body)
				}
				linked, covered = assignmentStates(t, body, derivedAssignment)
				return linked == "cancelled" && (path == event || covered == "cancelled")
			})
			t.Logf("replica %d, %s: _links state %q, coverage state %q", n, path, linked, covered)
		}
	}
}
