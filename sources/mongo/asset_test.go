package mongo_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
)

// fileData is 95 bytes: nine full 10-byte chunks and a 5-byte tail.
func fileData() []byte {
	b := make([]byte, 95)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

var uploaded = time.Date(2019, 8, 15, 12, 23, 4, 0, time.UTC)

func assetEnv(t *testing.T, files ...mongotest.File) *env {
	t.Helper()
	srv := mongotest.Start(t, nil)
	for _, f := range files {
		if err := srv.PutFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return connect(t, srv, mongosrc.Options{})
}

func photo(t testing.TB) mongotest.File {
	return mongotest.File{ID: mustOID(t, deskOID), Filename: "photo.jpg", ContentType: "image/jpeg",
		Data: fileData(), ChunkSize: 10, MD5: true, UploadDate: uploaded}
}

func TestAssetMetadata(t *testing.T) {
	data := fileData()
	sum := md5.Sum(data)
	e := assetEnv(t, photo(t),
		mongotest.File{ID: "logo", Filename: "logo.svg", MetaContentType: "image/svg+xml", Data: []byte("<svg/>"), UploadDate: uploaded},
		mongotest.File{ID: "empty", Data: nil, UploadDate: uploaded})
	for _, tc := range []struct {
		id   string
		want sources.Asset
	}{
		{deskOID + ".png", sources.Asset{Size: 95, ContentType: "image/jpeg", MD5: hex.EncodeToString(sum[:]), Modified: uploaded, Filename: "photo.jpg"}},
		{deskOID, sources.Asset{Size: 95, ContentType: "image/jpeg", MD5: hex.EncodeToString(sum[:]), Modified: uploaded, Filename: "photo.jpg"}},
		{"logo.svg", sources.Asset{Size: 6, ContentType: "image/svg+xml", Modified: uploaded, Filename: "logo.svg"}},
		{"empty", sources.Asset{Size: 0, Modified: uploaded}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			a, err := e.store.Asset(t.Context(), tc.id)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Content.Close()
			got := *a
			got.Content = nil
			if tc.want.MD5 == "" {
				if len(got.MD5) != 32 {
					t.Errorf("fallback tag %q, want 32 hex digits", got.MD5)
				}
				tc.want.MD5 = got.MD5
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("asset (-got +want):\n%s", diff)
			}
		})
	}
	if got := e.queries.Value("mongo", "assets", "asset"); got != 4 {
		t.Errorf("asset queries = %d, want 4", got)
	}
}

// TestAssetFallbackTag checks that the tag standing in for a missing md5
// is stable for a file and changes when the file is replaced.
func TestAssetFallbackTag(t *testing.T) {
	tag := func(f mongotest.File) string {
		e := assetEnv(t, f)
		a, err := e.store.Asset(t.Context(), "f")
		if err != nil {
			t.Fatal(err)
		}
		a.Content.Close()
		return a.MD5
	}
	f := mongotest.File{ID: "f", Data: []byte("same"), UploadDate: uploaded}
	first, again := tag(f), tag(f)
	f.UploadDate = uploaded.Add(time.Second)
	replaced := tag(f)
	if first != again {
		t.Errorf("tag changed between reads: %s, %s", first, again)
	}
	if first == replaced {
		t.Errorf("a replaced file kept its tag %s", first)
	}
}

func TestAssetStream(t *testing.T) {
	data := fileData()
	e := assetEnv(t, photo(t))
	a, err := e.store.Asset(t.Context(), deskOID+".jpg")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(a.Content)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("content = %q, want %q", got, data)
	}
	if err := a.Content.Close(); err != nil {
		t.Error(err)
	}
	if finds := chunkFinds(e.srv); len(finds) != 1 {
		t.Errorf("a sequential read ran %d chunk queries, want 1", len(finds))
	}
	if n := len(e.srv.Named("getMore")); n != 2 {
		t.Errorf("getMores = %d, want 2 (10 chunks in batches of 4)", n)
	}
	if n := e.srv.OpenCursors(); n != 0 {
		t.Errorf("%d cursors left open", n)
	}
}

func chunkFinds(srv *mongotest.Server) []mongotest.Command {
	var out []mongotest.Command
	for _, c := range srv.Named("find") {
		if coll, _ := c.Body.String("find"); coll == "fs.chunks" {
			out = append(out, c)
		}
	}
	return out
}

