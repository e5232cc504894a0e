// Package bsondoc converts between BSON and *sources.Doc, for the Mongo
// adapter and its wire-protocol fake. It works on raw bytes (bsoncore), so
// field order is kept and no reflection is involved.
//
// BSON to document values:
//
//	double                   float64
//	string, symbol           string
//	document                 *sources.Doc (order kept)
//	array                    []any
//	ObjectId                 sources.ObjectID
//	bool                     bool
//	datetime                 time.Time in UTC (millisecond precision)
//	null, undefined          nil
//	int32, int64             int64
//	decimal128               string ("1.50", "NaN", "-Infinity")
//	timestamp                time.Time in UTC (its seconds; the increment is dropped)
//	binary, UUID subtypes 3/4 with 16 bytes: the canonical UUID string
//	binary, other subtypes   string, standard base64
//	regex                    string "/pattern/options"
//	JavaScript, code w/scope string, the code (the scope is dropped)
//	DBPointer                sources.ObjectID of the pointer
//	MinKey, MaxKey           nil
//
// No field is ever skipped, so documents keep their shape. Document values
// to BSON: nil, bool, int64 (int32 when it fits, as pymongo writes Python
// ints), float64, string, time.Time (datetime), sources.ObjectID, []any and
// *sources.Doc; ints of other widths are accepted too. Anything else is an
// error.
package bsondoc

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// MaxDepth bounds the nesting ToDoc accepts (MongoDB itself stops at 100
// levels for stored documents).
const MaxDepth = 200

// ErrMalformed reports BSON that cannot be read.
var ErrMalformed = errors.New("bsondoc: malformed BSON")

// ToDoc converts a BSON document to a *sources.Doc.
func ToDoc(raw []byte) (*sources.Doc, error) {
	return toDoc(raw, 0)
}

func toDoc(raw []byte, depth int) (*sources.Doc, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: nested more than %d levels", ErrMalformed, MaxDepth)
	}
	body, err := body(raw)
	if err != nil {
		return nil, err
	}
	var fields []sources.Field
	for len(body) > 1 {
		elem, rest, ok := bsoncore.ReadElement(body)
		if !ok {
			return nil, ErrMalformed
		}
		key, err := elem.KeyErr()
		if err != nil {
			return nil, ErrMalformed
		}
		v, err := value(elem.Value(), depth)
		if err != nil {
			return nil, err
		}
		fields = append(fields, sources.Field{Key: key, Value: v})
		body = rest
	}
	return sources.NewDoc(fields...), nil
}

// body returns the elements of a document or array and its 0x00
// terminator, after checking the length prefix.
func body(raw []byte) ([]byte, error) {
	n, rest, ok := bsoncore.ReadLength(raw)
	if !ok || n < 5 || int(n) > len(raw) || raw[n-1] != 0 {
		return nil, ErrMalformed
	}
	return rest[:n-4], nil
}

func toArray(raw []byte, depth int) ([]any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: nested more than %d levels", ErrMalformed, MaxDepth)
	}
	body, err := body(raw)
	if err != nil {
		return nil, err
	}
	arr := []any{}
	for len(body) > 1 {
		elem, rest, ok := bsoncore.ReadElement(body)
		if !ok {
			return nil, ErrMalformed
		}
		v, err := value(elem.Value(), depth)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		body = rest
	}
	return arr, nil
}

// Value converts one BSON value to a document value.
func Value(v bsoncore.Value) (any, error) { return value(v, 0) }

