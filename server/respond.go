package server

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/negotiate"
	"github.com/prodapi/prodapi/sources"
)

// writeRepresentation writes a finished response: a 200 document or list,
// or a 404 for a missing detail, negotiating gzip and answering
// conditional requests from the metadata alone.
func (s *Server) writeRepresentation(w http.ResponseWriter, r *http.Request, rep *sources.Representation) {
	if info := infoOf(w); info != nil {
		info.outcome = rep.Outcome
	}
	h := w.Header()
	if rep.CacheStatus != "" {
		h["Cache-Status"] = []string{rep.CacheStatus}
	}
	if !rep.StoredAt.IsZero() {
		age := max(s.requestTime(w).Sub(rep.StoredAt), 0)
		h["Age"] = []string{strconv.FormatInt(int64(age/time.Second), 10)}
	}
	if rep.Status == http.StatusNotFound {
		s.writeError(w, r, &httperr.Error{Status: http.StatusNotFound, Msg: msgNotFound})
		return
	}
	if rep.Total >= 0 {
		h["X-Total-Count"] = []string{strconv.Itoa(rep.Total)}
	}
	cacheControl := "private"
	if rep.Missing != nil {
		// Incomplete (its Cache-Status says what it lacks): no cache
		// on the way may keep it.
		cacheControl = "no-store"
	}
	s.writeBody(w, r, rep, cacheControl)
}

// writeBody writes a 200 JSON body with its validators: the gzip coding
// when the client takes it and the producer has it, a 304 when a
// validator matches.
func (s *Server) writeBody(w http.ResponseWriter, r *http.Request, rep *sources.Representation, cacheControl string) {
	s.writeTyped(w, r, rep, hdrJSON, cacheControl)
}

// writeTyped is writeBody for a body of any content type.
func (s *Server) writeTyped(w http.ResponseWriter, r *http.Request, rep *sources.Representation, contentType []string, cacheControl string) {
	h := w.Header()
	h["Content-Type"] = contentType
	h["Cache-Control"] = []string{cacheControl}
	h["Vary"] = hdrVary
	zipped := rep.Gzip != nil && negotiate.Gzip(r)
	if rep.ETag != "" {
		etag := rep.ETag
		if zipped {
			etag = gzipETag(etag)
		}
		h["Etag"] = []string{etag}
	}
	if !rep.LastModified.IsZero() {
		h["Last-Modified"] = []string{rep.LastModified.UTC().Format(http.TimeFormat)}
	}
	if notModified(r, rep) {
		h.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}

	body := rep.Body
	if zipped {
		body = rep.Gzip
		h["Content-Encoding"] = hdrGzip
	} else if body == nil && rep.Gzip != nil {
		var err error
		if body, err = gunzip(rep.Gzip); err != nil {
			s.writeError(w, r, fmt.Errorf("server: decompressing a cached body: %w", err))
			return
		}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// Header values shared by every response (net/http never modifies them);
// assigning canonical keys directly skips Header.Set's work on the hot
// path.
var (
	hdrJSON       = []string{"application/json"}
	hdrJavaScript = []string{"text/javascript; charset=utf-8"}
	hdrVary       = []string{"Accept-Encoding"}
	hdrGzip       = []string{"gzip"}
	hdrNosniff    = []string{"nosniff"}
)

// gzipETag is the validator of a body's gzip coding: strong validators
// differ per content coding (RFC 9110 §8.8.3), as Apache marks them.
func gzipETag(etag string) string {
	if strings.HasSuffix(etag, `"`) {
		return etag[:len(etag)-1] + `-gzip"`
	}
	return etag
}

// notModified evaluates If-None-Match (weak comparison, any tag of the
// list, or *), or, without it and only on a single document,
// If-Modified-Since (RFC 9110 §13.2.2). Malformed dates are ignored
// rather than failing the request. A list (Total >= 0) never answers 304
// by date, as Eve disables If-Modified-Since on collections: its
// Last-Modified is only the newest _updated on the page, so an older
// document changed or deleted leaves it as it was and a client polling by
// date would keep a stale list for ever.
func notModified(r *http.Request, rep *sources.Representation) bool {
	if inm := header(r.Header, "If-None-Match"); inm != "" {
		if rep.ETag == "" {
			return false
		}
		return matchesETag(inm, rep.ETag)
	}
	if rep.Total >= 0 {
		return false
	}
	if ims := header(r.Header, "If-Modified-Since"); ims != "" && !rep.LastModified.IsZero() {
		t, err := http.ParseTime(ims)
		return err == nil && !rep.LastModified.Truncate(time.Second).After(t)
	}
	return false
}

// matchesETag reports whether an If-None-Match list names the
// representation, in either content coding (weak comparison).
func matchesETag(header, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	wantGzip := gzipETag(want)
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == want || tag == wantGzip {
			return true
		}
	}
	return false
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}

// writeStatic writes a small JSON body computed once (the home page), with
// its ETag.
func (s *Server) writeStatic(w http.ResponseWriter, r *http.Request, body []byte, etag string) {
	s.writeRepresentation(w, r, &sources.Representation{Body: body, ETag: etag, Total: -1})
}
