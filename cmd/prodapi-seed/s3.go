package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources/objstore"
)

func seedS3(ctx context.Context, cfg config.Config, room *corpus, w waiter, l loader) error {
	o := cfg.ObjStore
	client, err := objstore.NewClient(ctx, o.AccessKeyID, string(o.SecretAccessKey), o.Region, o.EndpointURL)
	if err != nil {
		return fmt.Errorf("seed: s3: %w", err)
	}
	return loadS3(ctx, client, o, room, w, l)
}

// loadS3 puts every asset of room into the bucket, creating it if needed.
func loadS3(ctx context.Context, client *s3.Client, o config.ObjStore, room *corpus, w waiter, l loader) error {
	bucket := o.Container
	exists := false
	// Any answer from the server means it is up, even "no such bucket"
	// or "denied" (which creating the bucket then reports).
	err := w.until(ctx, "s3", func(ctx context.Context) error {
		_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
		if err == nil {
			exists = true
			return nil
		}
		if status(err) != 0 {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if !exists {
		in := &s3.CreateBucketInput{Bucket: &bucket}
		if o.Region != "" && o.Region != "us-east-1" {
			in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(o.Region)}
		}
		err := l.within(ctx, func(ctx context.Context) error { _, err := client.CreateBucket(ctx, in); return err })
		var owned *types.BucketAlreadyOwnedByYou
		if err != nil && !errors.As(err, &owned) {
			return fmt.Errorf("seed: s3: creating bucket %s: %w", bucket, err)
		}
		l.logger.Info("s3: bucket created", "bucket", bucket)
	}
	for _, a := range room.assets {
		// The key prodapi asks S3 for, by objstore's own rule.
		key, _, ok := objstore.ObjectKey(o.Subfolder, a.name)
		if !ok {
			return fmt.Errorf("seed: s3: no object can have the media id %q", a.name)
		}
		err := l.within(ctx, func(ctx context.Context) error {
			_, err := client.PutObject(ctx, &s3.PutObjectInput{
				Bucket:        &bucket,
				Key:           &key,
				Body:          bytes.NewReader(a.data),
				ContentLength: aws.Int64(int64(len(a.data))),
				ContentType:   &a.contentType,
				// Superdesk's Amazon storage keeps the file name here; prodapi
				// reports it.
				Metadata: map[string]string{"filename": a.baseName()},
			}, func(o *s3.Options) {
				// A plain body with Content-Length, which every S3-compatible
				// store takes, rather than the SDK's default aws-chunked body
				// with a trailing checksum.
				o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("seed: s3: putting %s: %w", key, err)
		}
	}
	l.logger.Info("s3: objects loaded", "bucket", bucket, "prefix", o.Subfolder, "objects", len(room.assets))
	return nil
}

// status is the HTTP status of an S3 answer carried by err, or 0 when
// err is not an answer (a refused connection, a timeout).
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	return 0
}
