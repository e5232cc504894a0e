package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

var (
	t0       = time.Date(2024, 1, 15, 12, 1, 12, 0, time.UTC) // the Store's and the fake's "now"
	uploaded = time.Date(2024, 1, 15, 11, 0, 0, 0, time.UTC)  // objects' Last-Modified
)

// newTestStore returns a Store on the fake, built with NewClient as
// cmd/prodapi builds it, and its query counter.
func newTestStore(t testing.TB, endpoint string, opts Options) (*Store, *metrics.Queries) {
	t.Helper()
	return newTestStoreKeys(t, endpoint, testAccessKey, testSecretKey, opts)
}

func newTestStoreKeys(t testing.TB, endpoint, accessKey, secretKey string, opts Options) (*Store, *metrics.Queries) {
	t.Helper()
	client, err := NewClient(context.Background(), accessKey, secretKey, testRegion, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Bucket == "" {
		opts.Bucket = testBucket
	}
	queries := metrics.NewMetrics().SourceQueries()
	opts.Queries = queries
	return New(client, opts), queries
}

// fetch GETs a presigned URL with a plain client, as a browser following
// the redirect would.
func fetch(t *testing.T, rawURL string) (status int, header http.Header, body []byte) {
	t.Helper()
	res, err := http.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err = io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, body
}

func md5hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

func TestAssetRedirect(t *testing.T) {
	clock := testkit.NewClock(t0)
	fake := newFakeS3(t, clock)
	const id = "5d553c333031e2855a2e5662"
	jpeg := []byte("\xff\xd8\xff\xe0 a small jpeg \xff\xd9")
	html := []byte("<script>alert(1)</script>")
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)
	fake.put(t, id, "image/jpeg", uploaded, jpeg, nil)
	fake.put(t, "sub/folder/"+id, "image/png", uploaded, jpeg[:5], nil)
	fake.put(t, "20240115120112/photo.jpg", "image/jpeg", uploaded, jpeg[1:], map[string]string{"X-Amz-Meta-Filename": "Photo Original.JPG"})
	fake.put(t, "2024011512/my photo+1.jpg", "image/jpeg", uploaded, jpeg[2:], nil)
	fake.put(t, "20240115120112/page.html", "text/html; charset=utf-8", uploaded, html, nil)
	fake.put(t, "20240115120112/logo.svg", "image/svg+xml", uploaded, svg, nil)

	for _, tc := range []struct {
		name, prefix, mediaID string
		body                  []byte
		want                  sources.Asset // without Redirect
		wantDisposition       string
	}{
		{
			name: "hex id with extension", mediaID: id + ".jpg", body: jpeg,
			want: sources.Asset{ContentType: "image/jpeg", Size: int64(len(jpeg)), MD5: md5hex(jpeg), Modified: uploaded, Filename: id},
		},
		{
			name: "hex id under a prefix", prefix: "/sub/folder/", mediaID: id + ".png", body: jpeg[:5],
			want: sources.Asset{ContentType: "image/png", Size: 5, MD5: md5hex(jpeg[:5]), Modified: uploaded, Filename: id},
		},
		{
			name: "S3 id, filename from metadata", mediaID: "20240115120112/photo.jpg", body: jpeg[1:],
			want: sources.Asset{ContentType: "image/jpeg", Size: int64(len(jpeg) - 1), MD5: md5hex(jpeg[1:]), Modified: uploaded, Filename: "Photo Original.JPG"},
		},
		{
			name: "S3 id with unsafe characters removed", mediaID: "20240115120112/{photo}.jpg", body: jpeg[1:],
			want: sources.Asset{ContentType: "image/jpeg", Size: int64(len(jpeg) - 1), MD5: md5hex(jpeg[1:]), Modified: uploaded, Filename: "Photo Original.JPG"},
		},
		{
			name: "key needing escapes", mediaID: "2024011512/my photo+1.jpg", body: jpeg[2:],
			want: sources.Asset{ContentType: "image/jpeg", Size: int64(len(jpeg) - 2), MD5: md5hex(jpeg[2:]), Modified: uploaded, Filename: "2024011512/my photo+1.jpg"},
		},
		{
			name: "HTML is an attachment", mediaID: "20240115120112/page.html", body: html,
			want:            sources.Asset{ContentType: "text/html; charset=utf-8", Size: int64(len(html)), MD5: md5hex(html), Modified: uploaded, Filename: "20240115120112/page.html"},
			wantDisposition: "attachment; filename=page.html",
		},
		{
			name: "SVG is an attachment", mediaID: "20240115120112/logo.svg", body: svg,
			want:            sources.Asset{ContentType: "image/svg+xml", Size: int64(len(svg)), MD5: md5hex(svg), Modified: uploaded, Filename: "20240115120112/logo.svg"},
			wantDisposition: "attachment; filename=logo.svg",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock.Set(t0)
			s, queries := newTestStore(t, fake.srv.URL, Options{Prefix: tc.prefix, Now: clock.Now})
			got, err := s.Asset(context.Background(), tc.mediaID)
			if err != nil {
				t.Fatalf("Asset(%q): %v", tc.mediaID, err)
			}
			want := tc.want
			want.Expires = t0.Add(DefaultURLLifetime)
			if diff := cmp.Diff(*got, want, cmpopts.IgnoreFields(sources.Asset{}, "Redirect")); diff != "" {
				t.Errorf("Asset(%q) (-got +want):\n%s", tc.mediaID, diff)
			}
			if n := queries.Value("s3", "assets", "asset"); n != 1 {
				t.Errorf("queries = %d, want 1", n)
			}

			u, err := url.Parse(got.Redirect)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := u.Query().Get("X-Amz-SignedHeaders"), "host"; got != want {
				t.Errorf("signed headers %q, want %q (a plain GET sends no others)", got, want)
			}
			var params []string
			for k := range u.Query() {
				params = append(params, k)
			}
			wantParams := []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-Signature", "X-Amz-SignedHeaders", "x-id"}
			if tc.wantDisposition != "" {
				wantParams = append(wantParams, "response-content-disposition")
			}
			if diff := cmp.Diff(params, wantParams, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("URL parameters (-got +want):\n%s", diff)
			}
			if got, want := u.Path, "/"+testBucket+"/"; !strings.HasPrefix(got, want) {
				t.Errorf("URL path %q, want path-style %q...", got, want)
			}
			clock.Set(t0.Add(time.Minute))
			status, header, body := fetch(t, got.Redirect)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", got.Redirect, status, body)
			}
			if diff := cmp.Diff(body, tc.body); diff != "" {
				t.Errorf("body (-got +want):\n%s", diff)
			}
			if got := header.Get("Content-Disposition"); got != tc.wantDisposition {
				t.Errorf("Content-Disposition %q, want %q", got, tc.wantDisposition)
			}
		})
	}
}

