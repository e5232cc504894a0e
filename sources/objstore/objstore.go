package objstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// Defaults for the zero Options.
const (
	DefaultURLLifetime = 15 * time.Minute
	DefaultTimeout     = 5 * time.Second
	// MaxURLLifetime is the longest lifetime SigV4 presigned URLs may have.
	MaxURLLifetime = 7 * 24 * time.Hour
)

// bucketMemo is how long a successful bucket check lets a missing object
// be reported as not found without checking the bucket again.
const bucketMemo = time.Minute

// Metric labels: prodapi_source_queries_total{backend="s3",resource="assets",op="asset"},
// and prodapi_source_errors_total{backend="s3",resource="assets",kind}.
const (
	metricBackend  = "s3"
	metricResource = "assets"
	metricOp       = "asset"
)

// Options are the knobs of a Store; the zero value works.
type Options struct {
	Bucket      string        // OBJSTORE_CONTAINER_NAME
	Prefix      string        // OBJSTORE_S3_SUBFOLDER, already normalised ("" = none)
	URLLifetime time.Duration // presigned URL lifetime; 0 means DefaultURLLifetime, capped at MaxURLLifetime
	Timeout     time.Duration // per Asset call (all S3 requests and retries); 0 means DefaultTimeout
	// Queries counts one query (backend "s3", resource "assets", op
	// "asset") per Asset call that reaches S3, and its failure. Nil
	// counts nothing.
	Queries *metrics.Queries
	Logger  *slog.Logger // nil: discard
	// Now is the clock presigned URLs are signed with and expire by; nil
	// means time.Now.
	Now func() time.Time
}

// A Store finds media in an S3 bucket and answers with presigned GET URLs.
// It satisfies sources.AssetStore and is safe for concurrent use.
type Store struct {
	client  *s3.Client
	presign *s3.PresignClient
	signer  *v4.Signer
	opts    Options
	// bucketOK is when (unix nanoseconds on opts.Now) the bucket was last
	// seen to exist; 0 for never.
	bucketOK atomic.Int64
}

var _ sources.AssetStore = (*Store)(nil)

// New returns a Store reading opts.Bucket through client (see NewClient).
func New(client *s3.Client, opts Options) *Store {
	if opts.URLLifetime <= 0 {
		opts.URLLifetime = DefaultURLLifetime
	}
	opts.URLLifetime = min(opts.URLLifetime, MaxURLLifetime)
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Prefix = strings.Trim(opts.Prefix, "/")
	opts.Queries.Declare(metricBackend, metricResource)
	return &Store{
		client: client,
		// A plain URL: no x-amz-checksum-mode, which the SDK adds by
		// default and a browser following the redirect has no use for.
		presign: s3.NewPresignClient(client, s3.WithPresignClientFromClientOptions(func(o *s3.Options) {
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		})),
		// As the S3 client's own presigner: S3 keys are escaped once,
		// by the serializer, never again by the signer.
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }),
		opts:   opts,
	}
}

// errCallTimeout is the cause of a context that hit Options.Timeout.
var errCallTimeout = errors.New("objstore: call timed out")

// Asset finds the object of mediaID (see the package doc for the key) and
// returns a presigned GET URL for it, valid for Options.URLLifetime, with
// the object's metadata. Errors wrap sources.ErrNotFound (no such
// object), sources.ErrTimeout (Options.Timeout passed),
// sources.ErrUnavailable (anything else S3 or the network said: denied,
// missing bucket, 5xx, refused connections), or are ctx's error. They
// carry S3's detail as text for logs, never an S3 type.
func (s *Store) Asset(ctx context.Context, mediaID string) (_ *sources.Asset, err error) {
	key, name, ok := ObjectKey(s.opts.Prefix, mediaID)
	if !ok {
		return nil, fmt.Errorf("objstore: asset %q: %w", mediaID, sources.ErrNotFound)
	}
	done := s.opts.Queries.Start(metricBackend, metricResource, metricOp)
	defer func() { done(sources.FailureKind(err)) }()
	cctx, cancel := context.WithTimeoutCause(ctx, s.opts.Timeout, errCallTimeout)
	defer cancel()

	head, err := s.client.HeadObject(cctx, &s3.HeadObjectInput{Bucket: &s.opts.Bucket, Key: &key})
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			err = s.checkBucket(cctx)
			if err == nil {
				return nil, fmt.Errorf("objstore: asset %q: %w", key, sources.ErrNotFound)
			}
		}
		return nil, s.translate(ctx, cctx, "head "+key, err)
	}

	a := &sources.Asset{
		ContentType: aws.ToString(head.ContentType),
		Size:        aws.ToInt64(head.ContentLength),
		MD5:         strings.Trim(aws.ToString(head.ETag), `"`),
		Modified:    aws.ToTime(head.LastModified).UTC(),
		Filename:    name,
	}
	if f := head.Metadata["filename"]; f != "" {
		// Superdesk stores the uploaded file's (sanitised) name there.
		a.Filename = f
	}

	signedAt := s.opts.Now()
	in := &s3.GetObjectInput{Bucket: &s.opts.Bucket, Key: &key}
	if d := disposition(a.ContentType, a.Filename); d != "" {
		in.ResponseContentDisposition = &d
	}
	req, err := s.presign.PresignGetObject(cctx, in, func(o *s3.PresignOptions) {
		o.Expires = s.opts.URLLifetime
		o.Presigner = fixedTimePresigner{signer: s.signer, at: signedAt}
	})
	if err != nil {
		return nil, s.translate(ctx, cctx, "presign "+key, err)
	}
	a.Redirect = req.URL
	a.Expires = signedAt.Add(s.opts.URLLifetime)
	if exp, ok := s.credentialsExpiry(cctx); ok && exp.Before(a.Expires) {
		// Temporary credentials (a role, web identity): the URL dies
		// with the session that signed it.
		a.Expires = exp
	}
	s.opts.Logger.DebugContext(ctx, "presigned asset", "key", key, "expires", a.Expires)
	return a, nil
}

