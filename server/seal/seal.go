// Package seal encrypts and authenticates the short values prodapi hands
// to its clients and takes back unchanged: the cursors of list walks
// (server/query) and the positions of the change log (server/changes).
// Each is AES-256-GCM under a key derived with HKDF-SHA256 from the
// service's secret, a salt and a label naming the use, so that one
// secret keys every use independently and no value of one use opens as
// another's. A client can neither read a sealed value nor make one up.
//
// Key derives a key for one salt, for a use that derives a key per
// value (cursors). A Box seals many values under a key it derives once
// per process, each with a random nonce (positions, one per event).
//
// It imports nothing of ours: any layer may use it.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
)

// Key returns the AEAD (AES-256-GCM) keyed by HKDF-SHA256 of secret,
// salt and label.
func Key(secret, salt []byte, label string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, salt, label, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Errors of Box.Open.
var (
	// ErrShape: not a value a Box of this size seals (not base64url, or
	// not its length).
	ErrShape = errors.New("seal: not a sealed value")
	// ErrOpen: the right shape, but it does not open: sealed under
	// another secret (rotated, or another process's own), another
	// version of the format, or altered.
	ErrOpen = errors.New("seal: the value does not open")
)

// Layout of a Box's sealed value, before base64url (unpadded):
//
//	version (1) | key salt (8) | nonce (12) | ciphertext (size) | tag (16)
//
// The version and the salt are the additional data. Every value a Box
// seals has the same length.
const (
	saltLen  = 8
	nonceLen = 12
	tagLen   = 16
	// maxSeals is how many values one key seals before the Box derives
	// another: random 96-bit nonces stay far from colliding (NIST SP
	// 800-38D bounds a key at 2^32 of them).
	maxSeals = 1 << 30
	// maxKeys bounds the keys a Box keeps for the salts it opened values
	// of (other replicas', earlier ones of its own); beyond, a key is
	// derived for each value.
	maxKeys = 64
)

// A Box seals values of a fixed size under keys derived from a secret
// and a label: the key of the seals is derived once per process (from a
// random salt, renewed every 2^30 seals), and each seal has a random
// nonce, so that sealing the same value twice gives two values that
// reveal nothing of their sameness. Every Box given the same secret and
// label opens every other's values. A Box is safe for concurrent use.
type Box struct {
	secret  []byte
	label   string
	version byte
	size    int

	cur  atomic.Pointer[boxKey]
	mu   sync.Mutex // guards keys and the renewal of cur
	keys map[[saltLen]byte]cipher.AEAD
}

type boxKey struct {
	salt  [saltLen]byte
	aead  cipher.AEAD
	seals atomic.Int64
}

// NewBox returns a Box sealing values of size bytes under secret and
// label; version is the format's, which a value must carry to open.
func NewBox(secret []byte, label string, version byte, size int) (*Box, error) {
	if len(secret) == 0 {
		return nil, errors.New("seal: a box needs a secret")
	}
	b := &Box{secret: append([]byte(nil), secret...), label: label, version: version, size: size,
		keys: map[[saltLen]byte]cipher.AEAD{}}
	if _, err := b.renew(nil); err != nil {
		return nil, err
	}
	return b, nil
}

// renew replaces the key of the seals, unless another call did since
// old was current.
func (b *Box) renew(old *boxKey) (*boxKey, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur := b.cur.Load(); cur != old {
		return cur, nil
	}
	k := &boxKey{}
	rand.Read(k.salt[:])
	aead, err := Key(b.secret, k.salt[:], b.label)
	if err != nil {
		return nil, err
	}
	k.aead = aead
	b.cur.Store(k)
	b.keep(k.salt, aead)
	return k, nil
}

// keep remembers the key of salt; b.mu is held.
func (b *Box) keep(salt [saltLen]byte, aead cipher.AEAD) {
	if len(b.keys) < maxKeys {
		b.keys[salt] = aead
	}
}

// Len is the length of every value b seals.
func (b *Box) Len() int {
	return base64.RawURLEncoding.EncodedLen(1 + saltLen + nonceLen + b.size + tagLen)
}

// Seal seals plain, which must be of the Box's size.
func (b *Box) Seal(plain []byte) (string, error) {
	if len(plain) != b.size {
		return "", errors.New("seal: a value of the wrong size")
	}
	k := b.cur.Load()
	if k.seals.Add(1) > maxSeals {
		var err error
		if k, err = b.renew(k); err != nil {
			return "", err
		}
	}
	out := make([]byte, 1+saltLen+nonceLen, 1+saltLen+nonceLen+b.size+tagLen)
	out[0] = b.version
	copy(out[1:], k.salt[:])
	nonce := out[1+saltLen:]
	rand.Read(nonce)
	out = k.aead.Seal(out, nonce, plain, out[:1+saltLen])
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns what s seals: an error wrapping ErrShape when s is not a
// value of this Box's shape, ErrOpen when it does not open.
func (b *Box) Open(s string) ([]byte, error) {
	if len(s) != b.Len() {
		return nil, ErrShape
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, ErrShape
	}
	if raw[0] != b.version {
		return nil, ErrOpen
	}
	var salt [saltLen]byte
	copy(salt[:], raw[1:])
	aead, err := b.key(salt)
	if err != nil {
		return nil, err
	}
	head := raw[:1+saltLen]
	plain, err := aead.Open(nil, raw[1+saltLen:1+saltLen+nonceLen], raw[1+saltLen+nonceLen:], head)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// key returns the key of salt: one kept, or derived (and kept, room
// allowing, once a value opened with it: a made-up salt is never kept).
func (b *Box) key(salt [saltLen]byte) (cipher.AEAD, error) {
	b.mu.Lock()
	aead, ok := b.keys[salt]
	b.mu.Unlock()
	if ok {
		return aead, nil
	}
	aead, err := Key(b.secret, salt[:], b.label)
	if err != nil {
		return nil, err
	}
	return &keeper{AEAD: aead, keep: func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.keep(salt, aead)
	}}, nil
}

// A keeper is a key derived for a salt not kept yet: it is kept once a
// value opens with it.
type keeper struct {
	cipher.AEAD
	keep func()
}

func (k *keeper) Open(dst, nonce, ciphertext, data []byte) ([]byte, error) {
	plain, err := k.AEAD.Open(dst, nonce, ciphertext, data)
	if err == nil {
		k.keep()
	}
	return plain, err
}
