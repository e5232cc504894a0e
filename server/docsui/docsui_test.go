package docsui

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// TestBundle holds the committed copy to what make docs-ui writes: the
// pinned release's version, its licences beside it, the bundle of that
// release, and no address outside the page that the bundle would load
// by itself.
func TestBundle(t *testing.T) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	raw, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	if got, want := Version(), pkg.Dependencies["redoc"]; got != want {
		t.Errorf("Version() = %q, package.json pins redoc %q: run make docs-ui", got, want)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(Version()) {
		t.Errorf("Version() = %q, not an exact release", Version())
	}
	for _, f := range []string{"redoc/LICENSE", "redoc/redoc.standalone.js.LICENSE.txt"} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte("MIT")) {
			t.Errorf("%s: %v, or it names no licence", f, err)
		}
	}
	// The bundle defines the global Redoc and carries its version.
	js := Script()
	if !bytes.Contains(js, []byte("e.Redoc=")) || !bytes.Contains(js, []byte(`="`+Version()+`"`)) {
		t.Errorf("the bundle (%d bytes) is not Redoc %s's standalone bundle", len(js), Version())
	}
	if bytes.Contains(js, []byte("cdn.redoc.ly")) {
		t.Error("the bundle loads Redocly's logo from its CDN: make docs-ui should have removed it")
	}
}