// Ping asks S3 for the bucket (HeadBucket), for `prodapi check`: nil
// when it exists and the credentials may read it; otherwise an error
// wrapping sources.ErrUnavailable (missing, denied, unreachable) or
// sources.ErrTimeout, with S3's detail as text.
func (s *Store) Ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeoutCause(ctx, s.opts.Timeout, errCallTimeout)
	defer cancel()
	_, err := s.client.HeadBucket(cctx, &s3.HeadBucketInput{Bucket: &s.opts.Bucket})
	if err != nil {
		if statusOf(err) == http.StatusNotFound {
			err = fmt.Errorf("bucket %q does not exist: %w", s.opts.Bucket, err)
		}
		return s.translate(ctx, cctx, "head bucket "+s.opts.Bucket, err)
	}
	return nil
}

// credentialsExpiry is when the credentials the URL was just signed with
// expire, if they do. The SDK caches them, so this makes no request.
func (s *Store) credentialsExpiry(ctx context.Context) (time.Time, bool) {
	p := s.client.Options().Credentials
	if p == nil {
		return time.Time{}, false
	}
	c, err := p.Retrieve(ctx)
	if err != nil || !c.CanExpire {
		return time.Time{}, false
	}
	return c.Expires, true
}

// checkBucket tells a missing object (nil) from a missing bucket, which
// answers HeadObject with the same bodiless 404: a misconfiguration,
// reported as unavailable. A success is remembered for bucketMemo, so a
// flood of missing ids costs one request each.
func (s *Store) checkBucket(ctx context.Context) error {
	now := s.opts.Now().UnixNano()
	if last := s.bucketOK.Load(); last != 0 && now-last >= 0 && now-last < int64(bucketMemo) {
		return nil
	}
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.opts.Bucket}); err != nil {
		if statusOf(err) == http.StatusNotFound {
			return fmt.Errorf("bucket %q does not exist: %w", s.opts.Bucket, err)
		}
		return err
	}
	s.bucketOK.Store(now)
	return nil
}

// translate maps an S3 SDK error to a sources sentinel, keeping the SDK's
// text (not its types) for the logs. ctx is the caller's context, cctx
// the one bounded by Options.Timeout.
func (s *Store) translate(ctx, cctx context.Context, what string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("objstore: %s: %w", what, ctx.Err())
	case errors.Is(context.Cause(cctx), errCallTimeout) || isNetTimeout(err):
		return fmt.Errorf("objstore: %s: %w: %v", what, sources.ErrTimeout, err)
	}
	return fmt.Errorf("objstore: %s: %w: %v", what, sources.ErrUnavailable, err)
}

// statusOf is the HTTP status of an S3 answer, 0 if S3 did not answer.
func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// disposition is the Content-Disposition S3 is asked to serve the object
// with: "" (S3's own, normally none: inline) for images, audio and video;
// "attachment" for everything else, so HTML, SVG, scripts and unknown
// types uploaded to the newsroom are downloaded, never rendered on the
// storage origin.
func disposition(contentType, filename string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil && mt != "image/svg+xml" {
		switch kind, _, _ := strings.Cut(mt, "/"); kind {
		case "image", "audio", "video":
			return ""
		}
	}
	if base := path.Base(filename); base != "." && base != "/" {
		if d := mime.FormatMediaType("attachment", map[string]string{"filename": base}); d != "" {
			return d
		}
	}
	return "attachment"
}

// fixedTimePresigner signs at a time of our clock instead of the SDK's
// global one, so Asset.Expires and the URL agree and tests can move time.
type fixedTimePresigner struct {
	signer *v4.Signer
	at     time.Time
}

func (p fixedTimePresigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request,
	payloadHash, service, region string, _ time.Time, optFns ...func(*v4.SignerOptions),
) (string, http.Header, error) {
	return p.signer.PresignHTTP(ctx, creds, r, payloadHash, service, region, p.at, optFns...)
}
