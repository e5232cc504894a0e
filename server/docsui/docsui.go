// Package docsui holds the files of the API reference page: Swagger UI
// (https://github.com/swagger-api/swagger-ui), the bundle and stylesheet
// of a pinned npm release of swagger-ui-dist that make docs-ui copies
// into swagger-ui/ with its licences and version, and the page's own
// script, docs.js. The server embeds them, so the page works offline and
// building prodapi needs no npm.
//
// The copy differs from the release in one line: the stylesheet's
// source-map comment, which names a file the copy does not carry, goes
// (make docs-ui says so and checks the line is there exactly once). The
// page's HTML and its Content-Security-Policy are the server's
// (server/docs.go).
package docsui

import (
	_ "embed"
	"strings"
)

var (
	//go:embed swagger-ui/swagger-ui-bundle.js
	bundle []byte
	//go:embed swagger-ui/swagger-ui.css
	stylesheet []byte
	//go:embed swagger-ui/VERSION
	version string
	//go:embed docs.js
	script []byte
)

// Bundle returns Swagger UI's standalone bundle, which defines the
// global SwaggerUIBundle. The caller must not modify it.
func Bundle() []byte { return bundle }

// Stylesheet returns Swagger UI's stylesheet. The caller must not modify
// it.
func Stylesheet() []byte { return stylesheet }

// Script returns the page's script: it fetches the document named by
// the data-spec attribute of the element #swagger-ui, points Try it out
// at the root named by its data-api attribute, and starts Swagger UI
// there, with the operations' code samples (x-codeSamples) shown. The
// caller must not modify it.
func Script() []byte { return script }

// Version is the Swagger UI release the bundle comes from ("5.35.0").
func Version() string { return strings.TrimSpace(version) }