func TestAssetURLExpires(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lifetime    time.Duration
		wantSeconds string
		wantLife    time.Duration
	}{
		{"default", 0, "900", DefaultURLLifetime},
		{"set", 90 * time.Second, "90", 90 * time.Second},
		{"capped at 7 days", 30 * 24 * time.Hour, "604800", MaxURLLifetime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			fake := newFakeS3(t, clock)
			fake.put(t, "20240115120112/photo.jpg", "image/jpeg", uploaded, []byte("jpeg"), nil)
			s, _ := newTestStore(t, fake.srv.URL, Options{URLLifetime: tc.lifetime, Now: clock.Now})
			a, err := s.Asset(context.Background(), "20240115120112/photo.jpg")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := a.Expires, t0.Add(tc.wantLife); !got.Equal(want) {
				t.Errorf("Expires %v, want %v", got, want)
			}
			u, _ := url.Parse(a.Redirect)
			if got := u.Query().Get("X-Amz-Expires"); got != tc.wantSeconds {
				t.Errorf("X-Amz-Expires %q, want %q", got, tc.wantSeconds)
			}
			if got, want := u.Query().Get("X-Amz-Date"), t0.Format(amzDateLayout); got != want {
				t.Errorf("X-Amz-Date %q, want %q (signed on the injected clock)", got, want)
			}
			for _, step := range []struct {
				at   time.Time
				want int
			}{
				{t0, http.StatusOK},
				{a.Expires, http.StatusOK},
				{a.Expires.Add(time.Second), http.StatusForbidden},
			} {
				clock.Set(step.at)
				if status, _, body := fetch(t, a.Redirect); status != step.want {
					t.Errorf("GET at %v: %d %s, want %d", step.at, status, body, step.want)
				}
			}
		})
	}
}

