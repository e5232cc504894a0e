package enrich

import (
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// shape applies the shaping every resource gets: the detail projection,
// the excluded fields and the renditions.
func (r *request) shape(d *sources.Doc, detail bool) {
	if detail {
		// The datasource projection Mongo applied to details: the named
		// top-level fields and _id, by the rule a client's ?projection
		// follows too.
		sources.Projection{Fields: r.res.Projection}.Apply(d)
	}
	exclude(d, r.res.Excluded)
	r.renditions(d)
}

// exclude removes the excluded fields of d: plain names at the top level,
// dotted names inside sub-documents (update._etag), and a literal dotted
// top-level key too, as the original did. A parent that is missing or not
// a document (update: null) is skipped; the original crashed on it.
func exclude(d *sources.Doc, names []string) {
	for _, name := range names {
		d.Delete(name)
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			continue
		}
		v, _ := d.Path(name[:i])
		if parent, ok := asDoc(v); ok {
			parent.Delete(name[i+1:])
		}
	}
}

// renditions rewrites the renditions of d and of each of its associations
// (_process_item_renditions), and removes the associations' excluded
// fields. Null renditions and associations are skipped.
func (r *request) renditions(d *sources.Doc) {
	if rs, ok := d.Doc("renditions"); ok {
		r.rewrite(d, rs)
	}
	assoc, ok := d.Doc("associations")
	if !ok {
		return
	}
	for _, f := range assoc.Fields() {
		a, ok := asDoc(f.Value)
		if !ok || a.Len() == 0 {
			continue
		}
		if rs, ok := a.Doc("renditions"); ok {
			r.rewrite(d, rs)
		}
		exclude(a, r.res.Excluded)
	}
}

// rewrite turns each rendition's media into an href under the media
// prefix, and replaces the old href in top's body_html. Renditions without
// media, or whose media is not an id, are left as they are.
func (r *request) rewrite(top, renditions *sources.Doc) {
	for _, f := range renditions.Fields() {
		v, ok := asDoc(f.Value)
		if !ok {
			continue
		}
		m, has := v.Get("media")
		if !has {
			continue
		}
		media, ok := idOf(m)
		if !ok {
			continue
		}
		v.Delete("media")
		old, _ := v.String("href")
		mimetype, _ := v.String("mimetype")
		href := r.e.mediaURL(media, mimetype)
		v.Set("href", href)
		if old == "" {
			continue
		}
		if body, ok := top.String("body_html"); ok && body != "" {
			top.Set("body_html", strings.ReplaceAll(body, old, href))
		}
	}
}

// mediaURL is the original's url_for_media: the media prefix, the id and,
// for GridFS ids, the extension of the mimetype. An id that already has an
// extension or a path (object storage: "20240115120112/photo.jpg") gets
// none, as the original's S3 storage added none.
func (e *Enricher) mediaURL(media, mimetype string) string {
	if strings.Contains(media, "/") || hasExtension(media) {
		return e.prefix + "/" + media
	}
	return e.prefix + "/" + media + extensions[strings.ToLower(mimetype)]
}

// hasExtension reports whether id ends in a dot and one to eight letters
// or digits.
func hasExtension(id string) bool {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 || len(id)-i-1 < 1 || len(id)-i-1 > 8 {
		return false
	}
	for _, c := range []byte(id[i+1:]) {
		if !isWord(c) || c == '_' {
			return false
		}
	}
	return true
}

