package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/prodapi/prodapi/sources"
)

// Errors Watch returns.
var (
	// ErrNoChangeStreams: the server cannot serve change streams (a
	// standalone server, FerretDB v1). Nothing to retry.
	ErrNoChangeStreams = errors.New("mongo: the server has no change streams (it is not a replica set)")
	// ErrHistoryLost: the resume token is older than the server's oplog;
	// what happened since is unknown. Start again without a token.
	ErrHistoryLost = errors.New("mongo: the change stream cannot resume: its history is lost")
)

// Server error codes that mean "no change streams here" or "history lost".
var (
	noStreamCodes = map[int32]bool{
		40573: true, // $changeStream only on replica sets
		59:    true, // CommandNotFound
		40324: true, // Unrecognized pipeline stage (FerretDB v1)
		115:   true, // CommandNotSupported
		// FailedToParse: FerretDB v1 reads a database's aggregate
		// ({aggregate: 1}), which MongoDB has taken since 4.0, as a
		// malformed command.
		9: true,
	}
	historyLostCodes = map[int32]bool{
		286: true, // ChangeStreamHistoryLost
		280: true, // ChangeStreamFatalError
		136: true, // CappedPositionLost
	}
)

// Watch follows the database's change stream for collections, from after
// token (nil: from now), and calls emit with each event's change and the
// resume token after it, which the caller keeps to resume; the change's
// Version names the event (a hash of its token). Started without a token,
// it first emits the zero Change with the token of the stream's start, so
// that a caller that keeps it resumes from there, not from a later "now",
// when the first event could not be handled. It asks for ids, operation
// types and cluster times only, never the documents. It returns when ctx
// ends (ctx's error), when emit fails (its error), or when the stream
// fails: ErrNoChangeStreams, ErrHistoryLost, or another error the caller
// may retry after a pause (the driver has already resumed once on its
// own).
func (s *Store) Watch(ctx context.Context, collections []string, token []byte, emit func(sources.Change, []byte) error) error {
	pipeline := mongodriver.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "ns.coll", Value: bson.D{{Key: "$in", Value: collections}}}}}},
		{{Key: "$project", Value: bson.D{
			{Key: "operationType", Value: 1}, {Key: "ns", Value: 1}, {Key: "documentKey", Value: 1}, {Key: "clusterTime", Value: 1},
		}}},
	}
	opts := options.ChangeStream().SetMaxAwaitTime(time.Second)
	if token != nil {
		opts.SetResumeAfter(bson.Raw(token))
	}
	cs, err := s.db.Watch(ctx, pipeline, opts)
	if err != nil {
		return classifyStream(err)
	}
	defer cs.Close(context.WithoutCancel(ctx))
	if token == nil {
		// The stream's start (the open's postBatchResumeToken): an event
		// that fails before any is kept would otherwise be lost to a
		// restart that opens "from now" again.
		if start := cs.ResumeToken(); len(start) > 0 {
			if err := emit(sources.Change{}, []byte(start)); err != nil {
				return err
			}
		}
	}
	for cs.Next(ctx) {
		var ev struct {
			Op          string         `bson:"operationType"`
			ClusterTime bson.Timestamp `bson:"clusterTime"`
			NS          struct {
				Coll string `bson:"coll"`
			} `bson:"ns"`
			Key struct {
				ID any `bson:"_id"`
			} `bson:"documentKey"`
		}
		if err := cs.Decode(&ev); err != nil {
			return fmt.Errorf("mongo: decoding a change event: %w", err)
		}
		ch := sources.Change{Collection: ev.NS.Coll, Op: ev.Op}
		if ev.ClusterTime.T != 0 {
			ch.At = time.Unix(int64(ev.ClusterTime.T), 0)
		}
		switch ev.Op {
		case "insert", "update", "replace", "delete":
			ch.ID = idString(ev.Key.ID)
		default: // drop, rename, dropDatabase, invalidate: anything may have changed
			ch.Op = sources.OpFlush
		}
		tok := []byte(cs.ResumeToken())
		ch.Version = sources.VersionOf(tok) // the event's id: a watcher resuming after a takeover reports the same versions
		if err := emit(ch, tok); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return classifyStream(cs.Err())
}

func idString(v any) string {
	switch v := v.(type) {
	case bson.ObjectID:
		return v.Hex()
	case string:
		return v
	}
	return fmt.Sprint(v)
}

func classifyStream(err error) error {
	if err == nil {
		return nil
	}
	var se mongodriver.ServerError
	if errors.As(err, &se) {
		for code := range noStreamCodes {
			if se.HasErrorCode(int(code)) {
				return fmt.Errorf("%w: %v", ErrNoChangeStreams, err)
			}
		}
		for code := range historyLostCodes {
			if se.HasErrorCode(int(code)) {
				return fmt.Errorf("%w: %v", ErrHistoryLost, err)
			}
		}
	}
	return fmt.Errorf("mongo: change stream: %w", err)
}
