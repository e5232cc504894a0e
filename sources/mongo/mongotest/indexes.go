package mongotest

import (
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
)

// codeNamespaceNotFound is listIndexes' answer for a collection that does
// not exist.
const codeNamespaceNotFound = 26

// An Index is one index listIndexes reports: its name and key document,
// in order ({"_updated": -1, "_id": 1}; values 1, -1 or a kind such as
// "text" or "2dsphere").
type Index struct {
	Name string
	Key  *sources.Doc
	// Partial, when set, is the index's partialFilterExpression.
	Partial *sources.Doc
}

// AddIndex declares an index on coll, which then exists. Every collection
// that exists also has _id_ on {_id: 1}, as a server makes it.
func (s *Server) AddIndex(coll string, ix Index) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexes[coll] = append(s.indexes[coll], ix)
}

// SetVersion makes buildInfo report version ("6.0.14") and the handshake
// maxWireVersion maxWire, so that the driver sees another server
// generation (it refuses servers older than it speaks).
func (s *Server) SetVersion(version string, maxWire int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.maxWire = version, maxWire
}

func (s *Server) wireVersion() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxWire
}

// versionInfo returns buildInfo's version and its versionArray.
func (s *Server) versionInfo() (string, []int32) {
	s.mu.Lock()
	v := s.version
	s.mu.Unlock()
	array := make([]int32, 4)
	for i, part := range strings.SplitN(v, ".", 4) {
		n, _ := strconv.Atoi(part)
		array[i] = int32(n)
	}
	return v, array
}

// listIndexes answers {listIndexes: coll} with one batch: _id_, then the
// indexes AddIndex declared, or NamespaceNotFound for a collection that
// neither holds documents nor was given an index.
func (s *Server) listIndexes(cmd bsoncore.Document) bsoncore.Document {
	coll, ok := cmd.Lookup("listIndexes").StringValueOK()
	if !ok {
		return commandError(codeTypeMismatch, "TypeMismatch", "listIndexes takes a collection name")
	}
	db, _ := cmd.Lookup("$db").StringValueOK()
	s.mu.Lock()
	_, exists := s.colls[coll]
	declared := append([]Index(nil), s.indexes[coll]...)
	s.mu.Unlock()
	if !exists && len(declared) == 0 {
		return commandError(codeNamespaceNotFound, "NamespaceNotFound", fmt.Sprintf("ns does not exist: %s.%s", db, coll))
	}
	all := append([]Index{{Name: "_id_", Key: sources.D("_id", int32(1))}}, declared...)
	docs := make([]bsoncore.Document, 0, len(all))
	for _, ix := range all {
		spec := sources.D("v", int32(2), "key", ix.Key, "name", ix.Name)
		if ix.Partial != nil {
			spec.Set("partialFilterExpression", ix.Partial)
		}
		raw, err := bsondoc.FromDoc(spec)
		if err != nil {
			return badValue("index %s: %v", ix.Name, err)
		}
		docs = append(docs, raw)
	}
	return s.cursorReply(db+".$cmd.listIndexes."+coll, docs, 0, true, "firstBatch")
}
