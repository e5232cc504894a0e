package objstore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/prodapi/prodapi/test/testkit"
)

const (
	testAccessKey = "AKIDPRODAPITEST"
	testSecretKey = "prodapi-test-secret"
	testRegion    = "us-east-1"
	testBucket    = "superdesk"
	amzDateLayout = "20060102T150405Z"
)

// A fakeS3 is gofakes3's memory backend behind httptest, fronted by a
// SigV4 check, which gofakes3 does not make: header-signed requests must
// carry a valid signature by testAccessKey/testSecretKey, and presigned
// URLs a valid signature and an expiry not passed on the fake's clock.
type fakeS3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server
	clock   *testkit.Clock
	signer  *v4.Signer

	mu       sync.Mutex
	requests []string // "METHOD /path" of every request, in order
}

func newFakeS3(t testing.TB, clock *testkit.Clock) *fakeS3 {
	t.Helper()
	f := &fakeS3{
		backend: s3mem.New(),
		clock:   clock,
		signer:  v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }),
	}
	if err := f.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	s3 := gofakes3.New(f.backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if err := f.authorize(r); err != nil {
			writeS3Error(w, r, http.StatusForbidden, err)
			return
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// put stores an object directly in the backend.
func (f *fakeS3) put(t testing.TB, key, contentType string, modified time.Time, body []byte, meta map[string]string) {
	t.Helper()
	m := map[string]string{
		"Content-Type":  contentType,
		"Last-Modified": modified.UTC().Format(http.TimeFormat),
	}
	for k, v := range meta {
		m[k] = v
	}
	if _, err := f.backend.PutObject(testBucket, key, m, bytes.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}
}

// count reports how many requests had this method and path.
func (f *fakeS3) count(method, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r == method+" "+path {
			n++
		}
	}
	return n
}

// errSignature and errExpired are the fake's refusals (403).
type s3Error struct{ code, message string }

func (e *s3Error) Error() string { return e.code + ": " + e.message }

func writeS3Error(w http.ResponseWriter, r *http.Request, status int, err error) {
	code, msg := "AccessDenied", err.Error()
	var se *s3Error
	if errors.As(err, &se) {
		code, msg = se.code, se.message
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
	}
}

func (f *fakeS3) authorize(r *http.Request) error {
	if r.URL.Query().Has("X-Amz-Signature") {
		return f.verifyPresigned(r)
	}
	return f.verifySigned(r)
}

var testCreds = aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey}

// verifySigned checks a request signed in its Authorization header by
// signing a copy of it (same signed headers, same time) and comparing.
func (f *fakeS3) verifySigned(r *http.Request) error {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
	if !ok {
		return &s3Error{"AccessDenied", "no SigV4 authorization"}
	}
	fields := map[string]string{}
	for kv := range strings.SplitSeq(auth, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = v
	}
	if !strings.HasPrefix(fields["Credential"], testAccessKey+"/") {
		return &s3Error{"InvalidAccessKeyId", "unknown access key"}
	}
	at, err := time.Parse(amzDateLayout, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return &s3Error{"AccessDenied", "bad X-Amz-Date"}
	}
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for h := range strings.SplitSeq(fields["SignedHeaders"], ";") {
		if h != "host" {
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	if err := f.signer.SignHTTP(r.Context(), testCreds, req, r.Header.Get("X-Amz-Content-Sha256"), "s3", testRegion, at); err != nil {
		return err
	}
	_, want, _ := strings.Cut(req.Header.Get("Authorization"), "Signature=")
	if !hmac.Equal([]byte(fields["Signature"]), []byte(want)) {
		return &s3Error{"SignatureDoesNotMatch", "signature does not match"}
	}
	return nil
}

// verifyPresigned checks a presigned URL: not expired on the fake's clock,
// and signed by the test key (re-presigned at the same time and compared).
func (f *fakeS3) verifyPresigned(r *http.Request) error {
	q := r.URL.Query()
	if !strings.HasPrefix(q.Get("X-Amz-Credential"), testAccessKey+"/") {
		return &s3Error{"InvalidAccessKeyId", "unknown access key"}
	}
	at, err := time.Parse(amzDateLayout, q.Get("X-Amz-Date"))
	if err != nil {
		return &s3Error{"AccessDenied", "bad X-Amz-Date"}
	}
	secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || secs <= 0 || secs > 7*24*3600 {
		return &s3Error{"AuthorizationQueryParametersError", "bad X-Amz-Expires"}
	}
	if f.clock.Now().After(at.Add(time.Duration(secs) * time.Second)) {
		return &s3Error{"AccessDenied", "Request has expired"}
	}
	got := q.Get("X-Amz-Signature")
	q.Del("X-Amz-Signature")
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q.Encode()}
	req := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for h := range strings.SplitSeq(q.Get("X-Amz-SignedHeaders"), ";") {
		if h != "host" {
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	signed, _, err := f.signer.PresignHTTP(context.Background(), testCreds, req, "UNSIGNED-PAYLOAD", "s3", testRegion, at)
	if err != nil {
		return err
	}
	su, err := url.Parse(signed)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(got), []byte(su.Query().Get("X-Amz-Signature"))) {
		return &s3Error{"SignatureDoesNotMatch", "signature does not match"}
	}
	return nil
}
