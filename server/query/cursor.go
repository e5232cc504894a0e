package query

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/prodapi/prodapi/server/seal"
	"github.com/prodapi/prodapi/sources"
)

// CursorLifetime is how long a cursor is accepted after the page that
// gave it was rendered. A position that the backend forgets sooner (an
// Elasticsearch point in time) expires with it.
const CursorLifetime = 24 * time.Hour

// maxCursor bounds a cursor parameter, in bytes: a next link must stay
// followable, and a cursor longer than this one was never issued.
const maxCursor = 4 << 10

// cursorInfo labels the key derivation: the same secret may sign tokens
// too, and the cursor key must be independent of that use.
const cursorInfo = "prodapi list cursor v1"

// cursorVersion is a cursor's first byte, so that a change of format
// refuses old cursors cleanly.
const cursorVersion = 1

// Cursors seal and open the cursor parameter of list walks. A cursor is
// encrypted and authenticated (AES-256-GCM), so a client can neither read
// the sort values it carries (they may include _updated, which the API
// never shows) nor make one up. Each cursor has a key of its own, derived
// with HKDF-SHA256 from the secret and a random salt the cursor carries
// (seal.Key, which change-log positions share under their own label), so
// no key seals more than once and no count of cursors wears the secret
// out. Every replica given the same secret opens every other's cursors.
//
// A cursor holds its expiry, a hash binding it to its request (the
// resource and the canonical parameters but cursor and pretty, so
// a cursor used with other filters or another sort is refused) and the
// backend's Position: its point in time, its values and, when it has
// one, the total the walk's first page counted.
type Cursors struct {
	secret []byte
	now    func() time.Time
}

// NewCursors returns the cursor codec keyed by secret, which should hold
// at least 32 bytes of entropy and be the same on every replica. now is
// the clock expiries are judged by; nil means time.Now.
func NewCursors(secret []byte, now func() time.Time) (*Cursors, error) {
	if len(secret) == 0 {
		return nil, errors.New("query: cursors need a secret")
	}
	if now == nil {
		now = time.Now
	}
	return &Cursors{secret: append([]byte(nil), secret...), now: now}, nil
}

// aead is the cipher of the cursor salted with salt.
func (c *Cursors) aead(salt []byte) (cipher.AEAD, error) {
	return seal.Key(c.secret, salt, cursorInfo)
}

const saltLen = 16

// seal encodes and encrypts a position bound to binding.
func (c *Cursors) seal(p sources.Position, binding [16]byte) (string, error) {
	expires := c.now().Add(CursorLifetime)
	if !p.Expires.IsZero() && p.Expires.Before(expires) {
		expires = p.Expires
	}
	plain := binary.BigEndian.AppendUint64(nil, uint64(max(expires.Unix(), 0)))
	plain = append(plain, binding[:]...)
	plain = appendString(plain, p.PIT)
	plain = binary.AppendUvarint(plain, uint64(len(p.Values)))
	for _, v := range p.Values {
		plain = appendValue(plain, v)
	}
	// Last, and left out when 0, so that a cursor sealed before
	// positions carried a total opens as one with none.
	if p.Total > 0 {
		plain = binary.AppendUvarint(plain, uint64(p.Total))
	}
	salt := make([]byte, saltLen)
	rand.Read(salt)
	aead, err := c.aead(salt)
	if err != nil {
		return "", err
	}
	out := append([]byte{cursorVersion}, salt...)
	out = aead.Seal(out, make([]byte, aead.NonceSize()), plain, out[:1])
	s := base64.RawURLEncoding.EncodeToString(out)
	if len(s) > maxCursor {
		// The client's choice of sort, not a backend failure: an
		// ErrInvalid, which no cache answers with a stale copy.
		return "", fmt.Errorf("%w: %w", &Error{Status: http.StatusBadRequest, Message: "cursor: the sort values of " +
			"this page's last document are too long to carry in a cursor; walk a sort on shorter fields"}, sources.ErrInvalid)
	}
	return s, nil
}

// Cursor refusals: each names the parameter and tells the client what
// to do instead.
var (
	errCursorInvalid = badf("cursor: not a cursor this service issued, or damaged on the way; " +
		"follow the next link as given, or start a walk with cursor= (empty)")
	errCursorExpired = badf("cursor: expired; start the walk again with cursor= (empty)")
	errCursorForeign = badf("cursor: issued for another request; a walk keeps the resource and the where, " +
		"sort, projection and search parameters of its first page")
)

// open decrypts a cursor and checks its expiry and binding.
func (c *Cursors) open(s string, binding [16]byte) (*sources.Position, error) {
	if len(s) > maxCursor {
		return nil, errCursorInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 1+saltLen || raw[0] != cursorVersion {
		return nil, errCursorInvalid
	}
	aead, err := c.aead(raw[1 : 1+saltLen])
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, make([]byte, aead.NonceSize()), raw[1+saltLen:], raw[:1])
	if err != nil {
		return nil, errCursorInvalid
	}
	// Authenticated: what follows was written by seal. A failure to read
	// it back is still refused, never a panic.
	d := decoder{b: plain}
	expires := int64(d.uint64())
	var bound [16]byte
	copy(bound[:], d.bytes(len(bound)))
	pos := &sources.Position{PIT: d.string()}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail()
	}
	if d.err == nil {
		pos.Values = make([]any, 0, n)
		for range n {
			pos.Values = append(pos.Values, d.value(0))
		}
	}
	if d.err == nil && len(d.b) > 0 {
		total := d.uvarint()
		if total > math.MaxInt32 {
			d.fail()
		}
		pos.Total = int(total)
	}
	switch {
	case d.err != nil || len(d.b) != 0:
		return nil, errCursorInvalid
	case c.now().Unix() >= expires:
		return nil, errCursorExpired
	case bound != binding:
		return nil, errCursorForeign
	}
	return pos, nil
}

