package objstore

import (
	"regexp"
	"strings"
)

// mongoIDName is the original's MONGOID_REGEX used with re.match: anchored
// at the start only, lower-case hex and extension only. "<24 hex>.jpg"
// (and "<24 hex>.jpegx", "<24 hex>.png/x") name the key "<24 hex>".
var mongoIDName = regexp.MustCompile(`^([a-f0-9]{24})\.[a-z]{3,4}`)

// unsafeChars are the 15 characters the original's _make_s3_safe removes
// from an id before using it as a key.
var unsafeChars = strings.NewReplacer(
	`\`, "", "{", "", "^", "", "}", "", "%", "", "`", "", "]", "", ">", "",
	"[", "", "~", "", "<", "", "#", "", "|", "", "'", "", `"`, "",
)

// maxKeyLen is S3's limit on a key, in bytes.
const maxKeyLen = 1024

// ObjectKey derives the object key of a media id as the original's Amazon
// storage did (get_by_filename, then get, then get_key), and the file name
// it reported (the key without the prefix). ok is false when no object
// can have that id: empty after sanitising, not printable ASCII (the
// original transliterated with unidecode; the router refuses such ids), a
// "." or ".." path segment, or too long for S3.
func ObjectKey(prefix, mediaID string) (key, name string, ok bool) {
	if m := mongoIDName.FindStringSubmatch(mediaID); m != nil {
		name = m[1]
	} else {
		for i := range len(mediaID) {
			if c := mediaID[i]; c < 0x20 || c > 0x7e {
				return "", "", false
			}
		}
		name = unsafeChars.Replace(mediaID)
	}
	if name == "" {
		return "", "", false
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "." || seg == ".." {
			return "", "", false
		}
	}
	key = name
	if prefix != "" {
		key = prefix + "/" + name
	}
	if len(key) > maxKeyLen {
		return "", "", false
	}
	return key, name, true
}
