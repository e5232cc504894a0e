package sources

import (
	"context"
	"io"
	"time"
)

// An Asset is a media file: either a Redirect to a URL the client can
// fetch it from (object storage), or its Content, served by us (GridFS,
// the sandbox).
type Asset struct {
	// Redirect is a presigned URL, valid until Expires.
	Redirect string
	Expires  time.Time

	// Content streams the file; the caller closes it. Seeking serves
	// ranges without reading the whole file.
	Content     io.ReadSeekCloser
	Size        int64
	ContentType string    // "" when unknown
	MD5         string    // hex, for the ETag; "" when unknown
	Modified    time.Time // upload date
	Filename    string
}

// An AssetStore finds media by id ("5d553c333031e2855a2e5662.jpg",
// "20240115120112/photo.jpg"). It returns an error wrapping ErrNotFound if
// there is no such file.
type AssetStore interface {
	Asset(ctx context.Context, mediaID string) (*Asset, error)
}
