// Package docsui holds the script of the API reference page: the
// standalone bundle of Redoc (https://github.com/Redocly/redoc), a pinned
// npm release that make docs-ui copies into redoc/ with its licences and
// version. The server embeds it, so the page works offline and building
// prodapi needs no npm.
//
// The copy differs from the release in one string: the sidebar's Redocly
// logo, which the release loads from Redocly's CDN, has no source, so
// Redoc hides it (make docs-ui says so and checks the string is there
// exactly once). The page's HTML and its Content-Security-Policy are the
// server's (server/docs.go).
package docsui

import (
	_ "embed"
	"strings"
)

//go:embed redoc/redoc.standalone.js
var redoc []byte

//go:embed redoc/VERSION
var version string

// Script returns Redoc's standalone bundle, which defines the global
// Redoc.init(specURL, options, element). The caller must not modify it.
func Script() []byte { return redoc }

// Version is the Redoc release the bundle comes from ("2.5.4").
func Version() string { return strings.TrimSpace(version) }

// StyleHashes are the CSP hash sources ('sha256-...') of the style
// elements the bundle creates as it loads, before Redoc.init can hand it
// a nonce: perfect-scrollbar's stylesheet, which webpack's style-loader
// inserts empty and then fills. They change only with the bundle;
// test/browser fails, naming the hash it saw, when one is missing or
// stale.
func StyleHashes() []string {
	return []string{
		"'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='", // the empty element
		"'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='", // perfect-scrollbar.css, with its source map
	}
}
