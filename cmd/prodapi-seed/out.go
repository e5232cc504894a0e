package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// writeSandbox writes room as a sandbox directory, what PRODAPI_SANDBOX
// serves: <collection>.json for every collection it has (a JSON array in
// MongoDB Extended JSON, one document a line) and the assets under
// assets/, each with its modification time. dir is created; it must not
// hold anything yet.
func writeSandbox(ctx context.Context, dir string, room *corpus, l loader) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("seed: -out: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("seed: -out: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("seed: -out: %s is not empty", dir)
	}
	for _, c := range sources.Collections {
		coll, ok := room.colls[c]
		if !ok {
			continue
		}
		if err := writeCollection(ctx, filepath.Join(dir, c+".json"), coll, l.progress("out: writing", coll.n, "file", c+".json")); err != nil {
			return fmt.Errorf("seed: -out: %w", err)
		}
	}
	for _, a := range room.assets {
		name := filepath.Join(dir, "assets", filepath.FromSlash(a.name))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("seed: -out: %w", err)
		}
		if err := os.WriteFile(name, a.data, 0o644); err != nil {
			return fmt.Errorf("seed: -out: %w", err)
		}
		// The sandbox answers Last-Modified from the file's time.
		if err := os.Chtimes(name, a.modified, a.modified); err != nil {
			return fmt.Errorf("seed: -out: %w", err)
		}
	}
	l.logger.Info("out: assets written", "dir", dir, "files", len(room.assets))
	return nil
}

// writeCollection writes a collection's documents to name as a JSON array.
func writeCollection(ctx context.Context, name string, coll collection, p *progress) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("[")
	var buf []byte
	n := 0
	for d := range coll.docs(false) {
		if n%1000 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if n > 0 {
			w.WriteString(",")
		}
		w.WriteString("\n")
		buf = appendExtJSON(buf[:0], d)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		n++
		p.add(1)
	}
	w.WriteString("\n]\n")
	if err := w.Flush(); err != nil {
		return err
	}
	if n != coll.n {
		return fmt.Errorf("%s: wrote %d documents, want %d", name, n, coll.n)
	}
	p.end("out: file written")
	return nil
}

// appendExtJSON appends v as MongoDB Extended JSON in the form the
// sandbox reads back to the same value: ObjectIds as {"$oid": ...},
// datetimes as {"$date": ...} (RFC 3339, to the nanosecond), floats with
// a fraction or an exponent so that they stay floats.
func appendExtJSON(dst []byte, v any) []byte {
	switch v := v.(type) {
	case *sources.Doc:
		if v == nil {
			return append(dst, "null"...)
		}
		dst = append(dst, '{')
		for i, f := range v.Fields() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = codec.AppendJSONString(dst, f.Key)
			dst = append(dst, ':')
			dst = appendExtJSON(dst, f.Value)
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendExtJSON(dst, e)
		}
		return append(dst, ']')
	case sources.ObjectID:
		dst = append(dst, `{"$oid":"`...)
		dst = hex.AppendEncode(dst, v[:])
		return append(dst, `"}`...)
	case time.Time:
		dst = append(dst, `{"$date":"`...)
		dst = v.UTC().AppendFormat(dst, time.RFC3339Nano)
		return append(dst, `"}`...)
	}
	return codec.AppendJSON(dst, v) // nil, bool, string, int64, float64
}
