package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// keyVersion is the first segment of every key, the Redis tier's prefix
// (redistier.Prefix). It changes when the key scheme or the stored value
// format changes incompatibly: old entries are then never read again and
// expire on their own TTL.
const keyVersion = redistier.Prefix

// maxReadable is the longest canonical request kept readable in a key;
// longer ones are replaced by their SHA-256.
const maxReadable = 128

// Key is the cache key of a query, the only function that builds one. It
// is a versioned prefix, the resource, list or detail, then the canonical
// request: the detail id, or the page and page size of a list, then the
// query's canonical parameters sorted by name. Nothing else of the request
// enters it (no token, no header, no unknown parameter), so equivalent
// requests share an entry and different resources never do.
//
//	prodapi:v1:items:detail:id=urn:newsml:localhost:2024:3f1c
//	prodapi:v1:items:list:page=1&max_results=25&q=%22election%22
//	prodapi:v1:items:list:#<sha256 hex of the canonical request>
//
// A canonical request longer than 128 bytes is hashed; the readable
// prefix stays. Values are escaped so that '&', '=', '#', '%', spaces and
// non-ASCII bytes cannot make two requests collide.
func Key(q *sources.Query) string {
	var buf [256]byte
	return string(appendKey(buf[:0], q))
}

// appendKey appends Key(q) to b: the hit path builds the key in a buffer
// on its stack and looks the in-process tier up with it in place
// (local.getBytes), so that a hit makes no string of it.
func appendKey(b []byte, q *sources.Query) []byte {
	var name string
	if q.Resource != nil {
		name = q.Resource.Name
	}
	kind := "list:"
	if q.IsDetail() {
		kind = "detail:"
	}

	b = append(b, keyVersion...)
	b = appendEscaped(b, name, true)
	b = append(b, ':')
	b = append(b, kind...)
	prefix := len(b)

	if q.IsDetail() {
		b = append(b, "id="...)
		b = appendEscaped(b, q.ID, false)
	} else {
		b = append(b, "page="...)
		b = strconv.AppendInt(b, int64(q.Page), 10)
		b = append(b, "&max_results="...)
		b = strconv.AppendInt(b, int64(q.MaxResults), 10)
	}
	if q.Pretty {
		// The body differs; the parser may or may not list it in Params.
		b = append(b, "&pretty=1"...)
	}
	params := q.Params
	if !slices.IsSortedFunc(params, sources.CompareParams) {
		params = slices.Clone(params)
		slices.SortFunc(params, sources.CompareParams)
	}
	for _, p := range params {
		b = append(b, '&')
		b = appendEscaped(b, p.Name, false)
		b = append(b, '=')
		b = appendEscaped(b, p.Value, false)
	}

	if len(b)-prefix > maxReadable {
		sum := sha256.Sum256(b[prefix:])
		b = append(b[:prefix], '#')
		b = hex.AppendEncode(b, sum[:])
	}
	return b
}

// assetKey is the key of a cached asset redirect.
func assetKey(mediaID string) string {
	b := append([]byte(keyVersion), "assets:redirect:"...)
	prefix := len(b)
	b = appendEscaped(b, mediaID, false)
	if len(b)-prefix > maxReadable {
		sum := sha256.Sum256(b[prefix:])
		b = append(b[:prefix], '#')
		b = hex.AppendEncode(b, sum[:])
	}
	return string(b)
}

// appendEscaped appends s with '%', '&', '=', '#', every byte outside
// printable ASCII and, in a segment, ':' percent-encoded, so that the
// parts of a key cannot run into each other.
func appendEscaped(b []byte, s string, segment bool) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c >= 0x7f || c == '%' || c == '&' || c == '=' || c == '#' || (segment && c == ':'):
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}