// isWord reports whether c is in [0-9A-Za-z_].
func isWord(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// extensions maps a mimetype (lower case, exactly: parameters or spaces
// give none) to the extension the original's GridFS storage added:
// Python 3.11's built-in mimetypes table (guess_extension, strict) with
// .jpe/.jpeg as .jpg, plus image/webp. The
// original's output also depended on the server's /etc/mime.types; ours
// does not.
var extensions = map[string]string{
	"application/javascript":        ".js",
	"application/json":              ".json",
	"application/manifest+json":     ".webmanifest",
	"application/msword":            ".doc",
	"application/n-quads":           ".nq",
	"application/n-triples":         ".nt",
	"application/octet-stream":      ".bin",
	"application/oda":               ".oda",
	"application/pdf":               ".pdf",
	"application/pkcs7-mime":        ".p7c",
	"application/postscript":        ".ps",
	"application/trig":              ".trig",
	"application/vnd.apple.mpegurl": ".m3u",
	"application/vnd.ms-excel":      ".xls",
	"application/vnd.ms-powerpoint": ".ppt",
	"application/wasm":              ".wasm",
	"application/x-bcpio":           ".bcpio",
	"application/x-cpio":            ".cpio",
	"application/x-csh":             ".csh",
	"application/x-dvi":             ".dvi",
	"application/x-gtar":            ".gtar",
	"application/x-hdf":             ".hdf",
	"application/x-hdf5":            ".h5",
	"application/x-latex":           ".latex",
	"application/x-mif":             ".mif",
	"application/x-netcdf":          ".cdf",
	"application/x-pkcs12":          ".p12",
	"application/x-pn-realaudio":    ".ram",
	"application/x-python-code":     ".pyc",
	"application/x-sh":              ".sh",
	"application/x-shar":            ".shar",
	"application/x-shockwave-flash": ".swf",
	"application/x-sv4cpio":         ".sv4cpio",
	"application/x-sv4crc":          ".sv4crc",
	"application/x-tar":             ".tar",
	"application/x-tcl":             ".tcl",
	"application/x-tex":             ".tex",
	"application/x-texinfo":         ".texi",
	"application/x-troff":           ".roff",
	"application/x-troff-man":       ".man",
	"application/x-troff-me":        ".me",
	"application/x-troff-ms":        ".ms",
	"application/x-ustar":           ".ustar",
	"application/x-wais-source":     ".src",
	"application/xml":               ".xsl",
	"application/zip":               ".zip",
	"audio/3gpp":                    ".3gp",
	"audio/3gpp2":                   ".3g2",
	"audio/aac":                     ".aac",
	"audio/basic":                   ".au",
	"audio/mpeg":                    ".mp3",
	"audio/opus":                    ".opus",
	"audio/x-aiff":                  ".aif",
	"audio/x-pn-realaudio":          ".ra",
	"audio/x-wav":                   ".wav",
	"image/avif":                    ".avif",
	"image/bmp":                     ".bmp",
	"image/gif":                     ".gif",
	"image/heic":                    ".heic",
	"image/heif":                    ".heif",
	"image/ief":                     ".ief",
	"image/jpeg":                    ".jpg",
	"image/png":                     ".png",
	"image/svg+xml":                 ".svg",
	"image/tiff":                    ".tiff",
	"image/vnd.microsoft.icon":      ".ico",
	"image/webp":                    ".webp",
	"image/x-cmu-raster":            ".ras",
	"image/x-portable-anymap":       ".pnm",
	"image/x-portable-bitmap":       ".pbm",
	"image/x-portable-graymap":      ".pgm",
	"image/x-portable-pixmap":       ".ppm",
	"image/x-rgb":                   ".rgb",
	"image/x-xbitmap":               ".xbm",
	"image/x-xpixmap":               ".xpm",
	"image/x-xwindowdump":           ".xwd",
	"message/rfc822":                ".eml",
	"text/css":                      ".css",
	"text/csv":                      ".csv",
	"text/html":                     ".html",
	"text/n3":                       ".n3",
	"text/plain":                    ".txt",
	"text/richtext":                 ".rtx",
	"text/tab-separated-values":     ".tsv",
	"text/vtt":                      ".vtt",
	"text/x-python":                 ".py",
	"text/x-setext":                 ".etx",
	"text/x-sgml":                   ".sgm",
	"text/x-vcard":                  ".vcf",
	"text/xml":                      ".xml",
	"video/mp4":                     ".mp4",
	"video/mpeg":                    ".mpeg",
	"video/quicktime":               ".mov",
	"video/webm":                    ".webm",
	"video/x-msvideo":               ".avi",
	"video/x-sgi-movie":             ".movie",
}