func TestAssetSeek(t *testing.T) {
	data := fileData()
	e := assetEnv(t, photo(t))
	a, err := e.store.Asset(t.Context(), deskOID)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Content.Close()
	r := a.Content
	for _, tc := range []struct {
		name      string
		off       int64
		whence, n int
		wantPos   int64
	}{
		{"inside the first chunk", 2, io.SeekStart, 5, 2},
		{"across a boundary", 8, io.SeekStart, 5, 8},
		{"exactly one chunk", 10, io.SeekStart, 10, 10},
		{"across several chunks", 13, io.SeekStart, 40, 13},
		{"backwards", 1, io.SeekStart, 12, 1},
		{"relative", 5, io.SeekCurrent, 3, 18},
		{"the tail", -5, io.SeekEnd, 5, 90},
		{"the last chunk's start", 90, io.SeekStart, 2, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pos, err := r.Seek(tc.off, tc.whence)
			if err != nil || pos != tc.wantPos {
				t.Fatalf("Seek(%d, %d) = %d, %v; want %d", tc.off, tc.whence, pos, err, tc.wantPos)
			}
			got := make([]byte, tc.n)
			if _, err := io.ReadFull(r, got); err != nil {
				t.Fatal(err)
			}
			if want := data[pos : pos+int64(tc.n)]; !bytes.Equal(got, want) {
				t.Errorf("read %q, want %q", got, want)
			}
		})
	}
	if end, err := r.Seek(0, io.SeekEnd); err != nil || end != 95 {
		t.Errorf("Seek(0, End) = %d, %v; want 95", end, err)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Read at the end = %d, %v; want 0, EOF", n, err)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Error("Seek before the start succeeded")
	}
	// The chunk query restarts at the chunk holding the offset.
	e.srv.Reset()
	if _, err := r.Seek(45, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	finds := chunkFinds(e.srv)
	if len(finds) != 1 {
		t.Fatalf("chunk queries = %d, want 1", len(finds))
	}
	if got, want := field(finds[0], "filter"),
		compact(`{"files_id": {"$oid":"`+deskOID+`"},"n": {"$gte": {"$numberLong":"4"}}}`); got != want {
		t.Errorf("chunk filter = %s, want %s", got, want)
	}
}

func TestAssetCloseKillsCursor(t *testing.T) {
	e := assetEnv(t, photo(t))
	a, err := e.store.Asset(t.Context(), deskOID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(a.Content, make([]byte, 15)); err != nil {
		t.Fatal(err)
	}
	if n := e.srv.OpenCursors(); n != 1 {
		t.Errorf("open cursors mid-file = %d, want 1", n)
	}
	a.Content.Close()
	if n := e.srv.OpenCursors(); n != 0 {
		t.Errorf("open cursors after Close = %d, want 0", n)
	}
	if _, err := a.Content.Read(make([]byte, 1)); err == nil {
		t.Error("Read after Close succeeded")
	}
}

// TestAssetServeContent serves the stream with net/http's range logic,
// as the server does.
func TestAssetServeContent(t *testing.T) {
	data := fileData()
	e := assetEnv(t, photo(t))
	for _, tc := range []struct {
		rng        string
		wantStatus int
		wantBody   []byte
	}{
		{"", http.StatusOK, data},
		{"bytes=8-21", http.StatusPartialContent, data[8:22]},
		{"bytes=-7", http.StatusPartialContent, data[88:]},
		{"bytes=90-", http.StatusPartialContent, data[90:]},
		{"bytes=200-300", http.StatusRequestedRangeNotSatisfiable, nil},
	} {
		t.Run(tc.rng, func(t *testing.T) {
			a, err := e.store.Asset(t.Context(), deskOID)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Content.Close()
			req := httptest.NewRequest(http.MethodGet, "/assets/x", nil)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			rec := httptest.NewRecorder()
			http.ServeContent(rec, req, "", a.Modified, a.Content)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d", rec.Code, tc.wantStatus)
			}
			if tc.wantBody != nil && !bytes.Equal(rec.Body.Bytes(), tc.wantBody) {
				t.Errorf("body = %q, want %q", rec.Body.Bytes(), tc.wantBody)
			}
		})
	}
}

func TestAssetNotFound(t *testing.T) {
	e := assetEnv(t, photo(t))
	for _, id := range []string{"5d553c333031e2855a2e9999.jpg", "", ".jpg", "missing", deskOID + "x"} {
		_, err := e.store.Asset(t.Context(), id)
		if !errors.Is(err, sources.ErrNotFound) {
			t.Errorf("Asset(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

func TestAssetCorrupt(t *testing.T) {
	srv := mongotest.Start(t, nil)
	f := mongotest.File{ID: "short", Data: fileData()[:30], ChunkSize: 10, UploadDate: uploaded}
	if err := srv.PutFile(f); err != nil {
		t.Fatal(err)
	}
	// A file that claims more data than its chunks hold.
	if err := srv.Insert("fs.files", sources.D("_id", "long", "length", int64(50), "chunkSize", int64(10), "uploadDate", uploaded)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Insert("fs.files", sources.D("_id", "nochunksize", "length", int64(50), "uploadDate", uploaded)); err != nil {
		t.Fatal(err)
	}
	e := connect(t, srv, mongosrc.Options{})
	a, err := e.store.Asset(t.Context(), "long")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Content.Close()
	if _, err := io.ReadAll(a.Content); !errors.Is(err, mongosrc.ErrCorrupt) {
		t.Errorf("reading a file without chunks: %v, want ErrCorrupt", err)
	}
	if _, err := e.store.Asset(t.Context(), "nochunksize"); !errors.Is(err, mongosrc.ErrCorrupt) {
		t.Errorf("a file without chunkSize: %v, want ErrCorrupt", err)
	}
}