func TestAssetExpiresWithCredentials(t *testing.T) {
	clock := testkit.NewClock(t0)
	fake := newFakeS3(t, clock)
	fake.put(t, "20240115120112/photo.jpg", "image/jpeg", uploaded, []byte("jpeg"), nil)
	for _, tc := range []struct {
		name      string
		credsLife time.Duration
		want      time.Time
	}{
		{"session outlives the URL", time.Hour, t0.Add(DefaultURLLifetime)},
		{"session ends first", 5 * time.Minute, t0.Add(5 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey,
					CanExpire: true, Expires: t0.Add(tc.credsLife)}, nil
			})
			client := s3.New(s3.Options{Region: testRegion, Credentials: creds, BaseEndpoint: aws.String(fake.srv.URL), UsePathStyle: true})
			a, err := New(client, Options{Bucket: testBucket, Now: clock.Now}).Asset(context.Background(), "20240115120112/photo.jpg")
			if err != nil {
				t.Fatal(err)
			}
			if !a.Expires.Equal(tc.want) {
				t.Errorf("Expires %v, want %v", a.Expires, tc.want)
			}
		})
	}
}

// leaksDriver reports whether err lets a caller reach an SDK error type.
func leaksDriver(err error) bool {
	var re *awshttp.ResponseError
	var api smithy.APIError
	var op *smithy.OperationError
	return errors.As(err, &re) || errors.As(err, &api) || errors.As(err, &op)
}

func TestAssetErrors(t *testing.T) {
	clock := testkit.NewClock(t0)
	fake := newFakeS3(t, clock)
	fake.put(t, "20240115120112/photo.jpg", "image/jpeg", uploaded, []byte("jpeg"), nil)

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeS3Error(w, r, http.StatusServiceUnavailable, &s3Error{"SlowDown", "reduce your request rate"})
	}))
	t.Cleanup(failing.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	for _, tc := range []struct {
		name, endpoint, bucket, secret, mediaID string
		want                                    error
		wantQueries                             uint64
	}{
		{name: "missing object", mediaID: "20240115120112/other.jpg", want: sources.ErrNotFound, wantQueries: 1},
		{name: "missing hex object", mediaID: "5d553c333031e2855a2e5662.jpg", want: sources.ErrNotFound, wantQueries: 1},
		{name: "id no object can have", mediaID: "{}", want: sources.ErrNotFound, wantQueries: 0},
		{name: "traversal", mediaID: "20240115120112/../photo.jpg", want: sources.ErrNotFound, wantQueries: 0},
		{name: "missing bucket", bucket: "nosuchbucket", mediaID: "20240115120112/photo.jpg", want: sources.ErrUnavailable, wantQueries: 1},
		{name: "missing bucket, missing object", bucket: "nosuchbucket", mediaID: "x.jpg", want: sources.ErrUnavailable, wantQueries: 1},
		{name: "denied: wrong secret", secret: "wrong", mediaID: "20240115120112/photo.jpg", want: sources.ErrUnavailable, wantQueries: 1},
		{name: "5xx", endpoint: failing.URL, mediaID: "20240115120112/photo.jpg", want: sources.ErrUnavailable, wantQueries: 1},
		{name: "server down", endpoint: down.URL, mediaID: "20240115120112/photo.jpg", want: sources.ErrUnavailable, wantQueries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := fake.srv.URL
			if tc.endpoint != "" {
				endpoint = tc.endpoint
			}
			secret := testSecretKey
			if tc.secret != "" {
				secret = tc.secret
			}
			s, queries := newTestStoreKeys(t, endpoint, testAccessKey, secret, Options{Bucket: tc.bucket, Now: clock.Now})
			a, err := s.Asset(context.Background(), tc.mediaID)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Asset(%q) = %+v, %v; want %v", tc.mediaID, a, err, tc.want)
			}
			if a != nil {
				t.Errorf("Asset(%q) returned %+v with an error", tc.mediaID, a)
			}
			if leaksDriver(err) {
				t.Errorf("Asset(%q) error %v exposes an SDK type", tc.mediaID, err)
			}
			if n := queries.Value("s3", "assets", "asset"); n != tc.wantQueries {
				t.Errorf("queries = %d, want %d", n, tc.wantQueries)
			}
			wantErrors := tc.wantQueries
			if tc.want == sources.ErrNotFound {
				wantErrors = 0 // an answer, not a failure
			}
			if n := queries.Errors("s3", "assets", metrics.KindUnavailable); n != wantErrors {
				t.Errorf("unavailable errors = %d, want %d", n, wantErrors)
			}
		})
	}
}

func TestAssetTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done(): // the client gave up
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // runs before slow.Close

	s, _ := newTestStore(t, slow.URL, Options{Timeout: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { // ends when Asset returns
		_, err := s.Asset(context.Background(), "20240115120112/photo.jpg")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, sources.ErrTimeout) || leaksDriver(err) {
			t.Errorf("Asset on a hung server: %v, want %v", err, sources.ErrTimeout)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Asset did not return: Options.Timeout not applied")
	}
}

func TestAssetCallerContext(t *testing.T) {
	fake := newFakeS3(t, testkit.NewClock(t0))
	fake.put(t, "20240115120112/photo.jpg", "image/jpeg", uploaded, []byte("jpeg"), nil)
	s, _ := newTestStore(t, fake.srv.URL, Options{})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Asset(ctx, "20240115120112/photo.jpg")
	if !errors.Is(err, context.Canceled) || errors.Is(err, sources.ErrUnavailable) || errors.Is(err, sources.ErrTimeout) {
		t.Errorf("Asset with a cancelled context: %v, want context.Canceled only", err)
	}
}

func TestAssetBucketCheckMemo(t *testing.T) {
	clock := testkit.NewClock(t0)
	fake := newFakeS3(t, clock)
	s, _ := newTestStore(t, fake.srv.URL, Options{Now: clock.Now})
	bucketPath := "/" + testBucket
	for i, step := range []struct {
		advance         time.Duration
		wantHeadBuckets int
	}{
		{0, 1},           // first miss checks the bucket
		{time.Second, 1}, // remembered
		{bucketMemo - 2*time.Second, 1},
		{2 * time.Second, 2}, // forgotten: checked again
		{time.Second, 2},
	} {
		clock.Set(clock.Now().Add(step.advance))
		if _, err := s.Asset(context.Background(), "missing.jpg"); !errors.Is(err, sources.ErrNotFound) {
			t.Fatalf("step %d: %v, want ErrNotFound", i, err)
		}
		if got := fake.count(http.MethodHead, bucketPath); got != step.wantHeadBuckets {
			t.Errorf("step %d: %d bucket checks, want %d", i, got, step.wantHeadBuckets)
		}
	}
}

func TestDisposition(t *testing.T) {
	for _, tc := range []struct{ contentType, filename, want string }{
		{"image/jpeg", "a.jpg", ""},
		{"IMAGE/PNG", "a.png", ""},
		{"video/mp4", "2024/v.mp4", ""},
		{"audio/mpeg; bitrate=128", "a.mp3", ""},
		{"image/svg+xml", "2024/logo.svg", "attachment; filename=logo.svg"},
		{"text/html", "2024/x.html", "attachment; filename=x.html"},
		{"application/pdf", "report final.pdf", `attachment; filename="report final.pdf"`},
		{"", "5d553c333031e2855a2e5662", "attachment; filename=5d553c333031e2855a2e5662"},
		{"garbage/", "x", "attachment; filename=x"},
		{"text/plain", "naïve.txt", "attachment; filename*=utf-8''na%C3%AFve.txt"},
		{"text/plain", "", "attachment"},
		{"text/plain", "dir/", "attachment; filename=dir"},
	} {
		if got := disposition(tc.contentType, tc.filename); got != tc.want {
			t.Errorf("disposition(%q, %q) = %q, want %q", tc.contentType, tc.filename, got, tc.want)
		}
	}
}

// Ping reads the bucket: nil when it is there and readable, unavailable
// when it is missing, denied or unreachable.
func TestPing(t *testing.T) {
	fake := newFakeS3(t, testkit.NewClock(t0))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, tc := range []struct {
		name, endpoint, bucket, secret string
		want                           error
	}{
		{name: "the bucket"},
		{name: "missing bucket", bucket: "nosuchbucket", want: sources.ErrUnavailable},
		{name: "denied", secret: "wrong", want: sources.ErrUnavailable},
		{name: "down", endpoint: down.URL, want: sources.ErrUnavailable},
	} {
		endpoint, secret := fake.srv.URL, testSecretKey
		if tc.endpoint != "" {
			endpoint = tc.endpoint
		}
		if tc.secret != "" {
			secret = tc.secret
		}
		s, _ := newTestStoreKeys(t, endpoint, testAccessKey, secret, Options{Bucket: tc.bucket})
		if err := s.Ping(context.Background()); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: Ping = %v, want %v", tc.name, err, tc.want)
		}
	}
}
