package server

import (
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
	msgGone             = "The requested URL is no longer available on this server and there is no forwarding address. If you followed a link from a foreign page, please contact the author of this page."
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

func (e *httpError) HTTPStatus() int { return e.status }

// errorOf maps any error to what the client sees. It is the one place that
// decides statuses for failures: an answer a handler chose (an httpError,
// a query.Error) as it is; any other by its kind (sources.Classify), in
// the words of kindMessages, with Retry-After on a 503 or 504.
func errorOf(err error) *httpError {
	if he, ok := errors.AsType[*httpError](err); ok {
		return he
	}
	if qe, ok := errors.AsType[*query.Error](err); ok {
		return &httpError{status: qe.Status, msg: qe.Message}
	}
	kind, status := sources.Classify(err)
	he := &httpError{status: status, msg: msgInternal, err: err}
	if msg, ok := kindMessages[kind]; ok {
		he.msg = msg
	}
	if status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout {
		he.header = http.Header{"Retry-After": {"5"}}
	}
	return he
}

// kindMessages are the words a client reads for each kind of failure
// that brings none of its own (every kind but KindNone and KindRefused).
var kindMessages = map[sources.Kind]string{
	sources.KindNotFound:    msgNotFound,
	sources.KindExpired:     msgGone,
	sources.KindCursor:      msgCursor,
	sources.KindInvalid:     msgRejected,
	sources.KindTimeout:     msgTimeout,
	sources.KindUnavailable: msgUnavailable,
	sources.KindCanceled:    "client closed request", // the client went away; nobody reads this, the log does
	sources.KindInternal:    msgInternal,
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
