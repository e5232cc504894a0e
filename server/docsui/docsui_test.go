package docsui

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// TestBundle holds the committed copy to what make docs-ui writes: the
// pinned release's version, its licences beside it, the bundle and
// stylesheet of that release, the stylesheet without its source-map
// comment; and the page's script to loading nothing from elsewhere.
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
	if got, want := Version(), pkg.Dependencies["swagger-ui-dist"]; got != want {
		t.Errorf("Version() = %q, package.json pins swagger-ui-dist %q: run make docs-ui", got, want)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(Version()) {
		t.Errorf("Version() = %q, not an exact release", Version())
	}
	for f, licence := range map[string]string{
		"swagger-ui/LICENSE":                          "Apache License",
		"swagger-ui/NOTICE":                           "SmartBear",
		"swagger-ui/swagger-ui-bundle.js.LICENSE.txt": "MIT",
	} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte(licence)) {
			t.Errorf("%s: %v, or it does not say %q", f, err, licence)
		}
	}
	// The bundle defines the global SwaggerUIBundle and carries its
	// version.
	js := Bundle()
	if !bytes.Contains(js, []byte(".SwaggerUIBundle=")) || !bytes.Contains(js, []byte(`PACKAGE_VERSION:"`+Version()+`"`)) {
		t.Errorf("the bundle (%d bytes) is not Swagger UI %s's bundle", len(js), Version())
	}
	css := Stylesheet()
	if !bytes.Contains(css, []byte(".swagger-ui")) || bytes.Contains(css, []byte("sourceMappingURL")) {
		t.Errorf("the stylesheet (%d bytes) is not Swagger UI's, or still names its source map: make docs-ui removes it", len(css))
	}
}

// TestScript holds the page's script to the settings that keep the page
// to itself: no validator badge (Swagger UI's default sends the document
// to validator.swagger.io), no configuration from the page's URL, no
// token kept in the browser's storage, and no address of its own.
func TestScript(t *testing.T) {
	js := Script()
	for _, want := range []string{"validatorUrl: null", "queryConfigEnabled: false", "persistAuthorization: false", `props.operation.get("x-codeSamples")`} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("docs.js lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`https?://`).Find(js); m != nil {
		t.Errorf("docs.js names an address (%s): everything the page loads comes from the service", m)
	}
}
