package objstore

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/prodapi/prodapi/sources"
)

// sampleAssets is the sample newsroom's media, which compose.yaml seeds
// into MinIO.
const sampleAssets = "../sandbox/sample/assets"

// TestIntegrationMinIO runs the Store against the MinIO of compose.yaml,
// seeded with sampleAssets: each "<24 hex>.<ext>" file under key
// "<24 hex>" (get_by_filename drops the extension), with the type of its
// extension.
func TestIntegrationMinIO(t *testing.T) {
	if os.Getenv("PRODAPI_INTEGRATION") == "" {
		t.Skip("set PRODAPI_INTEGRATION=1 (make integration) to run against the MinIO of compose.yaml " +
			"(http://localhost:9000, bucket superdesk)")
	}
	// compose.yaml's MinIO: where it is published, its credentials and
	// the bucket its seed job fills.
	const endpoint, accessKey, secretKey, bucket = "http://localhost:9000", "minioadmin", "minioadmin", "superdesk"
	ctx := context.Background()

	newStore := func(t *testing.T, secretKey, bucket string) *Store {
		t.Helper()
		client, err := NewClient(ctx, accessKey, secretKey, "us-east-1", endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return New(client, Options{Bucket: bucket})
	}
	s := newStore(t, secretKey, bucket)

	files, err := os.ReadDir(sampleAssets)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no files in %s", sampleAssets)
	}
	for _, f := range files {
		t.Run(f.Name(), func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(sampleAssets, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			a, err := s.Asset(ctx, f.Name())
			if errors.Is(err, sources.ErrNotFound) {
				key, _, _ := ObjectKey("", f.Name())
				t.Fatalf("Asset(%q): %v: compose must seed %s as s3://%s/%s", f.Name(), err, f.Name(), bucket, key)
			}
			if err != nil {
				t.Fatalf("Asset(%q): %v", f.Name(), err)
			}
			if a.Size != int64(len(want)) || a.MD5 != md5hex(want) {
				t.Errorf("Asset(%q) size %d md5 %s, want %d %s", f.Name(), a.Size, a.MD5, len(want), md5hex(want))
			}
			if wantType := mime.TypeByExtension(filepath.Ext(f.Name())); a.ContentType != wantType {
				t.Errorf("Asset(%q) type %q, want %q", f.Name(), a.ContentType, wantType)
			}
			res, err := http.Get(a.Redirect)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var got bytes.Buffer
			if _, err := got.ReadFrom(res.Body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusOK || !bytes.Equal(got.Bytes(), want) {
				t.Errorf("GET %s: %d, %d bytes; want 200 and the %d bytes of the file", a.Redirect, res.StatusCode, got.Len(), len(want))
			}
		})
	}

	for _, tc := range []struct {
		name, secret, bucket, mediaID string
		want                          error
	}{
		{"missing object", secretKey, bucket, "0123456789abcdef01234567.jpg", sources.ErrNotFound},
		{"missing S3-style object", secretKey, bucket, "20240115120112/nothing.jpg", sources.ErrNotFound},
		{"wrong secret", secretKey + "x", bucket, files[0].Name(), sources.ErrUnavailable},
		{"missing bucket", secretKey, "prodapi-no-such-bucket", files[0].Name(), sources.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newStore(t, tc.secret, tc.bucket).Asset(ctx, tc.mediaID)
			if !errors.Is(err, tc.want) {
				t.Errorf("Asset(%q): %v, want %v", tc.mediaID, err, tc.want)
			}
		})
	}
}
