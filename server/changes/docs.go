package changes

import (
	"context"
	"errors"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// maxPageBytes bounds a /changes answer (and a burst of a stream) in
// bytes of JSON, documents included, as max_results bounds its entries:
// an answer holds fewer entries rather than more bytes, and resumes
// after the last it holds. One entry always goes, whatever its size.
// (pretty indents a page past it: the bound is the compact page's.)
const maxPageBytes = 4 << 20

// pageReserve is what a page's envelope (_links, _meta: two positions
// and the request's parameters) takes at most, besides its items.
const pageReserve = 4 << 10

// A page is what one answer, or one burst of a stream, carries: the
// entries, each encoded as an item (with its document, include=doc),
// and the token to resume from.
type page struct {
	entries []sources.LogEntry
	items   [][]byte // the entries as JSON, one line each
	size    int      // of the items
	next    string   // a token of the log
}

// hasDoc reports whether an entry of op carries a document with
// include=doc: delete and flush carry none.
func hasDoc(op string) bool {
	return op != sources.OpDelete && op != sources.OpFlush
}

// Messages of include=doc.
const (
	msgDocsNotApplied = "include=doc: this server has not yet applied these entries to what it serves; try again shortly"
)

// errNotApplied ends a wait for this replica to apply a position.
var errNotApplied = errors.New("changes: the position was not applied in time")

// newPage makes the page of entries read up to next: their documents
// when p asks for them, at least as new as the entries (this replica
// has applied every entry up to the last, Log.WaitApplied), then the
// items, cut at maxPageBytes (next is then the last entry kept: never a
// position past an entry not sent).
func (f *Feed) newPage(ctx context.Context, c Caller, p *changeParams, entries []sources.LogEntry, next string) (*page, error) {
	pg := &page{entries: entries, next: next}
	var docs [][]byte
	if p.docs && len(entries) > 0 {
		var err error
		if docs, err = f.docs(ctx, c, entries); err != nil {
			return nil, err
		}
	}
	budget := maxPageBytes - pageReserve
	for i, e := range entries {
		item := codec.AppendJSON(nil, entryDoc(e))
		if p.docs && hasDoc(e.Op) {
			item = appendDoc(item, docs[i])
		}
		if i > 0 && pg.size+len(item)+1 > budget {
			pg.entries, pg.next = entries[:i], entries[i-1].Token
			break
		}
		pg.items = append(pg.items, item)
		pg.size += len(item) + 1
	}
	return pg, nil
}

// appendDoc adds "doc" to an entry's JSON object: the document's body,
// or null for one that answers 404.
func appendDoc(item, doc []byte) []byte {
	item = append(item[:len(item)-1], `,"doc":`...)
	if doc == nil {
		item = append(item, "null"...)
	} else {
		item = append(item, doc...)
	}
	return append(item, '}')
}

// docs returns the document of each entry that carries one (nil at the
// others, and for a document that answers 404), as its detail answers c
// now, once this replica has applied the entries: waiting up to
// MinPositionWait for it, then 503.
func (f *Feed) docs(ctx context.Context, c Caller, entries []sources.LogEntry) ([][]byte, error) {
	if err := f.applied(ctx, entries[len(entries)-1].Token, msgDocsNotApplied); err != nil {
		return nil, err
	}
	var refs []DocRef
	at := map[DocRef]int{} // where each document's body is in what Docs returns
	for _, e := range entries {
		res, ok := sources.ResourceByName(e.Resource)
		if !ok || !hasDoc(e.Op) {
			continue
		}
		ref := DocRef{Resource: res, ID: e.ID}
		if _, ok := at[ref]; !ok {
			at[ref] = len(refs)
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return make([][]byte, len(entries)), nil
	}
	bodies, err := c.Docs(ctx, refs)
	if err != nil {
		return nil, err
	}
	docs := make([][]byte, len(entries))
	for i, e := range entries {
		res, ok := sources.ResourceByName(e.Resource)
		if !ok || !hasDoc(e.Op) {
			continue
		}
		docs[i] = bodies[at[DocRef{Resource: res, ID: e.ID}]]
	}
	return docs, nil
}
