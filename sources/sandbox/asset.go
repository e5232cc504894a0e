package sandbox

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// assetsDir is the folder of media files beside the collections.
const assetsDir = "assets"

type assetFile struct {
	name     string // path under assets/, with "/" separators
	data     []byte
	md5      string
	modified time.Time
}

type assetSet struct {
	byName map[string]*assetFile
	// byStem maps a name without its last extension to the files having
	// it, sorted by name.
	byStem map[string][]*assetFile
}

// loadAssets reads every file under assets/. Files of an embedded FS have
// no modification time; they get fallback (the newest _updated of the
// newsroom).
func loadAssets(fsys fs.FS, fallback time.Time) (*assetSet, error) {
	set := &assetSet{byName: map[string]*assetFile{}, byStem: map[string][]*assetFile{}}
	err := fs.WalkDir(fsys, assetsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == assetsDir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		mod := fallback
		if info, err := d.Info(); err == nil && !info.ModTime().IsZero() {
			mod = info.ModTime().UTC().Truncate(time.Second)
		}
		sum := md5.Sum(data)
		f := &assetFile{name: strings.TrimPrefix(p, assetsDir+"/"), data: data, md5: hex.EncodeToString(sum[:]), modified: mod}
		set.byName[f.name] = f
		stem := stripExt(f.name)
		set.byStem[stem] = append(set.byStem[stem], f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: assets: %w", err)
	}
	for _, files := range set.byStem {
		slices.SortFunc(files, func(a, b *assetFile) int { return strings.Compare(a.name, b.name) })
	}
	return set, nil
}

// stripExt removes the last extension of the last path segment.
func stripExt(name string) string {
	return strings.TrimSuffix(name, path.Ext(name))
}

func (set *assetSet) find(id string) (*assetFile, bool) {
	if f, ok := set.byName[id]; ok {
		return f, true
	}
	files := set.byStem[stripExt(id)]
	if len(files) == 0 {
		return nil, false
	}
	return files[0], true
}

// Asset serves a media file from the assets/ folder. The extension in the
// id is ignored for lookup, as GridFS's get_by_filename ignored it:
// "<media>.png" finds "<media>.jpg". Ids with "..", a backslash or a
// leading "/" are not found.
func (s *Store) Asset(ctx context.Context, mediaID string) (_ *sources.Asset, err error) {
	end, err := s.query(ctx, "assets", "asset")
	if err != nil {
		return nil, err
	}
	defer func() { end(err) }()
	if !cleanAssetPath(mediaID) {
		return nil, fmt.Errorf("sandbox: asset %q: %w", mediaID, sources.ErrNotFound)
	}
	f, ok := s.assets.find(mediaID)
	if !ok {
		return nil, fmt.Errorf("sandbox: asset %q: %w", mediaID, sources.ErrNotFound)
	}
	return &sources.Asset{
		Content:     readSeekNopCloser{bytes.NewReader(f.data)},
		Size:        int64(len(f.data)),
		ContentType: contentType(f.name),
		MD5:         f.md5,
		Modified:    f.modified,
		Filename:    path.Base(f.name),
	}, nil
}

type readSeekNopCloser struct{ *bytes.Reader }

func (readSeekNopCloser) Close() error { return nil }

// cleanAssetPath reports whether a media id may name a file: relative,
// no "." or ".." segments, no backslash or NUL.
func cleanAssetPath(id string) bool {
	if id == "" || id[0] == '/' || strings.ContainsAny(id, "\\\x00") {
		return false
	}
	for _, seg := range strings.Split(id, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// contentTypes fixes the types of common media files, so that answers do
// not depend on the machine's mime tables; other extensions fall back to
// them, then to application/octet-stream.
var contentTypes = map[string]string{
	".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif",
	".webp": "image/webp", ".svg": "image/svg+xml", ".avif": "image/avif", ".bmp": "image/bmp",
	".tif": "image/tiff", ".tiff": "image/tiff", ".ico": "image/x-icon",
	".mp4": "video/mp4", ".m4v": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime",
	".mp3": "audio/mpeg", ".m4a": "audio/mp4", ".wav": "audio/wav", ".ogg": "audio/ogg", ".oga": "audio/ogg",
	".pdf": "application/pdf", ".json": "application/json", ".xml": "application/xml",
	".txt": "text/plain; charset=utf-8", ".csv": "text/csv; charset=utf-8",
	".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
	".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
	".zip": "application/zip", ".doc": "application/msword",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}

func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
