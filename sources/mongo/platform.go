package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/sources"
)

// What the platform's MongoDB is and offers, for `prodapi check`: read
// commands only (buildInfo, listIndexes, a change stream opened and
// closed), never a write.

// A Server is what the database server says of itself.
type Server struct {
	// Version is MongoDB's version, or the one FerretDB answers as.
	Version string
	// FerretDB is FerretDB's own version when the server is FerretDB.
	FerretDB string
}

// Tested versions: the adapter is tested against MongoDB 4.4 to 7 (the
// driver speaks nothing older than 4.4 and refuses such a server).
const (
	minTestedMajor, minTestedMinor = 4, 4
	maxTestedMajor                 = 7
)

// Tested reports whether the adapter is tested against this version of
// MongoDB; a version outside 4.4 to 7.x may still work (newer) or is
// refused by the driver before it gets here (older).
func Tested(version string) bool {
	major, minor, ok := sources.MajorMinor(version)
	if !ok {
		return false
	}
	return (major > minTestedMajor || major == minTestedMajor && minor >= minTestedMinor) && major <= maxTestedMajor
}

// BuildInfo asks the server what it is (buildInfo). A server the driver
// refuses (older than MongoDB 4.4) fails here, as every operation would:
// ErrUnavailable, with the driver's reason in the error's Detail.
func (s *Store) BuildInfo(ctx context.Context) (Server, error) {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var info struct {
		Version  string `bson:"version"`
		FerretDB string `bson:"ferretdbVersion"`
	}
	err := s.db.Client().Database("admin").RunCommand(octx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info)
	if err != nil {
		return Server{}, wrapErr(ctx, "buildInfo", "admin", err)
	}
	return Server{Version: info.Version, FerretDB: info.FerretDB}, nil
}

// ChangeStreams opens a change stream on the database and closes it at
// once, to learn whether the server serves them (a replica set does; a
// standalone server and FerretDB v1 do not). It returns nil, an error
// wrapping ErrNoChangeStreams, or the failure of reaching the server.
func (s *Store) ChangeStreams(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cs, err := s.db.Watch(octx, mongodriver.Pipeline{})
	if err != nil {
		var se mongodriver.ServerError
		if errors.As(err, &se) && se.HasErrorCode(codeFailedToParse) {
			// FerretDB v1 cannot parse a database-wide aggregate: the
			// plainest change stream, without a token, so no stream.
			return fmt.Errorf("%w: %v", ErrNoChangeStreams, err)
		}
		if err := classifyStream(err); errors.Is(err, ErrNoChangeStreams) {
			return err
		}
		return wrapErr(ctx, "watch", s.db.Name(), err)
	}
	return cs.Close(octx)
}

// codeFailedToParse: a command the server cannot read.
const codeFailedToParse = 9

// An Index is one index of a collection, its keys in order.
type Index struct {
	Name string
	Keys []IndexKey
	// Partial indexes hold only some documents: they serve no query of
	// ours for sure, and are not counted as serving one.
	Partial bool
}

// An IndexKey is one key of an index: a field and its order (1 or -1),
// or Kind for the other key types ("hashed", "text", "2dsphere", "2d").
type IndexKey struct {
	Field string
	Order int
	Kind  string
}

// Indexes lists the indexes of collection (listIndexes). A collection
// that does not exist has none, and exists reports false.
func (s *Store) Indexes(ctx context.Context, collection string) (indexes []Index, exists bool, err error) {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// The command itself: the driver's index view reads a collection
	// that does not exist as one without indexes.
	cur, err := s.db.RunCommandCursor(octx, bson.D{{Key: "listIndexes", Value: collection}})
	if err != nil {
		var se mongodriver.ServerError
		if errors.As(err, &se) && se.HasErrorCode(codeNamespaceNotFound) {
			return nil, false, nil
		}
		return nil, false, wrapErr(ctx, "listIndexes", collection, err)
	}
	defer cur.Close(octx)
	for cur.Next(octx) {
		var spec struct {
			Name    string   `bson:"name"`
			Key     bson.Raw `bson:"key"`
			Partial bson.Raw `bson:"partialFilterExpression"`
		}
		if err := cur.Decode(&spec); err != nil {
			return nil, true, fmt.Errorf("mongo: listIndexes %s: %w", collection, err)
		}
		ix := Index{Name: spec.Name, Partial: spec.Partial != nil}
		elems, err := spec.Key.Elements()
		if err != nil {
			return nil, true, fmt.Errorf("mongo: listIndexes %s: %w", collection, err)
		}
		for _, e := range elems {
			ix.Keys = append(ix.Keys, indexKey(e.Key(), e.Value()))
		}
		indexes = append(indexes, ix)
	}
	if err := cur.Err(); err != nil {
		return nil, true, wrapErr(ctx, "listIndexes", collection, err)
	}
	return indexes, true, nil
}

// codeNamespaceNotFound: listIndexes on a collection that does not exist.
const codeNamespaceNotFound = 26

