// Package browser tests prodapi's API reference page as a reader gets it:
// in Debian's headless Chromium, driven by chromedp, against a prodapi
// binary built from this repository and serving the sample newsroom.
//
// It is a nested, test-only module, so the main module's go.mod carries
// no browser driver. Run it with make docs-test, or:
//
//	cd test/browser && go test ./...
//
// It needs chromium on PATH (apt-get install chromium); without it the
// test skips, and fails when PRODAPI_REQUIRE_REAL is set, as CI sets it.
// Chromium runs with a fresh profile and without its background
// networking, so nothing but the page's own requests leaves it. The test
// leaves screenshots in the repository's bin/ (docs-page.png,
// docs-operation.png).
package browser
