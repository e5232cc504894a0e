package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// A newsroom is what the seed loads: documents by collection, as the
// sandbox decodes them, and media files with the metadata the sandbox
// serves them with.
type newsroom struct {
	colls  map[string][]*sources.Doc // by collection, in file order; absent files are absent keys
	assets []asset                   // in path order
}

// An asset is one file of assets/.
type asset struct {
	name        string // path under assets/, "/"-separated: the media id
	data        []byte
	contentType string
	md5         string    // hex, of data
	modified    time.Time // what the sandbox answers as Last-Modified
}

// loadNewsroom reads fsys as the sandbox does (sandbox.Load validates it:
// ids, duplicates, JSON), then decodes the collections the same way and
// takes each asset's type, md5 and time from the sandbox, so that the
// platform holds what the sandbox serves.
func loadNewsroom(ctx context.Context, fsys fs.FS) (*newsroom, error) {
	sb, err := sandbox.Load(fsys, sandbox.Options{})
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	room := &newsroom{colls: map[string][]*sources.Doc{}}
	for _, c := range sources.Collections {
		data, err := fs.ReadFile(fsys, c+".json")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		v, err := codec.DecodeJSON(data, codec.DecodeOptions{Extended: true})
		if err != nil {
			return nil, fmt.Errorf("seed: %s.json: %w", c, err)
		}
		list, _ := v.([]any) // sandbox.Load checked the shape
		docs := make([]*sources.Doc, len(list))
		for i, e := range list {
			docs[i] = e.(*sources.Doc)
		}
		room.colls[c] = docs
	}
	err = fs.WalkDir(fsys, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "assets" && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		name := p[len("assets/"):]
		a, err := sb.Asset(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer a.Content.Close()
		data, err := io.ReadAll(a.Content)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		room.assets = append(room.assets, asset{name: name, data: data, contentType: a.ContentType, md5: a.MD5, modified: a.Modified})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("seed: assets: %w", err)
	}
	return room, nil
}

// counts is the number of documents per collection, for the log.
func (r *newsroom) counts() map[string]int {
	m := make(map[string]int, len(r.colls))
	for c, docs := range r.colls {
		m[c] = len(docs)
	}
	return m
}

// baseName is the file name of an asset, without its folders.
func (a asset) baseName() string { return path.Base(a.name) }

// A corpus is what the seed loads or writes: each collection's documents
// as a stream, made as they are read, so that a newsroom of any size
// loads in bounded memory; and the assets.
type corpus struct {
	colls  map[string]collection // absent collections are absent keys
	assets []asset
}

// A collection is how many documents a collection has and a stream of
// them: in file order, or in ascending _id order when byID is set.
type collection struct {
	n    int
	docs func(byID bool) iter.Seq[*sources.Doc]
}

// corpus is the newsroom as it was read.
func (r *newsroom) corpus() *corpus {
	out := &corpus{colls: make(map[string]collection, len(r.colls)), assets: r.assets}
	for c, docs := range r.colls {
		out.colls[c] = collection{n: len(docs), docs: func(byID bool) iter.Seq[*sources.Doc] {
			return func(yield func(*sources.Doc) bool) {
				if !byID {
					for _, d := range docs {
						if !yield(d) {
							return
						}
					}
					return
				}
				for _, i := range idOrder(docs) {
					if !yield(docs[i]) {
						return
					}
				}
			}
		}}
	}
	return out
}

// counts is the number of documents per collection, for the log.
func (c *corpus) counts() map[string]int {
	m := make(map[string]int, len(c.colls))
	for name, coll := range c.colls {
		m[name] = coll.n
	}
	return m
}

// idOrder is the indexes of docs in ascending _id order (the string form
// of ObjectIds), stable.
func idOrder(docs []*sources.Doc) []int {
	ids := make([]string, len(docs))
	order := make([]int, len(docs))
	for i, d := range docs {
		v, _ := d.Get("_id")
		ids[i], _ = sources.IDString(v)
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	return order
}
