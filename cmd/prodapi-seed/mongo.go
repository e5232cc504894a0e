package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
)

// GridFS as pymongo wrote it for Superdesk: bucket "fs", 255 KiB chunks.
const (
	filesColl   = "fs.files"
	chunksColl  = "fs.chunks"
	gridFSChunk = 255 * 1024
)

func seedMongo(ctx context.Context, cfg config.Config, room *corpus, w waiter, l loader) error {
	uri := string(cfg.MongoURI)
	// Options in the URI win, as they do for prodapi.
	client, err := mongo.Connect(options.Client().SetAppName("prodapi-seed").
		SetServerSelectionTimeout(5 * time.Second).SetConnectTimeout(5 * time.Second).ApplyURI(uri))
	if err != nil {
		return fmt.Errorf("seed: mongo: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		client.Disconnect(dctx)
	}()
	// Writes need a primary: with a replica set just initiated, the
	// server answers before it has elected one.
	err = w.until(ctx, "mongo", func(ctx context.Context) error { return client.Ping(ctx, readpref.Primary()) })
	if err != nil {
		return err
	}
	db := client.Database(mongosrc.DatabaseName(uri))

	for _, c := range sources.Collections {
		coll, ok := room.colls[c]
		if err := l.drop(ctx, db.Collection(c)); err != nil {
			return fmt.Errorf("seed: mongo: %s: %w", c, err)
		}
		if !ok {
			continue
		}
		p := l.progress("mongo: inserting", coll.n, "database", db.Name(), "collection", c)
		err := batches(ctx, coll.docs(false), l.lim, l.parallel, appendBSON, func(ctx context.Context, b batch) error {
			if err := l.insert(ctx, db.Collection(c), b); err != nil {
				return err
			}
			p.add(b.len())
			return nil
		})
		if err != nil {
			return fmt.Errorf("seed: mongo: %s: %w", c, err)
		}
		p.end("mongo: collection loaded")
	}

	var files, chunks []any
	for _, a := range room.assets {
		f, cs := gridFSFile(a)
		files = append(files, f)
		chunks = append(chunks, cs...)
	}
	for _, bucket := range []struct {
		name string
		docs []any
	}{{filesColl, files}, {chunksColl, chunks}} {
		name, docs := bucket.name, bucket.docs
		if err := l.drop(ctx, db.Collection(name)); err != nil {
			return fmt.Errorf("seed: mongo: %s: %w", name, err)
		}
		// GridFS chunks are up to 255 KiB each: batches of a few.
		for len(docs) > 0 {
			n := min(len(docs), 16)
			if err := l.within(ctx, func(ctx context.Context) error { _, err := db.Collection(name).InsertMany(ctx, docs[:n]); return err }); err != nil {
				return fmt.Errorf("seed: mongo: %s: insert: %w", name, err)
			}
			docs = docs[n:]
		}
	}
	// The indexes a driver creates on a bucket's first upload.
	err = l.within(ctx, func(ctx context.Context) error {
		_, err := db.Collection(filesColl).Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: "filename", Value: 1}, {Key: "uploadDate", Value: 1}}})
		return err
	})
	if err != nil {
		return fmt.Errorf("seed: mongo: %s index: %w", filesColl, err)
	}
	err = l.within(ctx, func(ctx context.Context) error {
		_, err := db.Collection(chunksColl).Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: "files_id", Value: 1}, {Key: "n", Value: 1}}, Options: options.Index().SetUnique(true)})
		return err
	})
	if err != nil {
		return fmt.Errorf("seed: mongo: %s index: %w", chunksColl, err)
	}
	l.logger.Info("mongo: GridFS loaded", "database", db.Name(), "bucket", "fs", "files", len(files), "chunks", len(chunks))
	return nil
}

// drop drops coll; a missing collection is fine.
func (l loader) drop(ctx context.Context, coll *mongo.Collection) error {
	if err := l.within(ctx, func(ctx context.Context) error { return coll.Drop(ctx) }); err != nil {
		return fmt.Errorf("drop: %w", err)
	}
	return nil
}

