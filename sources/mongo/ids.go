package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/prodapi/prodapi/sources"
)

// Where the database has no change streams, the feed's poll finds
// deletions by walking each collection's ids now and then (package feed's
// reconcile): a keyset walk of _id alone, which the _id index serves,
// one page per query.

// idTypes are the _id types a walk reads, in the order MongoDB sorts them
// (and so the index holds them): the ids the API names documents by.
// Other types are not walked: no URL names their documents.
var idTypes = []string{"string", "objectId"}

// idDoc is what a walk reads of a document.
type idDoc struct {
	ID any `bson:"_id"`
}

// IDs returns at most limit ids of collection after cursor (nil: from
// the first), in _id order (the strings, then the ObjectIDs, as
// IDString gives them), and the cursor to go on from; next is nil when
// the walk is done. Each call is one query on the _id index, projected
// to _id; a page may be short, or empty, where one type of id ends.
func (s *Store) IDs(ctx context.Context, collection string, cursor []byte, limit int) (ids []string, next []byte, err error) {
	if limit <= 0 {
		return nil, nil, fmt.Errorf("mongo: ids of %s: limit %d", collection, limit)
	}
	phase, after, err := readIDCursor(cursor)
	if err != nil {
		return nil, nil, fmt.Errorf("mongo: ids of %s: %w", collection, err)
	}
	cond := sources.D("$type", idTypes[phase])
	if after != nil {
		cond.Set("$gt", after)
	}
	fo := options.Find().
		SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 1}}).
		SetLimit(int64(limit)).
		SetBatchSize(int32(min(limit, 1000)))
	var last any
	err = s.each(ctx, "ids", sources.MetricName(collection), collection, sources.D("_id", cond), fo, func(raw bson.Raw) error {
		var d idDoc
		if err := bson.Unmarshal(raw, &d); err != nil {
			return err
		}
		ids = append(ids, idString(d.ID))
		last = d.ID
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	switch {
	case len(ids) == limit:
		return ids, idCursor(phase, last), nil
	case phase+1 < len(idTypes):
		return ids, idCursor(phase+1, nil), nil
	}
	return ids, nil, nil
}

// An id cursor is the phase (an index into idTypes), then the last id
// read of that type, if any: a string's bytes, or an ObjectID's 12.
func idCursor(phase int, last any) []byte {
	b := []byte{byte(phase)}
	switch v := last.(type) {
	case string:
		b = append(b, v...)
	case bson.ObjectID:
		b = append(b, v[:]...)
	}
	return b
}

func readIDCursor(b []byte) (phase int, after any, err error) {
	if len(b) == 0 {
		return 0, nil, nil
	}
	phase = int(b[0])
	if phase >= len(idTypes) {
		return 0, nil, fmt.Errorf("a cursor of phase %d", phase)
	}
	rest := b[1:]
	switch {
	case len(rest) == 0:
		return phase, nil, nil
	case idTypes[phase] == "string":
		return phase, string(rest), nil
	case len(rest) == 12:
		var oid sources.ObjectID
		copy(oid[:], rest)
		return phase, oid, nil
	}
	return 0, nil, fmt.Errorf("a cursor of %d bytes for an ObjectID", len(rest))
}

// Present returns those of ids (as IDString gives them) that collection
// holds: one query of their _id, which a 24-hex id matches as an
// ObjectID or a string.
func (s *Store) Present(ctx context.Context, collection string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	values := make([]any, 0, len(ids))
	for _, id := range ids {
		if oid, ok := sources.ParseObjectID(id); ok {
			values = append(values, oid)
		}
		values = append(values, id)
	}
	fo := options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}})
	found := map[string]bool{}
	err := s.each(ctx, "ids", sources.MetricName(collection), collection, sources.D("_id", sources.D("$in", values)), fo, func(raw bson.Raw) error {
		var d idDoc
		if err := bson.Unmarshal(raw, &d); err != nil {
			return err
		}
		found[idString(d.ID)] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if found[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// EstimatedCount returns the number of documents of collection as its
// metadata says (no scan): what `prodapi check` weighs a walk by.
func (s *Store) EstimatedCount(ctx context.Context, collection string) (_ int64, err error) {
	done := s.queries.Start(Backend, sources.MetricName(collection), "count")
	defer func() { done(sources.FailureKind(err)) }()
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := s.db.Collection(collection).EstimatedDocumentCount(octx)
	if err != nil {
		return 0, wrapErr(ctx, "count", collection, err)
	}
	return n, nil
}
