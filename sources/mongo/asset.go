package mongo

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The GridFS bucket media live in: pymongo's default, as Superdesk used it.
const (
	filesColl  = "fs.files"
	chunksColl = "fs.chunks"
	// assetLabel is the resource label of asset queries.
	assetLabel = "assets"
	// chunkBatch is how many chunks one round trip fetches: about 1 MiB
	// with the default 255 KiB chunks, so a stream holds little memory.
	chunkBatch = 4
)

// ErrCorrupt reports a GridFS file whose chunks do not add up to its
// length. It surfaces from Read, after the response has started.
var ErrCorrupt = errors.New("mongo: corrupt GridFS file")

// Asset finds a media file in GridFS. As the original did, the last
// extension of mediaID is ignored ("5d55…5662.png" is the file
// 5d55…5662), and a 24-hex rest is an ObjectId _id (falling back to the
// string) while anything else is a string _id.
//
// Content streams the chunks in order without holding the file in memory
// (a few chunks at a time) and seeks by reopening the chunk query at the
// chunk that holds the offset, so ranges read only what they serve. Reads
// run under the context passed here (the request's), each round trip
// under the operation timeout; the caller closes Content.
//
// MD5 is the file's md5 field. Modern drivers no longer write one; then it
// is the first 32 hex digits of SHA-256 over the raw _id, the length and
// the upload date: not a content hash, but stable for a file, since GridFS
// files never change in place, and different for a file replaced under
// the same id.
func (s *Store) Asset(ctx context.Context, mediaID string) (*sources.Asset, error) {
	key := stripExt(mediaID)
	if key == "" {
		return nil, &opError{op: "asset", coll: filesColl, kind: sources.ErrNotFound}
	}
	filter := sources.D("_id", key)
	if oid, ok := sources.ParseObjectID(key); ok {
		filter = sources.D("_id", sources.D("$in", []any{oid, key}))
	}
	var (
		file  *sources.Doc
		rawID bsoncore.Value
	)
	err := s.each(ctx, "asset", assetLabel, filesColl, filter, options.Find().SetLimit(2).SetBatchSize(2),
		func(raw bson.Raw) error {
			d, err := bsondoc.ToDoc(raw)
			if err != nil {
				return err
			}
			id, _ := d.Get("_id")
			if _, isOID := id.(sources.ObjectID); file == nil || isOID {
				rv := raw.Lookup("_id")
				file, rawID = d, bsoncore.Value{Type: bsoncore.Type(rv.Type), Data: clone(rv.Value)}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if file == nil {
		return nil, &opError{op: "asset", coll: filesColl, kind: sources.ErrNotFound}
	}
	return s.asset(ctx, file, rawID)
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func (s *Store) asset(ctx context.Context, file *sources.Doc, id bsoncore.Value) (*sources.Asset, error) {
	size, okSize := intField(file, "length")
	chunkSize, okChunk := intField(file, "chunkSize")
	if !okSize || size < 0 || (size > 0 && (!okChunk || chunkSize <= 0)) {
		return nil, fmt.Errorf("mongo: asset: length %d, chunk size %d: %w", size, chunkSize, ErrCorrupt)
	}
	a := &sources.Asset{Size: size}
	if t, ok := file.Get("uploadDate"); ok {
		a.Modified, _ = t.(time.Time)
	}
	a.Filename, _ = file.String("filename")
	if ct, ok := file.String("contentType"); ok {
		a.ContentType = ct
	} else if meta, ok := file.Doc("metadata"); ok {
		a.ContentType, _ = meta.String("contentType")
	}
	if md5, ok := file.String("md5"); ok && md5 != "" {
		a.MD5 = md5
	} else {
		a.MD5 = fallbackTag(id, size, a.Modified)
	}
	a.Content = &chunkReader{
		ctx: ctx, s: s, chunks: s.db.Collection(chunksColl), id: id,
		size: size, chunkSize: chunkSize, chunkN: -1,
	}
	return a, nil
}

// fallbackTag stands in for a missing md5; see Asset.
func fallbackTag(id bsoncore.Value, size int64, uploaded time.Time) string {
	h := sha256.New()
	h.Write([]byte{byte(id.Type)})
	h.Write(id.Data)
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(size))
	binary.BigEndian.PutUint64(b[8:], uint64(uploaded.UnixMilli()))
	h.Write(b[:])
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func intField(d *sources.Doc, key string) (int64, bool) {
	switch v, _ := d.Get(key); v := v.(type) {
	case int64:
		return v, true
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	}
	return 0, false
}

// FileID is the GridFS _id under which Asset finds mediaID first: the id
// without its last extension (Superdesk ignored it), as an ObjectID when
// that is 24 hex digits, else as a string (which Asset also tries). A
// loader that stores media for prodapi to serve names files with it.
func FileID(mediaID string) any {
	key := stripExt(mediaID)
	if oid, ok := sources.ParseObjectID(key); ok {
		return oid
	}
	return key
}

// stripExt removes the last extension the way Python's os.path.splitext
// does: the extension starts at the last dot of the last path segment,
// unless only dots precede it in that segment (".jpg" has none).
func stripExt(p string) string {
	sep := strings.LastIndexByte(p, '/')
	dot := strings.LastIndexByte(p, '.')
	if dot <= sep {
		return p
	}
	for i := sep + 1; i < dot; i++ {
		if p[i] != '.' {
			return p[:dot]
		}
	}
	return p
}

// A chunkReader streams a GridFS file from fs.chunks. It keeps the
// context of the Asset call because io.Reader has no other way to carry
// one; it lives no longer than the request that made it.
type chunkReader struct {
	ctx             context.Context
	s               *Store
	chunks          *mongodriver.Collection
	id              bsoncore.Value // files_id, exactly as stored
	size, chunkSize int64
	pos             int64

	cur    *mongodriver.Cursor // chunks from nextN on, or nil
	nextN  int64
	chunk  []byte // the data of chunk chunkN
	chunkN int64  // -1 before the first chunk
	closed bool
}

var errClosed = errors.New("mongo: asset: read after close")

func (r *chunkReader) Read(p []byte) (int, error) {
	switch {
	case r.closed:
		return 0, errClosed
	case r.pos >= r.size:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	if n := r.pos / r.chunkSize; n != r.chunkN {
		if err := r.load(n); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.chunk[r.pos-r.chunkN*r.chunkSize:])
	r.pos += int64(n)
	return n, nil
}

// load makes chunk n current: the next one from the open cursor when it
// is there, else from a new query starting at n.
func (r *chunkReader) load(n int64) error {
	if r.cur != nil && r.nextN != n {
		r.closeCursor()
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.s.timeout)
	defer cancel()
	if r.cur == nil {
		cur, err := r.chunks.Find(ctx, r.filter(n),
			options.Find().SetSort(bson.D{{Key: "n", Value: 1}}).SetBatchSize(chunkBatch))
		if err != nil {
			return wrapErr(r.ctx, "asset", chunksColl, err)
		}
		r.cur, r.nextN = cur, n
	}
	if !r.cur.Next(ctx) {
		err := r.cur.Err()
		r.closeCursor()
		if err != nil {
			return wrapErr(r.ctx, "asset", chunksColl, err)
		}
		return fmt.Errorf("mongo: asset: chunk %d missing: %w", n, ErrCorrupt)
	}
	got, ok := r.cur.Current.Lookup("n").AsInt64OK()
	_, data, okData := r.cur.Current.Lookup("data").BinaryOK()
	want := min(r.chunkSize, r.size-n*r.chunkSize)
	if !ok || !okData || got != n || int64(len(data)) != want {
		r.closeCursor()
		return fmt.Errorf("mongo: asset: chunk %d: %w", n, ErrCorrupt)
	}
	r.chunk = append(r.chunk[:0], data...)
	r.chunkN, r.nextN = n, n+1
	return nil
}

func (r *chunkReader) filter(n int64) bson.Raw {
	idx, b := bsoncore.AppendDocumentStart(nil)
	b = bsoncore.AppendValueElement(b, "files_id", r.id)
	nidx, b := bsoncore.AppendDocumentElementStart(b, "n")
	b = bsoncore.AppendInt64Element(b, "$gte", n)
	b, _ = bsoncore.AppendDocumentEnd(b, nidx)
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return bson.Raw(b)
}

// Seek sets the offset of the next Read. It costs nothing until then; a
// Read outside the current chunk reopens the chunk query where needed.
func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	if r.closed {
		return 0, errClosed
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("mongo: asset: seek: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("mongo: asset: seek: negative position")
	}
	r.pos = offset
	return offset, nil
}

// Close releases the open chunk query, if any.
func (r *chunkReader) Close() error {
	r.closeCursor()
	r.closed = true
	r.chunk = nil
	return nil
}

func (r *chunkReader) closeCursor() {
	if r.cur == nil {
		return
	}
	// The request may be gone; killing the cursor is still worth a
	// bounded try (the server would otherwise keep it for 10 minutes).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.s.timeout)
	defer cancel()
	if err := r.cur.Close(ctx); err != nil {
		r.s.log.LogAttrs(ctx, slog.LevelDebug, "mongo: closing a GridFS chunk cursor", slog.String("error", err.Error()))
	}
	r.cur = nil
}
