package mongo_test

import (
	"testing"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/sources/sourcestest"
)

// TestContract runs the contract suite with the platform's split: details,
// document lists and document-database lookups from this adapter over the
// wire fake, search lists and search lookups from the sandbox (the
// Elasticsearch half is the elastic adapter's to prove).
func TestContract(t *testing.T) {
	sourcestest.Run(t, sourcestest.Dir(), func(t *testing.T, dir string) sources.Store {
		seed, err := sourcestest.Fixtures(dir)
		if err != nil {
			t.Fatal(err)
		}
		e := connect(t, mongotest.Start(t, seed), mongosrc.Options{})
		search, err := sandbox.Open(dir, sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sources.Split{Docs: e.store, Search: search}
	})
}
