package elastic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/elastic/elastic-transport-go/v8/elastictransport"

	"github.com/prodapi/prodapi/sources"
)

// productHeader is the header Elasticsearch sends on every answer since
// 7.14, and the v8 client's product check insists on.
const (
	productHeader = "X-Elastic-Product"
	productName   = "Elasticsearch"
	tagline       = "You Know, for Search"
)

// maxInfoBody bounds the GET / answer the product check reads.
const maxInfoBody = 64 << 10

// legacyProduct lets the v8 client talk to Elasticsearch 7.0 to 7.13,
// which do not send X-Elastic-Product: the client refuses the first
// successful answer without it. The first such answer makes the
// interceptor ask the node for GET / and check it as the 7.x client did
// (tagline "You Know, for Search", version 7.0 to 7.13, build flavor
// default or oss); once a node passed, answers without the header get it.
// A node of 7.14 or later without the header, or anything else at the
// URL (another product, a proxy's page), is left to the client to
// refuse. One interceptor per Config, so the check runs once per client,
// like the client's own; a failed check is tried again on the next answer.
type legacyProduct struct {
	mu       sync.Mutex // held during a check: one GET / at a time
	verified bool
}

func (p *legacyProduct) intercept(next elastictransport.RoundTripFunc) elastictransport.RoundTripFunc {
	return func(req *http.Request) (*http.Response, error) {
		res, err := next(req)
		if err != nil || res.StatusCode < 200 || res.StatusCode > 299 {
			return res, err
		}
		if res.Header.Get(productHeader) == productName {
			return res, nil
		}
		if req.Method == http.MethodGet && req.URL.Path == "/" {
			// The answer is the info the check reads (Ping): no second GET /.
			body, err := io.ReadAll(io.LimitReader(res.Body, maxInfoBody))
			res.Body.Close()
			if err != nil {
				return nil, err
			}
			res.Body = io.NopCloser(bytes.NewReader(body))
			if p.checkInfo(body) {
				res.Header.Set(productHeader, productName)
			}
			return res, nil
		}
		if p.check(req, next) {
			res.Header.Set(productHeader, productName)
		}
		return res, nil
	}
}

// checkInfo records a GET / answer as checked when it passes.
func (p *legacyProduct) checkInfo(body []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.verified {
		p.verified = legacyElasticsearch(body) == nil
	}
	return p.verified
}

// check reports whether the node that answered req is a genuine
// Elasticsearch older than 7.14, asking it once per client.
func (p *legacyProduct) check(req *http.Request, next elastictransport.RoundTripFunc) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verified {
		return true
	}
	info := req.Clone(req.Context())
	info.Method = http.MethodGet
	info.URL.Path, info.URL.RawPath, info.URL.RawQuery = "/", "", ""
	info.Body, info.GetBody, info.ContentLength = nil, nil, 0
	for _, h := range [...]string{"Content-Type", "Content-Encoding", "Content-Length", "Accept-Encoding"} {
		info.Header.Del(h) // Accept-Encoding: let net/http ask for gzip and undo it
	}
	res, err := next(info)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxInfoBody))
	if err != nil {
		return false
	}
	p.verified = legacyElasticsearch(body) == nil
	return p.verified
}

// legacyElasticsearch checks a GET / answer the way the 7.x client did
// for servers older than 7.14.
func legacyElasticsearch(body []byte) error {
	var info struct {
		Tagline string `json:"tagline"`
		Version struct {
			Number      string `json:"number"`
			BuildFlavor string `json:"build_flavor"`
		} `json:"version"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return fmt.Errorf("GET / is not Elasticsearch's info: %w", err)
	}
	if info.Tagline != tagline {
		return fmt.Errorf("tagline %q is not Elasticsearch's", info.Tagline)
	}
	major, minor, ok := sources.MajorMinor(info.Version.Number)
	if !ok || major != 7 || minor >= 14 {
		return fmt.Errorf("version %q without the %s header", info.Version.Number, productHeader)
	}
	if f := info.Version.BuildFlavor; f != "default" && f != "oss" {
		return fmt.Errorf("build flavor %q", f)
	}
	return nil
}
