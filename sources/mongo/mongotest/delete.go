package mongotest

import (
	"slices"

	"github.com/prodapi/prodapi/sources"
)

// Delete removes the document of coll whose _id is id (as IDString gives
// it) and logs the change, as a write on a replica set would. It reports
// whether there was one.
func (s *Server) Delete(coll, id string) bool {
	s.mu.Lock()
	i := slices.IndexFunc(s.colls[coll], func(r record) bool {
		v, _ := r.doc.Get("_id")
		rid, ok := sources.IDString(v)
		return ok && rid == id
	})
	if i >= 0 {
		s.colls[coll] = slices.Delete(s.colls[coll], i, i+1)
	}
	s.mu.Unlock()
	if i < 0 {
		return false
	}
	s.Change(coll, "delete", id)
	return true
}
