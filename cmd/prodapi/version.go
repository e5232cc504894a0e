package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and revision are set at link time by `make build` and the
// Dockerfile (-ldflags "-X main.version=... -X main.revision=..."), where
// the build may not see the repository. Unset, they come from the build
// info Go records: the module version and the VCS stamp.
var version, revision string

// buildInfo is what `prodapi version` prints.
type buildInfo struct {
	Version, Revision, GoVersion string
	Modified                     bool // the working tree had uncommitted changes
}

// readBuildInfo reads the build info, the link-time values taking
// precedence.
func readBuildInfo() buildInfo {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return newBuildInfo(info, version, revision)
}

// newBuildInfo combines what Go recorded (info, nil when nothing) with
// the link-time version and revision (empty when not set).
func newBuildInfo(info *debug.BuildInfo, version, revision string) buildInfo {
	b := buildInfo{Version: version, Revision: revision, GoVersion: runtime.Version()}
	var vcsRevision string
	if info != nil {
		b.GoVersion = info.GoVersion
		b.Version = cmp.Or(b.Version, info.Main.Version)
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRevision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Revision != "" && b.Revision != vcsRevision {
		b.Modified = false // the stamp describes another tree than the one named
	}
	b.Version = cmp.Or(b.Version, "(devel)")
	b.Revision = cmp.Or(b.Revision, vcsRevision, "unknown")
	return b
}

func printVersion(w io.Writer, b buildInfo) {
	modified := ""
	if b.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(w, "prodapi %s\nrevision %s%s\n%s\n", b.Version, b.Revision, modified, b.GoVersion)
}
