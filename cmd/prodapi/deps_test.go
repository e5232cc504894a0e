package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the arrows pointing inward: the server,
// the cache and the enricher never reach a backend driver or adapter, and
// the vocabulary package reaches nothing of ours.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/prodapi/prodapi/"
	drivers := []string{"go.mongodb.org/", "github.com/elastic/", "github.com/aws/",
		mod + "sources/mongo", mod + "sources/elastic", mod + "sources/objstore", mod + "sources/sandbox"}
	for _, tc := range []struct {
		pkg string
		bad []string
	}{
		{"server", append(drivers, "github.com/redis/", mod+"cache", mod+"enrich")},
		{"server/query", append(drivers, "github.com/redis/", mod+"cache", mod+"enrich")},
		{"cache", append(drivers, mod+"server", mod+"enrich")},
		{"enrich", append(drivers, "github.com/redis/", mod+"server", mod+"cache")},
		{"sources", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"config")},
		{"config", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"sources")},
	} {
		out, err := exec.Command("go", "list", "-deps", mod+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		for dep := range strings.SplitSeq(string(out), "\n") {
			for _, bad := range tc.bad {
				if strings.HasPrefix(dep, bad) {
					t.Errorf("%s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}
