package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the arrows pointing inward: a request goes
// server → cache → server/render → enrich and sources, the server and the
// cache each calling the next step through a Loader it declares and main
// fills in; the server, the cache, the renderer and the enricher never
// reach a backend driver or adapter; nothing beneath the server comes
// back up into it, and the server reaches neither the cache nor the
// renderer; the cache's Redis tier reaches nothing of the cache, nor
// documents or queries; the vocabulary package and the mirror example
// reach nothing of ours. Only main reaches the OpenTelemetry SDK and
// exporters; the cache traces Redis itself, without go-redis's extras.
//
// A forbidden entry ending in "/" is a prefix; any other names a package
// and everything under it, except the package under test itself and the
// packages the rule allows.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/prodapi/prodapi/"
	drivers := []string{"go.mongodb.org/", "github.com/elastic/", "github.com/aws/",
		mod + "sources/mongo", mod + "sources/elastic", mod + "sources/objstore", mod + "sources/sandbox"}
	// Only main sets up the tracing SDK and its exporters; the rest
	// uses the OpenTelemetry API, which is a no-op until main hands them
	// a provider.
	otelSDK := []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/"}
	noSDK := func(bad ...string) []string { return append(bad, otelSDK...) }
	for _, tc := range []struct {
		pkg   string
		bad   []string
		allow []string
	}{
		{"server", noSDK(append(drivers, "github.com/redis/", mod+"cache", mod+"enrich", mod+"server/render")...), nil},
		{"server/query", append(drivers, "github.com/redis/", mod+"cache", mod+"enrich"), nil},
		{"server/render", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich"), nil},
		{"cache", noSDK(append(drivers, mod+"server", mod+"enrich", mod+"config", "github.com/redis/go-redis/extra/")...), nil},
		// The Redis tier deals in keys and bytes: nothing of the cache, of
		// documents or of queries.
		{"cache/redistier", noSDK(append(drivers, mod+"server", mod+"enrich", mod+"config", mod+"cache", mod+"sources", "github.com/redis/go-redis/extra/")...),
			[]string{mod + "sources/metrics"}},
		{"sources/metrics", noSDK(append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"config", mod+"sources")...), nil},
		{"sources/mongo", noSDK(mod + "server"), nil},
		{"sources/elastic", noSDK(mod + "server"), nil},
		{"enrich", append(drivers, "github.com/redis/", mod+"server", mod+"cache"), nil},
		{"sources", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"config"), nil},
		{"cache/feed", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich"), nil},
		{"server/admin", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich"), nil},
		{"server/docsui", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"sources", mod+"config"), nil},
		{"config", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"sources"), nil},
		// A third party's client: the standard library only, nothing of ours.
		{"examples/mirror", []string{mod, "github.com/", "golang.org/", "go.mongodb.org/", "go.opentelemetry.io/", "google.golang.org/"}, nil},
	} {
		out, err := exec.Command("go", "list", "-deps", mod+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		for dep := range strings.SplitSeq(string(out), "\n") {
			if dep == mod+tc.pkg || slices.Contains(tc.allow, dep) {
				continue
			}
			for _, bad := range tc.bad {
				if dep == bad || strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/") {
					t.Errorf("%s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}
