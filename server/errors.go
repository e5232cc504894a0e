package server

import (
	"errors"
	"net/http"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
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

// errorOf maps any error to what the client sees. It is the one place that
// decides statuses for failures: an answer a handler chose (an httperr.Error,
// a query.Error) as it is; any other by its kind (sources.Classify), in
// the words of kindMessages, with Retry-After on a 503 or 504.
func errorOf(err error) *httperr.Error {
	if he, ok := errors.AsType[*httperr.Error](err); ok {
		return he
	}
	if qe, ok := errors.AsType[*query.Error](err); ok {
		return &httperr.Error{Status: qe.Status, Msg: qe.Message}
	}
	kind, status := sources.Classify(err)
	he := &httperr.Error{Status: status, Msg: msgInternal, Err: err}
	if msg, ok := kindMessages[kind]; ok {
		he.Msg = msg
	}
	if status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout {
		he.Header = http.Header{"Retry-After": {"5"}}
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

// writeError writes err in the error envelope and records it for the
// access log, which logs it once.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if info := infoOf(w); info != nil {
		info.err = err
	}
	httperr.Write(w, r, errorOf(err))
}
