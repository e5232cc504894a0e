package objstore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// defaultRegion is boto3's, which the original fell back to.
const defaultRegion = "us-east-1"

// Retries: one quick retry of a throttled, 5xx or dropped request; the
// caller's Options.Timeout bounds the whole call anyway.
const (
	maxAttempts = 2
	maxBackoff  = 200 * time.Millisecond
)

// NewClient builds the S3 client from the OBJSTORE_* settings. It is the
// only place that touches AWS configuration: static credentials when
// accessKey is set (otherwise the SDK's default chain: environment,
// shared files, web identity, container or instance roles), the region
// (us-east-1 when empty), and for a custom endpoint (MinIO, Ceph, R2)
// path-style addressing, so bucket names need no DNS. Requests are signed
// with SigV4. It makes no request; a wrong key or endpoint shows on the
// first Asset call as sources.ErrUnavailable.
func NewClient(ctx context.Context, accessKey, secretKey, region, endpoint string) (*s3.Client, error) {
	if region == "" {
		region = defaultRegion
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.MaxBackoff = maxBackoff
			})
		}),
	}
	if accessKey != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: aws config: %w", err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	}), nil
}
