package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/prodapi/prodapi/sources/objstore"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// fakeS3 is gofakes3 in memory, recording request lines.
type fakeS3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server

	mu       sync.Mutex
	requests []string
}

func newFakeS3(t *testing.T) *fakeS3 {
	f := &fakeS3{backend: s3mem.New()}
	h := gofakes3.New(f.backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func seedMinIO(t *testing.T, f *fakeS3, kv ...string) (string, error) {
	t.Helper()
	env := append([]string{"OBJSTORE_ENDPOINT_URL", f.srv.URL, "OBJSTORE_ACCESS_KEY_ID", "minioadmin",
		"OBJSTORE_SECRET_ACCESS_KEY", "minioadmin", "OBJSTORE_CONTAINER_NAME", "superdesk"}, kv...)
	var log syncBuffer
	err := run(t.Context(), []string{"-targets", "s3", "-wait", "10s"}, envOf(env...), &log)
	return log.String(), err
}

// Every asset lands where prodapi's objstore finds it, with the type and
// bytes the sandbox serves; the bucket is created when missing, and
// seeding again changes nothing.
func TestSeedS3(t *testing.T) {
	t.Parallel()
	for _, subfolder := range []string{"", "media/2026"} {
		t.Run("subfolder="+subfolder, func(t *testing.T) {
			f := newFakeS3(t)
			log, err := seedMinIO(t, f, "OBJSTORE_S3_SUBFOLDER", subfolder)
			if err != nil {
				t.Fatalf("seed: %v\n%s", err, log)
			}
			if !strings.Contains(log, `"msg":"s3: bucket created","bucket":"superdesk"`) {
				t.Errorf("log:\n%s", log)
			}
			checkObjects(t, f, subfolder)
			if log, err := seedMinIO(t, f, "OBJSTORE_S3_SUBFOLDER", subfolder); err != nil {
				t.Fatalf("second seed: %v\n%s", err, log)
			} else if strings.Contains(log, "bucket created") {
				t.Errorf("the bucket was created twice:\n%s", log)
			}
			checkObjects(t, f, subfolder)
		})
	}
}

func checkObjects(t *testing.T, f *fakeS3, subfolder string) {
	t.Helper()
	list, err := f.backend.ListBucket("superdesk", nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, o.Key)
	}
	room, err := loadNewsroom(t.Context(), sandbox.SampleFS())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range room.assets {
		key, _, ok := objstore.ObjectKey(subfolder, a.name)
		if !ok {
			t.Fatalf("no key for %s", a.name)
		}
		want = append(want, key)
	}
	if diff := cmp.Diff(keys, want); diff != "" {
		t.Errorf("keys (-got +want):\n%s", diff)
	}

	client, err := objstore.NewClient(t.Context(), "minioadmin", "minioadmin", "", f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.New(client, objstore.Options{Bucket: "superdesk", Prefix: subfolder})
	for _, a := range room.assets {
		got, err := store.Asset(t.Context(), a.name)
		if err != nil {
			t.Errorf("objstore cannot find %s: %v", a.name, err)
			continue
		}
		if diff := cmp.Diff([]any{got.ContentType, got.Size, got.MD5, got.Filename},
			[]any{a.contentType, int64(len(a.data)), a.md5, a.baseName()}); diff != "" {
			t.Errorf("%s (-objstore +sandbox):\n%s", a.name, diff)
		}
		res, err := http.Get(got.Redirect)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !bytes.Equal(data, a.data) {
			t.Errorf("GET %s: %d, %d bytes; want the %d bytes of %s", got.Redirect, res.StatusCode, len(data), len(a.data), a.name)
		}
	}
}