// indexKey reads one key of an index's key document: a number's sign is
// its order (1, -1; servers also store 1.0 or 1 as a long), a string its
// kind.
func indexKey(field string, v bson.RawValue) IndexKey {
	if s, ok := v.StringValueOK(); ok {
		return IndexKey{Field: field, Kind: s}
	}
	var n float64
	switch {
	case v.Type == bson.TypeInt32:
		n = float64(v.Int32())
	case v.Type == bson.TypeInt64:
		n = float64(v.Int64())
	case v.Type == bson.TypeDouble:
		n = v.Double()
	}
	if n < 0 {
		return IndexKey{Field: field, Order: -1}
	}
	return IndexKey{Field: field, Order: 1}
}

// A Need is the shape of a query the adapter sends, in index terms: its
// equality (or $in) fields, then the sort it asks the server for.
type Need struct {
	Collection string
	Equal      []string
	Sort       []sources.SortKey
}

// ListNeed is the query of a list of res (Find) filtered by equality on
// the fields given, in res's default sort: the sort Find sends, the
// default keys then _id. A cursor walk's page is the same query with
// ranges on those keys (walk.go), which the same index bounds.
func ListNeed(res *sources.Resource, equal ...string) Need {
	return Need{Collection: res.Collection, Equal: equal, Sort: stableSort(res.DefaultSort)}
}

// LookupNeed is the query of an enrichment lookup (Lookup): l.Field
// among the page's values. Its sort is left out: it orders the few
// documents that match, which needs no index.
func LookupNeed(l sources.Lookup) Need {
	return Need{Collection: l.Collection, Equal: []string{l.Field}}
}

// PollNeed is the query of the change feed's poll of collection (Poll),
// where the database has no change streams: _updated from a watermark on,
// in its order. An index that leads with _updated, either way, serves it;
// the few documents written since the watermark are then put in _id
// order in memory.
func PollNeed(collection string) Need {
	return Need{Collection: collection, Sort: []sources.SortKey{{Field: "_updated"}}}
}

// ChunksNeed is the query of a GridFS read (Asset): the chunks of one
// file from the one at an offset on, in order.
func ChunksNeed() Need {
	return Need{Collection: chunksColl, Equal: []string{"files_id"}, Sort: []sources.SortKey{{Field: "n"}}}
}

// stableSort is keys then _id ascending, unless a key names _id: the
// order Find and Lookup send, so that equal keys never shuffle pages.
func stableSort(keys []sources.SortKey) []sources.SortKey {
	out := slices.Clone(keys)
	if !slices.ContainsFunc(keys, func(k sources.SortKey) bool { return k.Field == "_id" }) {
		out = append(out, sources.SortKey{Field: "_id"})
	}
	return out
}

// Keys are the keys of the index that serves n best: the equality fields,
// then the sort's, in order (MongoDB's equality, sort, range rule).
func (n Need) Keys() []IndexKey {
	var keys []IndexKey
	for _, f := range n.Equal {
		keys = append(keys, IndexKey{Field: f, Order: 1})
	}
	for _, k := range n.Sort {
		if !slices.Contains(n.Equal, k.Field) {
			keys = append(keys, IndexKey{Field: k.Field, Order: order(k.Desc)})
		}
	}
	return keys
}

func order(desc bool) int {
	if desc {
		return -1
	}
	return 1
}

// ServedBy returns the first index that serves n: one whose keys start
// with n's equality fields (in any order, any direction, hashed too), and
// go on with its sort keys as n asks them or all reversed. Partial
// indexes are not counted.
func (n Need) ServedBy(indexes []Index) (Index, bool) {
	for _, ix := range indexes {
		if !ix.Partial && n.servedBy(ix.Keys) {
			return ix, true
		}
	}
	return Index{}, false
}

func (n Need) servedBy(keys []IndexKey) bool {
	if len(keys) < len(n.Equal) {
		return false
	}
	for _, k := range keys[:len(n.Equal)] {
		if !slices.Contains(n.Equal, k.Field) || (k.Order == 0 && k.Kind != "hashed") {
			return false
		}
	}
	var sort []sources.SortKey
	for _, k := range n.Sort {
		if !slices.Contains(n.Equal, k.Field) { // an equality field is constant: its order is moot
			sort = append(sort, k)
		}
	}
	rest := keys[len(n.Equal):]
	if len(rest) < len(sort) {
		return false
	}
	forward, backward := true, true
	for i, k := range sort {
		if rest[i].Field != k.Field || rest[i].Order == 0 {
			return false
		}
		forward = forward && rest[i].Order == order(k.Desc)
		backward = backward && rest[i].Order == -order(k.Desc)
	}
	return forward || backward
}

// CreateIndex is the mongosh command that creates the index n needs (in
// the database `use <db>` selected): db.<collection>.createIndex({...}).
func (n Need) CreateIndex() string {
	var b strings.Builder
	b.WriteString("db.getCollection(" + strconv.Quote(n.Collection) + ").createIndex({")
	for i, k := range n.Keys() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(k.Field) + ": " + strconv.Itoa(k.Order))
	}
	b.WriteString("})")
	return b.String()
}

// String describes n: "events_history where operation, by _updated desc, _id".
func (n Need) String() string {
	s := n.Collection
	if len(n.Equal) > 0 {
		s += " by " + strings.Join(n.Equal, ", ")
	}
	if len(n.Sort) > 0 {
		var keys []string
		for _, k := range n.Sort {
			if k.Desc {
				keys = append(keys, k.Field+" desc")
			} else {
				keys = append(keys, k.Field)
			}
		}
		s += " sorted on " + strings.Join(keys, ", ")
	}
	return s
}
