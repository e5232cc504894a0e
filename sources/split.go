package sources

import (
	"context"
	"fmt"
)

// A SearchStore is the search index (Elasticsearch): lists of search
// resources, and lookups.
type SearchStore interface {
	Finder
	Looker
}

// Split is the platform as the original read it: details always from the
// document database (MongoDB, a Store), lists from the search index for
// search resources and from the document database otherwise, and each
// lookup where its Lookup.Search says.
type Split struct {
	Docs   Store
	Search SearchStore
}

var _ Store = Split{}

// Get reads a detail from the document database.
func (s Split) Get(ctx context.Context, res *Resource, id string) (*Doc, error) {
	return s.Docs.Get(ctx, res, id)
}

// Find answers a list from the backend that serves the resource's lists.
func (s Split) Find(ctx context.Context, q *Query) (*Result, error) {
	if q.Resource.Search {
		if q.Search == nil {
			return nil, fmt.Errorf("sources: search list of %s without a search body", q.Resource.Name)
		}
		return s.Search.Find(ctx, q)
	}
	return s.Docs.Find(ctx, q)
}

// Lookup runs l on the search index or the document database.
func (s Split) Lookup(ctx context.Context, l Lookup) ([]*Doc, error) {
	if l.Search {
		return s.Search.Lookup(ctx, l)
	}
	return s.Docs.Lookup(ctx, l)
}
