package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/prodapi/prodapi/sources"
)

// Where the database has no change streams (a standalone server,
// FerretDB), the fleet's change feed polls each collection for what was
// written since its watermark (package feed). _updated is Superdesk's
// time of a document's last write, at one-second resolution; _etag
// changes with every write.

// stampDoc is what a poll reads of a document.
type stampDoc struct {
	ID      any       `bson:"_id"`
	Updated time.Time `bson:"_updated"`
	Etag    any       `bson:"_etag"`
}

// Poll returns the documents of collection whose _updated is at or after
// since, in order of _updated then _id, at most limit of them: their ids,
// _updated and _etag (a Stamp's Version; "" when a document has none),
// never the documents. Without an index on _updated the server reads the
// whole collection to answer.
func (s *Store) Poll(ctx context.Context, collection string, since time.Time, limit int) ([]sources.Stamp, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("mongo: poll %s: limit %d", collection, limit)
	}
	fo := options.Find().
		SetSort(bson.D{{Key: "_updated", Value: 1}, {Key: "_id", Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "_updated", Value: 1}, {Key: "_etag", Value: 1}}).
		SetLimit(int64(limit)).
		SetBatchSize(int32(min(limit, 1000)))
	filter := sources.D("_updated", sources.D("$gte", since.UTC()))
	var out []sources.Stamp
	err := s.each(ctx, "poll", sources.MetricName(collection), collection, filter, fo, func(raw bson.Raw) error {
		var d stampDoc
		if err := bson.Unmarshal(raw, &d); err != nil {
			return err
		}
		st := sources.Stamp{ID: idString(d.ID), Updated: d.Updated.UTC()}
		if e, ok := d.Etag.(string); ok {
			st.Version = e
		}
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Latest returns the newest _updated of collection: where a poll starts
// when there is no watermark yet. It is zero when no document has one.
func (s *Store) Latest(ctx context.Context, collection string) (time.Time, error) {
	fo := options.Find().
		SetSort(bson.D{{Key: "_updated", Value: -1}}).
		SetProjection(bson.D{{Key: "_updated", Value: 1}}).
		SetLimit(1)
	filter := sources.D("_updated", sources.D("$type", "date"))
	var latest time.Time
	err := s.each(ctx, "poll", sources.MetricName(collection), collection, filter, fo, func(raw bson.Raw) error {
		var d stampDoc
		if err := bson.Unmarshal(raw, &d); err != nil {
			return err
		}
		latest = d.Updated.UTC()
		return nil
	})
	return latest, err
}
