package elastic_test

import (
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/sources/sourcestest"
)

// The contract suite through the real client and the fake, in both
// versions: the search-backed cases (search lists, Search lookups) read
// Elasticsearch; details, document lists and document lookups read a
// sandbox holding the same fixture, as sources.Split arranges it in
// production with Mongo.
func TestContract(t *testing.T) {
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			var fake *estest.Server
			sourcestest.Run(t, sourcestest.Dir(), func(t *testing.T, dir string) sources.Store {
				docs, err := sourcestest.Fixtures(dir)
				if err != nil {
					t.Fatal(err)
				}
				fake = estest.New(t, estest.Options{Version: v, Docs: docs})
				f := fixture{fake: fake}.connect(t, fake.URL, 0)
				sb, err := sandbox.Open(dir, sandbox.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return sources.Split{Docs: sb, Search: f.store}
			})
			// The search cases really went through the client and the fake.
			if n := len(fake.Searches()); n < 40 {
				t.Errorf("%d searches reached the fake, want the suite's search cases and lookups", n)
			}
		})
	}
}
