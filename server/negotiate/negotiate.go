// Package negotiate reads what a request's Accept and Accept-Encoding
// headers ask for: the gzip coding (every answer of the API), an event
// stream rather than JSON (/changes). It imports nothing of ours, so that
// the server and its change feed share it.
package negotiate

import (
	"net/http"
	"strconv"
	"strings"
)

// Gzip reports whether Accept-Encoding allows gzip (RFC 9110
// §12.5.3): gzip (or x-gzip) named with a q above 0, or else * with a q
// above 0. Names and the q parameter are case-insensitive; q=0 means "not
// acceptable", and an explicit gzip entry overrides *. An element whose q
// does not parse is ignored.
func Gzip(r *http.Request) bool {
	gzipQ, starQ := -1.0, -1.0
	eachWeighted(r.Header["Accept-Encoding"], func(coding string, q float64) {
		switch {
		case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
			gzipQ = max(gzipQ, q)
		case coding == "*":
			starQ = max(starQ, q)
		}
	})
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// eachWeighted calls f with each element of a header's comma-separated
// list of weighted names (Accept, Accept-Encoding): the name, trimmed,
// and its q. Elements whose q does not parse are skipped.
func eachWeighted(values []string, f func(name string, q float64)) {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(part, ";")
			if q, ok := qValue(params); ok {
				f(strings.TrimSpace(name), q)
			}
		}
	}
}

// qValue returns the weight among an Accept-Encoding element's
// parameters: 1 when there is none; ok is false when it is not a number
// from 0 to 1.
func qValue(params string) (q float64, ok bool) {
	q = 1
	for p := range strings.SplitSeq(params, ";") {
		name, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || f < 0 || f > 1 {
			return 0, false
		}
		q = f
	}
	return q, true
}

// EventStream reports whether Accept asks for text/event-stream rather
// than JSON: named with a q above 0, and no lower than application/json's
// when both are named. */* alone means JSON.
func EventStream(r *http.Request) bool {
	events, json := -1.0, -1.0
	eachWeighted(r.Header["Accept"], func(mt string, q float64) {
		switch {
		case strings.EqualFold(mt, "text/event-stream"):
			events = max(events, q)
		case strings.EqualFold(mt, "application/json"):
			json = max(json, q)
		}
	})
	return events > 0 && events >= json
}