// insert inserts a batch of BSON documents, unordered: the server may
// write them in any order (as it writes the batches sent at once), and
// one refused does not stop the others, though it fails the batch.
func (l loader) insert(ctx context.Context, coll *mongo.Collection, b batch) error {
	docs := make([]bson.Raw, b.len())
	for i := range docs {
		docs[i] = b.item(i)
	}
	unordered := options.InsertMany().SetOrdered(false)
	if err := l.within(ctx, func(ctx context.Context) error { _, err := coll.InsertMany(ctx, docs, unordered); return err }); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}

// appendBSON appends d as BSON, converted as bsonValue does.
func appendBSON(dst []byte, d *sources.Doc) ([]byte, error) {
	v, err := bsonValue(d)
	if err != nil {
		id, _ := d.Get("_id")
		return dst, fmt.Errorf("document %v: %w", id, err)
	}
	b, err := bson.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// bsonValue converts a document value to the BSON the sandbox's reading
// of it implies: ObjectIDs as ObjectIds, datetimes as BSON dates
// (millisecond precision, as MongoDB keeps them), integers as int32 when
// they fit (what pymongo writes for Superdesk; the sandbox's $type rule
// says the same) and int64 otherwise, documents in field order.
func bsonValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, string, float64:
		return v, nil
	case int64:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return int32(v), nil
		}
		return v, nil
	case time.Time:
		return bson.NewDateTimeFromTime(v), nil
	case sources.ObjectID:
		return bson.ObjectID(v), nil
	case []any:
		a := make(bson.A, len(v))
		for i, e := range v {
			c, err := bsonValue(e)
			if err != nil {
				return nil, err
			}
			a[i] = c
		}
		return a, nil
	case *sources.Doc:
		d := make(bson.D, 0, v.Len())
		for k, e := range v.All() {
			c, err := bsonValue(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			d = append(d, bson.E{Key: k, Value: c})
		}
		return d, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

// gridFSID is the _id of an asset's GridFS file: the media id less its
// last extension (prodapi's GridFS lookup ignores it, as Superdesk's
// did), as an ObjectId when that is 24 hex digits and as a string
// otherwise.
func gridFSID(name string) any {
	id := mongosrc.FileID(name)
	if oid, ok := id.(sources.ObjectID); ok {
		return bson.ObjectID(oid)
	}
	return id
}

// gridFSFile is an asset's fs.files document and its fs.chunks documents.
// Chunk ids derive from the file id and chunk number, so that seeding
// twice writes the same documents.
func gridFSFile(a asset) (file bson.D, chunks []any) {
	id := gridFSID(a.name)
	file = bson.D{
		{Key: "_id", Value: id},
		{Key: "filename", Value: a.baseName()},
		{Key: "contentType", Value: a.contentType},
		{Key: "md5", Value: a.md5},
		{Key: "chunkSize", Value: int32(gridFSChunk)},
		{Key: "length", Value: int64(len(a.data))},
		{Key: "uploadDate", Value: bson.NewDateTimeFromTime(a.modified)},
	}
	for n, off := 0, 0; off < len(a.data); n, off = n+1, off+gridFSChunk {
		end := min(off+gridFSChunk, len(a.data))
		chunks = append(chunks, bson.D{
			{Key: "_id", Value: chunkID(id, n)},
			{Key: "files_id", Value: id},
			{Key: "n", Value: int32(n)},
			{Key: "data", Value: bson.Binary{Subtype: bson.TypeBinaryGeneric, Data: a.data[off:end]}},
		})
	}
	return file, chunks
}

func chunkID(fileID any, n int) bson.ObjectID {
	sum := sha256.Sum256(fmt.Appendf(nil, "%v#%d", fileID, n))
	var id bson.ObjectID
	copy(id[:], sum[:])
	return id
}
