package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// Messages the original used, word for word (Werkzeug's defaults).
const (
	msgNotFound         = "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again."
	msgMethodNotAllowed = "The method is not allowed for the requested URL."
	msgCredentials      = "Please provide proper credentials"
	msgInvalidScope     = "Invalid scope"
	msgAssetNotFound    = "File not found on media storage."
	msgUnavailable      = "The service is temporarily unable to read the newsroom's data. Please try again shortly."
	msgTimeout          = "The newsroom's data store did not answer in time. Please try again shortly."
	msgRejected         = "The search backend could not run this query; check the field names and value types it uses."
	msgInternal         = "The server encountered an internal error and was unable to complete your request."
	msgTargetTooLong    = "The request URL is too long."
	msgCursor           = "cursor: the walk can no longer continue from this cursor (the search backend has let its point in time expire); start it again with cursor= (empty)"
)

// An httpError is a failure with a status and a message safe to show the
// client; err, when set, is the cause, for the log only.
type httpError struct {
	status int
	msg    string
	err    error
	header http.Header // extra response headers (WWW-Authenticate, Allow)
}

func (e *httpError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *httpError) Unwrap() error { return e.err }

// errorOf maps any error to what the client sees. It is the one place that
// decides statuses for failures.
func errorOf(err error) *httpError {
	if he, ok := errors.AsType[*httpError](err); ok {
		return he
	}
	if qe, ok := errors.AsType[*query.Error](err); ok {
		return &httpError{status: qe.Status, msg: qe.Message}
	}
	retry := http.Header{"Retry-After": {"5"}}
	switch {
	case errors.Is(err, sources.ErrNotFound):
		return &httpError{status: http.StatusNotFound, msg: msgNotFound, err: err}
	case errors.Is(err, sources.ErrCursor):
		return &httpError{status: http.StatusBadRequest, msg: msgCursor, err: err}
	case errors.Is(err, sources.ErrInvalid):
		return &httpError{status: http.StatusBadRequest, msg: msgRejected, err: err}
	case errors.Is(err, sources.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusGatewayTimeout, msg: msgTimeout, err: err, header: retry}
	case errors.Is(err, sources.ErrUnavailable), errors.Is(err, sources.ErrPartial):
		return &httpError{status: http.StatusServiceUnavailable, msg: msgUnavailable, err: err, header: retry}
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this, the log does.
		return &httpError{status: 499, msg: "client closed request", err: err}
	}
	return &httpError{status: http.StatusInternalServerError, msg: msgInternal, err: err}
}

// errorBody is the API's error envelope:
// {"_status":"ERR","_error":{"code":N,"message":"..."}}.
func errorBody(status int, msg string) []byte {
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"_status":"ERR","_error":{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = codec.AppendJSONString(b, msg)
	return append(b, "}}"...)
}

// writeError writes err in the error envelope and records it for the
// access log, which logs it once.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	he := errorOf(err)
	if info := infoOf(w); info != nil {
		info.err = err
	}
	h := w.Header()
	for k, v := range he.header {
		h[k] = v
	}
	body := errorBody(he.status, he.msg)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	h.Del("ETag")
	h.Del("Last-Modified")
	w.WriteHeader(he.status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
