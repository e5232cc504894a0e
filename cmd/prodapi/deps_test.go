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
// reach nothing of ours. No adapter reaches another, nor another's
// driver, nor the layers above the vocabulary: what two adapters share
// (MongoDB's order of values, the operator grammar, JSON) sits in a
// package of its own under sources. Only main reaches the OpenTelemetry
// SDK and exporters; the cache traces Redis itself, without go-redis's
// extras.
//
// A forbidden entry ending in "/" is a prefix: nothing under it. Any other
// names a package, which is forbidden, and the packages under it, which
// are forbidden unless they are leaves: a package of ours that imports
// nothing else of ours (the metrics registry, server/metrics; the error
// envelope's writer, server/httperr; server/negotiate; server/seal) carries no arrow back into the layer
// it sits in, so any layer may import it.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/prodapi/prodapi/"
	// Each adapter, with the driver only it may reach.
	adapters := []struct{ pkg, driver string }{
		{"sources/mongo", "go.mongodb.org/"},
		{"sources/elastic", "github.com/elastic/"},
		{"sources/objstore", "github.com/aws/"},
		{"sources/sandbox", ""},
	}
	var drivers []string
	for _, a := range adapters {
		drivers = append(drivers, mod+a.pkg)
		if a.driver != "" {
			drivers = append(drivers, a.driver)
		}
	}
	// Only main sets up the tracing SDK and its exporters; the rest
	// uses the OpenTelemetry API, which is a no-op until main hands them
	// a provider.
	otelSDK := []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/"}
	noSDK := func(bad ...string) []string { return append(bad, otelSDK...) }
	leaves := leafPackages(t, mod)
	for pkg, why := range map[string]string{
		"server/metrics":   "a leaf that every layer may count into",
		"server/httperr":   "a leaf that the server, its change feed and the admin listener write the error envelope with",
		"server/negotiate": "a leaf that the server and its change feed read Accept and Accept-Encoding with",
		"server/seal":      "a leaf that list cursors and change-log positions are sealed with",
	} {
		if !leaves[mod+pkg] {
			t.Errorf("%s imports a package of ours: it must stay %s", pkg, why)
		}
	}
	type rule struct {
		pkg string
		bad []string
	}
	rules := []rule{
		{"server", noSDK(append(drivers, "github.com/redis/", mod+"cache", mod+"enrich", mod+"server/render")...)},
		{"server/query", append(drivers, "github.com/redis/", mod+"cache", mod+"enrich")},
		{"server/render", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich")},
		{"cache", noSDK(append(drivers, mod+"server", mod+"enrich", mod+"config", "github.com/redis/go-redis/extra/")...)},
		// The Redis tier deals in keys and bytes: nothing of the cache, of
		// documents or of queries.
		{"cache/redistier", noSDK(append(drivers, mod+"server", mod+"enrich", mod+"config", mod+"cache", mod+"sources", "github.com/redis/go-redis/extra/")...)},
		{"server/metrics", noSDK(append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"config", mod+"sources")...)},
		{"enrich", append(drivers, "github.com/redis/", mod+"server", mod+"cache")},
		{"sources", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"config")},
		// MongoDB's order, shared by two adapters: the vocabulary only.
		{"sources/bsonorder", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"config", mod+"sources/")},
		{"cache/feed", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich")},
		// The error envelope's writer: nothing of ours at all.
		{"server/httperr", []string{mod}},
		{"server/negotiate", []string{mod}},
		// The change feed's HTTP side: the server mounts it, and it reaches
		// neither the cache nor the renderer (the log comes through its Log).
		{"server/changes", noSDK(append(drivers, "github.com/redis/", mod+"cache", mod+"enrich", mod+"config",
			mod+"server/render", mod+"server/admin")...)},
		{"server/changes/changestest", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich")},
		// The change log keeps its stream in the Redis tier; it reaches
		// neither the feed nor the layers above.
		{"cache/changelog", append(drivers, mod+"server", mod+"enrich", mod+"config", mod+"cache/feed")},
		{"server/admin", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich")},
		{"server/docsui", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"sources", mod+"config")},
		{"config", append(drivers, "github.com/redis/", mod+"server", mod+"cache", mod+"enrich", mod+"sources")},
		// A third party's client: the standard library only, nothing of ours.
		{"examples/mirror", []string{mod, "github.com/", "golang.org/", "go.mongodb.org/", "go.opentelemetry.io/", "google.golang.org/"}},
	}
	for _, a := range adapters {
		bad := noSDK(mod+"server", mod+"cache", mod+"enrich", mod+"config")
		for _, other := range adapters {
			if other.pkg == a.pkg {
				continue
			}
			bad = append(bad, mod+other.pkg, mod+other.pkg+"/")
			if other.driver != "" {
				bad = append(bad, other.driver)
			}
		}
		rules = append(rules, rule{a.pkg, bad})
	}
	for _, tc := range rules {
		out, err := exec.Command("go", "list", "-deps", mod+tc.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, out)
		}
		for dep := range strings.SplitSeq(string(out), "\n") {
			if dep == mod+tc.pkg {
				continue
			}
			for _, bad := range tc.bad {
				prefix := strings.HasSuffix(bad, "/")
				under := strings.HasPrefix(dep, strings.TrimSuffix(bad, "/")+"/")
				if dep == bad || under && (prefix || !leaves[dep]) {
					t.Errorf("%s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}

// leafPackages are the module's packages that import no other package of
// the module.
func leafPackages(t *testing.T, mod string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s...: %v\n%s", mod, err, out)
	}
	leaves := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		leaves[fields[0]] = !slices.ContainsFunc(fields[1:], func(imp string) bool { return strings.HasPrefix(imp, mod) })
	}
	return leaves
}