func value(v bsoncore.Value, depth int) (any, error) {
	var (
		out any
		ok  bool
	)
	switch v.Type {
	case bsoncore.TypeDouble:
		out, ok = v.DoubleOK()
	case bsoncore.TypeString:
		out, ok = v.StringValueOK()
	case bsoncore.TypeSymbol:
		out, ok = v.SymbolOK()
	case bsoncore.TypeEmbeddedDocument:
		return toDoc(v.Data, depth+1)
	case bsoncore.TypeArray:
		return toArray(v.Data, depth+1)
	case bsoncore.TypeObjectID:
		var id [12]byte
		id, ok = v.ObjectIDOK()
		out = sources.ObjectID(id)
	case bsoncore.TypeBoolean:
		out, ok = v.BooleanOK()
	case bsoncore.TypeDateTime:
		var ms int64
		ms, ok = v.DateTimeOK()
		out = time.UnixMilli(ms).UTC()
	case bsoncore.TypeNull, bsoncore.TypeUndefined, bsoncore.TypeMinKey, bsoncore.TypeMaxKey:
		return nil, nil
	case bsoncore.TypeInt32:
		var i int32
		i, ok = v.Int32OK()
		out = int64(i)
	case bsoncore.TypeInt64:
		out, ok = v.Int64OK()
	case bsoncore.TypeDecimal128:
		var h, l uint64
		h, l, ok = v.Decimal128OK()
		out = bson.NewDecimal128(h, l).String()
	case bsoncore.TypeTimestamp:
		var t uint32
		t, _, ok = v.TimestampOK()
		out = time.Unix(int64(t), 0).UTC()
	case bsoncore.TypeBinary:
		var (
			sub  byte
			data []byte
		)
		sub, data, ok = v.BinaryOK()
		out = binaryString(sub, data)
	case bsoncore.TypeRegex:
		var pattern, options string
		pattern, options, ok = v.RegexOK()
		out = "/" + pattern + "/" + options
	case bsoncore.TypeJavaScript:
		out, ok = v.JavaScriptOK()
	case bsoncore.TypeCodeWithScope:
		out, _, ok = v.CodeWithScopeOK()
	case bsoncore.TypeDBPointer:
		var id [12]byte
		_, id, ok = v.DBPointerOK()
		out = sources.ObjectID(id)
	default:
		return nil, fmt.Errorf("%w: unknown type 0x%02x", ErrMalformed, byte(v.Type))
	}
	if !ok {
		return nil, ErrMalformed
	}
	return out, nil
}

func binaryString(subtype byte, data []byte) string {
	if (subtype == 0x03 || subtype == 0x04) && len(data) == 16 {
		h := hex.EncodeToString(data)
		return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	return base64.StdEncoding.EncodeToString(data)
}

// FromDoc converts a document to BSON.
func FromDoc(d *sources.Doc) ([]byte, error) {
	return AppendDoc(nil, d)
}

// AppendDoc appends d as a BSON document to dst.
func AppendDoc(dst []byte, d *sources.Doc) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	for _, f := range d.Fields() {
		var err error
		if dst, err = AppendElement(dst, f.Key, f.Value); err != nil {
			return nil, err
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

// AppendArray appends a as a BSON array to dst.
func AppendArray(dst []byte, a []any) ([]byte, error) {
	idx, dst := bsoncore.AppendArrayStart(dst)
	for i, v := range a {
		var err error
		if dst, err = AppendElement(dst, strconv.Itoa(i), v); err != nil {
			return nil, err
		}
	}
	return bsoncore.AppendArrayEnd(dst, idx)
}

// AppendElement appends the element key: v to dst.
// Keys are C strings in BSON, so a key holding NUL is an error.
func AppendElement(dst []byte, key string, v any) ([]byte, error) {
	if strings.IndexByte(key, 0) >= 0 {
		return nil, errors.New("bsondoc: a key holds NUL")
	}
	switch v := v.(type) {
	case nil:
		return bsoncore.AppendNullElement(dst, key), nil
	case bool:
		return bsoncore.AppendBooleanElement(dst, key, v), nil
	case int64:
		return appendInt(dst, key, v), nil
	case int:
		return appendInt(dst, key, int64(v)), nil
	case int32:
		return bsoncore.AppendInt32Element(dst, key, v), nil
	case float64:
		return bsoncore.AppendDoubleElement(dst, key, v), nil
	case string:
		return bsoncore.AppendStringElement(dst, key, v), nil
	case time.Time:
		return bsoncore.AppendDateTimeElement(dst, key, v.UnixMilli()), nil
	case sources.ObjectID:
		return bsoncore.AppendObjectIDElement(dst, key, v), nil
	case []any:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, key)
		return AppendArray(dst, v)
	case *sources.Doc:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		return AppendDoc(dst, v)
	}
	return nil, fmt.Errorf("bsondoc: field %q: unsupported type %T", key, v)
}

func appendInt(dst []byte, key string, v int64) []byte {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		return bsoncore.AppendInt32Element(dst, key, int32(v))
	}
	return bsoncore.AppendInt64Element(dst, key, v)
}