// bindingOf hashes what a cursor is bound to: the resource and the
// canonical parameters that choose and order the documents (all but
// cursor and pretty).
func bindingOf(res *sources.Resource, params []sources.Param) [16]byte {
	h := sha256.New()
	h.Write([]byte(res.Name))
	for _, p := range params {
		if p.Name == "cursor" || p.Name == "pretty" {
			continue
		}
		h.Write([]byte{0})
		h.Write([]byte(p.Name))
		h.Write([]byte{0})
		h.Write([]byte(p.Value))
	}
	var b [16]byte
	copy(b[:], h.Sum(nil))
	return b
}

// Value tags of the cursor encoding: the types of document values,
// written so that each reads back as itself (an int stays an int, a date
// keeps its nanoseconds, which JSON would lose).
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt
	tagFloat
	tagString
	tagObjectID
	tagTime
	tagDoc
	tagArray
)

// maxValueDepth bounds nesting in a cursor's values.
const maxValueDepth = 64

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, tagNull)
	case bool:
		if v {
			return append(b, tagTrue)
		}
		return append(b, tagFalse)
	case int64:
		return binary.AppendVarint(append(b, tagInt), v)
	case int:
		return binary.AppendVarint(append(b, tagInt), int64(v))
	case float64:
		return binary.BigEndian.AppendUint64(append(b, tagFloat), math.Float64bits(v))
	case string:
		return appendString(append(b, tagString), v)
	case sources.ObjectID:
		return append(append(b, tagObjectID), v[:]...)
	case time.Time:
		b = binary.AppendVarint(append(b, tagTime), v.Unix())
		return binary.AppendUvarint(b, uint64(v.Nanosecond()))
	case *sources.Doc:
		b = binary.AppendUvarint(append(b, tagDoc), uint64(v.Len()))
		for _, f := range v.Fields() {
			b = appendString(b, f.Key)
			b = appendValue(b, f.Value)
		}
		return b
	case []any:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(v)))
		for _, e := range v {
			b = appendValue(b, e)
		}
		return b
	}
	// Not a document value: backends produce none. Write it as null
	// rather than fail the page.
	return append(b, tagNull)
}

// A decoder reads a cursor's plaintext; the first failure sticks.
type decoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (d *decoder) fail() { d.err, d.b = errTruncated, nil }

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail()
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) uint64() uint64 {
	b := d.bytes(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	d.skip(n)
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	d.skip(n)
	return v
}

// skip moves past a varint of n bytes; n <= 0 means there was none.
func (d *decoder) skip(n int) {
	if n <= 0 {
		d.fail()
		return
	}
	d.b = d.b[n:]
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	return string(d.bytes(int(n)))
}

func (d *decoder) value(depth int) any {
	tag := d.bytes(1)
	if tag == nil || depth > maxValueDepth {
		d.fail()
		return nil
	}
	switch tag[0] {
	case tagNull:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt:
		return d.varint()
	case tagFloat:
		return math.Float64frombits(d.uint64())
	case tagString:
		return d.string()
	case tagObjectID:
		var id sources.ObjectID
		copy(id[:], d.bytes(len(id)))
		return id
	case tagTime:
		sec := d.varint()
		nsec := d.uvarint()
		if nsec >= uint64(time.Second) {
			d.fail()
			return nil
		}
		return time.Unix(sec, int64(nsec)).UTC()
	case tagDoc:
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.fail()
			return nil
		}
		doc := sources.NewDoc()
		for range n {
			k := d.string()
			doc.Set(k, d.value(depth+1))
		}
		return doc
	case tagArray:
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.fail()
			return nil
		}
		out := make([]any, 0, n)
		for range n {
			out = append(out, d.value(depth+1))
		}
		return out
	}
	d.fail()
	return nil
}

// checkCursor reads whether a list pages by cursor: the cursor parameter
// present, even empty (a walk's first page). It cannot be combined with
// page, and a parser without Cursors refuses it. Details ignore it.
func (p *parser) checkCursor() error {
	raw, ok := p.args.lookup("cursor")
	if !ok || !p.list {
		return nil
	}
	if p.cursors == nil {
		return badf("cursor: this server does not page by cursor")
	}
	if p.args.first("page") != "" {
		return badf("cursor: cannot be combined with page; follow the next links instead")
	}
	p.walk = true
	p.keep("cursor", raw)
	return nil
}

// parseCursor opens the cursor of a walk once the canonical parameters
// it is bound to are known, and gives the query what continues the walk.
func (p *parser) parseCursor() error {
	if !p.walk {
		return nil
	}
	binding := bindingOf(p.res, p.q.Params)
	cur := &sources.Cursor{Seal: func(pos sources.Position) (string, error) { return p.cursors.seal(pos, binding) }}
	if raw := p.args.first("cursor"); raw != "" {
		var err error
		if cur.After, err = p.cursors.open(raw, binding); err != nil {
			return err
		}
	}
	p.q.Cursor = cur
	return nil
}

// walkSort checks the sort of a search walk: scores move as the index
// changes, and _doc is an order of the moment, so neither can say where
// a walk stands.
func walkSort(sort []any) error {
	for _, s := range sort {
		if d, ok := s.(*sources.Doc); ok && d.Len() > 0 {
			if k := d.Fields()[0].Key; k == "_score" || k == "_doc" {
				return badf("cursor: a walk cannot sort by %s; sort by fields", k)
			}
		}
	}
	return nil
}
