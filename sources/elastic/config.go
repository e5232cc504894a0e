package elastic

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"
	"github.com/elastic/go-elasticsearch/v8"
)

// DefaultTimeout bounds each request when no timeout is configured.
const DefaultTimeout = 5 * time.Second

// DefaultURL is where Elasticsearch is looked for when no URL is given.
const DefaultURL = "http://localhost:9200"

// maxConnsPerHost caps the connections to each Elasticsearch node: the
// search backend's bulkhead. Requests beyond it wait for a connection
// (within their deadline) instead of piling more load on a slow cluster.
const maxConnsPerHost = 64

// Config returns the client settings for an edge in front of the
// Elasticsearch at url (ELASTICSEARCH_URL; several nodes separated by
// commas; user:password@ in a URL is sent as basic auth). timeout is the
// per-request budget (0 means DefaultTimeout); the transport's own
// timeouts fit inside it.
//
// The settings make the v8 client work against Elasticsearch 8.x, 7.17
// and 7.10 alike (see the package documentation): no compatibility
// headers, whatever ELASTIC_CLIENT_APIVERSIONING says, and the client's
// product check, which 7.14+ passes with its header and 7.0 to 7.13 by
// the 7.x client's GET / check, made once per Config. Retries: at most one, on 502, 503 and 504 and
// on connection failures, never after a timeout or a cancellation.
// Request bodies are gzipped; responses are asked for uncompressed: a
// walk's page is megabytes of JSON, and compressing it costs the node and
// us more CPU than the bytes cost a datacenter link. Nothing dials until the first request,
// so a client built from this works when Elasticsearch is down at start.
func Config(url string, timeout time.Duration) elasticsearch.Config {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var addrs []string
	for a := range strings.SplitSeq(url, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		addrs = []string{DefaultURL}
	}
	return elasticsearch.Config{
		Addresses:     addrs,
		Transport:     newTransport(timeout),
		RetryOnStatus: []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout},
		MaxRetries:    1,
		RetryOnError:  retryOnError,
		// gzip request bodies (small: responses are not asked gzipped,
		// newTransport).
		CompressRequestBody: true,
		// Never send compatible-with=8: 7.17 refuses it.
		EnableCompatibilityMode: false,
		Interceptors:            []elastictransport.InterceptorFunc{plainJSON, (&legacyProduct{}).intercept},
	}
}

// newTransport is an HTTP transport whose every phase is bounded: a dead
// host fails at dial, a stuck one at the response headers, so a request
// never outlives its budget even if a caller forgot a deadline.
func newTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   min(timeout, 2*time.Second),
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout:   min(timeout, 3*time.Second),
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		// No Accept-Encoding: gzip (see Config).
		DisableCompression:  true,
		MaxIdleConns:        maxConnsPerHost,
		MaxIdleConnsPerHost: maxConnsPerHost,
		MaxConnsPerHost:     maxConnsPerHost,
	}
}

// retryOnError allows the one retry after a connection failure (the next
// node, or the same one after a reset), but not after a timeout, which
// would double the wait, nor after the caller gave up.
func retryOnError(req *http.Request, err error) bool {
	return req.Context().Err() == nil && !isTimeout(err)
}

// compatMediaType is how a compatibility-mode media type starts.
const compatMediaType = "application/vnd.elasticsearch+"

// plainJSON replaces versioned media types with application/json. The
// client sends "application/vnd.elasticsearch+json;compatible-with=8" when
// ELASTIC_CLIENT_APIVERSIONING=true is in the environment (it reads the
// variable itself); Elasticsearch 7.17 answers that with 400
// media_type_header_exception. Plain JSON means "the server's own
// version" to both 7.17 and 8.x, and the bodies we send and read are the
// same in both.
func plainJSON(next elastictransport.RoundTripFunc) elastictransport.RoundTripFunc {
	return func(req *http.Request) (*http.Response, error) {
		for _, h := range [...]string{"Accept", "Content-Type"} {
			if strings.HasPrefix(req.Header.Get(h), compatMediaType) {
				req.Header.Set(h, "application/json")
			}
		}
		return next(req)
	}
}
