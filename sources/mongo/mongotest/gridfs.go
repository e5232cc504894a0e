package mongotest

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// DefaultChunkSize is GridFS's default chunk size, 255 KiB.
const DefaultChunkSize = 255 * 1024

// A File is a GridFS file to store in the "fs" bucket.
type File struct {
	ID              any // a document value: sources.ObjectID, string, ...
	Filename        string
	ContentType     string // the legacy top-level field; "" leaves it out
	MetaContentType string // metadata.contentType; "" leaves it out
	Data            []byte
	ChunkSize       int // 0 means DefaultChunkSize
	// MD5 writes the md5 field, as drivers did before GridFS dropped it.
	MD5        bool
	UploadDate time.Time
}

// PutFile stores f in fs.files and fs.chunks, as a driver's upload does.
func (s *Server) PutFile(f File) error {
	cs := f.ChunkSize
	if cs <= 0 {
		cs = DefaultChunkSize
	}
	file := sources.D("_id", f.ID, "length", int64(len(f.Data)), "chunkSize", int64(cs),
		"uploadDate", f.UploadDate.UTC().Truncate(time.Millisecond))
	if f.Filename != "" {
		file.Set("filename", f.Filename)
	}
	if f.ContentType != "" {
		file.Set("contentType", f.ContentType)
	}
	if f.MetaContentType != "" {
		file.Set("metadata", sources.D("contentType", f.MetaContentType))
	}
	if f.MD5 {
		sum := md5.Sum(f.Data)
		file.Set("md5", hex.EncodeToString(sum[:]))
	}
	if err := s.Insert("fs.files", file); err != nil {
		return err
	}
	var chunks [][]byte
	for n, off := 0, 0; off < len(f.Data); n, off = n+1, off+cs {
		end := min(off+cs, len(f.Data))
		var err error
		chunk := build(func(b []byte) []byte {
			b = bsoncore.AppendStringElement(b, "_id", f.Filename+"#"+strconv.Itoa(n)+"#"+fmt.Sprint(f.ID))
			if b, err = bsondoc.AppendElement(b, "files_id", f.ID); err != nil {
				return b
			}
			b = bsoncore.AppendInt32Element(b, "n", int32(n))
			return bsoncore.AppendBinaryElement(b, "data", 0, f.Data[off:end])
		})
		if err != nil {
			return fmt.Errorf("mongotest: put file: %w", err)
		}
		chunks = append(chunks, chunk)
	}
	return s.InsertRaw("fs.chunks", chunks...)
}
