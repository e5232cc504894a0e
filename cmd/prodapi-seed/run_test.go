package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// syncBuffer collects what run logs while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func jsonLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// -h prints what the seed does, with examples, then every flag.
func TestUsage(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	if err := run(t.Context(), []string{"-h"}, envOf(), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: prodapi-seed [flags]", "prodapi-seed -scale 300000", "-batch-docs int", "-scale int", "-out string"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		want    func(settings) string // "" when the settings are right
		wantErr string
	}{
		{name: "defaults", want: func(s settings) string {
			got := []any{s.wait, s.data, s.targets, string(s.cfg.MongoURI), string(s.cfg.ElasticURL), s.cfg.ElasticIndex, s.cfg.ObjStore.Enabled()}
			return cmp.Diff(got, []any{120 * time.Second, "sample", []string{"mongo", "elastic", "s3"},
				"mongodb://localhost/superdesk", "http://localhost:9200", "superdesk", false})
		}},
		{name: "the variables prodapi reads, as it reads them",
			args: []string{"-wait", "5s", "-targets", " S3 ,mongo"},
			env: []string{"MONGO_URI", "mongodb://mongo:27017/newsroom?replicaSet=rs0", "ELASTICSEARCH_URL", "http://es:9200",
				"ELASTICSEARCH_INDEX", "sd", "OBJSTORE_CONTAINER_NAME", "media", "OBJSTORE_S3_SUBFOLDER", "/media/",
				"OBJSTORE_ACCESS_KEY_ID", "ak", "OBJSTORE_SECRET_ACCESS_KEY", "sk", "OBJSTORE_ENDPOINT_URL", "http://minio:9000"},
			want: func(s settings) string {
				o := s.cfg.ObjStore
				got := []any{s.wait, s.targets, string(s.cfg.MongoURI), string(s.cfg.ElasticURL), s.cfg.ElasticIndex,
					o.Container, o.Subfolder, o.AccessKeyID, string(o.SecretAccessKey), o.EndpointURL, o.Region}
				return cmp.Diff(got, []any{5 * time.Second, []string{"mongo", "s3"}, "mongodb://mongo:27017/newsroom?replicaSet=rs0",
					"http://es:9200", "sd", "media", "media", "ak", "sk", "http://minio:9000", "us-east-1"})
			}},
		{name: "no secret needed even with auth on", env: []string{"PRODAPI_AUTH_ENABLED", "true"},
			want: func(settings) string { return "" }},
		{name: "subfolder false means none", env: []string{"OBJSTORE_S3_SUBFOLDER", "False"},
			want: func(s settings) string { return cmp.Diff(s.cfg.ObjStore.Subfolder, "") }},
		{name: "batches and progress", want: func(s settings) string {
			return cmp.Diff([]any{s.lim, s.parallel, s.compress, s.progress, s.scale, s.out},
				[]any{limits{docs: 1000, bytes: 8 << 20}, 4, false, 5 * time.Second, 0, ""}, cmp.AllowUnexported(limits{}))
		}},
		{name: "batches and progress set", args: []string{"-batch-docs", "10", "-batch-bytes", "2048", "-parallel", "1", "-compress",
			"-progress", "0", "-request-timeout", "10m"},
			want: func(s settings) string {
				return cmp.Diff([]any{s.lim, s.parallel, s.compress, s.progress, s.timeout},
					[]any{limits{docs: 10, bytes: 2048}, 1, true, time.Duration(0), 10 * time.Minute}, cmp.AllowUnexported(limits{}))
			}},
		{name: "scaled, written out", args: []string{"-scale", "300000", "-seed", "9", "-out", "/tmp/newsroom"},
			want: func(s settings) string {
				return cmp.Diff([]any{s.scale, s.seed, s.out}, []any{300000, uint64(9), "/tmp/newsroom"})
			}},
		{name: "no batch", args: []string{"-batch-docs", "0"}, wantErr: "-batch-docs and -batch-bytes must be positive"},
		{name: "no bytes", args: []string{"-batch-bytes", "-1"}, wantErr: "-batch-docs and -batch-bytes must be positive"},
		{name: "none in flight", args: []string{"-parallel", "0"}, wantErr: "-parallel must be positive"},
		{name: "no time", args: []string{"-request-timeout", "0s"}, wantErr: "-request-timeout must be positive"},
		{name: "negative progress", args: []string{"-progress", "-1s"}, wantErr: "-progress must not be negative"},
		{name: "negative scale", args: []string{"-scale", "-1"}, wantErr: "-scale must be between 0 and"},
		{name: "out with targets", args: []string{"-out", "/tmp/x", "-targets", "mongo"}, wantErr: "takes no -targets"},
		{name: "unknown target", args: []string{"-targets", "mongo,redis"}, wantErr: `unknown target "redis"`},
		{name: "no target", args: []string{"-targets", ","}, wantErr: "nothing to load"},
		{name: "zero wait", args: []string{"-wait", "0s"}, wantErr: "-wait must be positive"},
		{name: "stray argument", args: []string{"now"}, wantErr: "unexpected arguments"},
		{name: "bad flag", args: []string{"-frobnicate"}, wantErr: "flag provided but not defined"},
		{name: "bad variables, all reported", env: []string{"MONGO_URI", "http://mongo", "ELASTICSEARCH_URL", "es:9200"},
			wantErr: "ELASTICSEARCH_URL must be an http(s) URL\nMONGO_URI must be a mongodb:// or mongodb+srv:// URI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOptions(tc.args, envOf(tc.env...), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := tc.want(got); diff != "" {
				t.Errorf("settings (-got +want):\n%s", diff)
			}
		})
	}
}

// The newsroom the seed loads is the sandbox's: the same documents and
// the same asset metadata.
func TestLoadNewsroomSample(t *testing.T) {
	t.Parallel()
	room, err := loadNewsroom(t.Context(), sandbox.SampleFS())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(room.counts(), sb.Counts()); diff != "" {
		t.Errorf("documents per collection (-seed +sandbox):\n%s", diff)
	}
	entries, err := os.ReadDir(filepath.Join("..", "..", "sources", "sandbox", "sample", "assets"))
	if err != nil {
		t.Fatal(err)
	}
	if len(room.assets) != len(entries) || len(entries) == 0 {
		t.Fatalf("%d assets, want the %d files of assets/", len(room.assets), len(entries))
	}
	for _, a := range room.assets {
		want, err := sb.Asset(t.Context(), a.name)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(want.Content)
		want.Content.Close()
		got := []any{a.contentType, a.md5, a.modified, a.baseName(), a.data}
		if diff := cmp.Diff(got, []any{want.ContentType, want.MD5, want.Modified, want.Filename, data}); diff != "" {
			t.Errorf("%s (-seed +sandbox):\n%s", a.name, diff)
		}
	}
}

func TestLoadNewsroomDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "desks.json"), []byte(`[{"_id": {"$oid": "67c42d4c957184d45484e656"}, "name": "News",
		"_updated": {"$date": "2026-11-20T09:15:00Z"}}]`), 0o644)
	os.MkdirAll(filepath.Join(dir, "assets", "2026"), 0o755)
	os.WriteFile(filepath.Join(dir, "assets", "2026", "map.pdf"), []byte("%PDF-1.7"), 0o644)
	fsys, err := newsroomFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	room, err := loadNewsroom(t.Context(), fsys)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(room.counts(), map[string]int{"desks": 1}); diff != "" {
		t.Errorf("counts (-got +want):\n%s", diff)
	}
	if len(room.assets) != 1 || room.assets[0].name != "2026/map.pdf" || room.assets[0].contentType != "application/pdf" {
		t.Errorf("assets = %+v", room.assets)
	}

	for _, bad := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "desks.json")} {
		if _, err := newsroomFS(bad); err == nil {
			t.Errorf("newsroomFS(%s) succeeded", bad)
		}
	}
	// What the sandbox refuses, the seed refuses.
	os.WriteFile(filepath.Join(dir, "users.json"), []byte(`[{"name": "no id"}]`), 0o644)
	if _, err := loadNewsroom(t.Context(), os.DirFS(dir)); err == nil || !strings.Contains(err.Error(), "_id") {
		t.Errorf("a document without _id: %v", err)
	}
}

func TestWaiter(t *testing.T) {
	t.Parallel()
	now := func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	var log syncBuffer
	w := waiter{wait: time.Hour, logger: jsonLogger(&log), after: now}
	calls := 0
	err := w.until(t.Context(), "thing", func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("until = %v after %d calls, want nil after 3", err, calls)
	}
	if !strings.Contains(log.String(), `"msg":"thing: waiting"`) || !strings.Contains(log.String(), `"msg":"thing: ready"`) {
		t.Errorf("log:\n%s", log.String())
	}

	// Giving up names the server and the last error.
	w.wait = time.Nanosecond
	err = w.until(t.Context(), "thing", func(context.Context) error { return errors.New("still refused") })
	if err == nil || !strings.Contains(err.Error(), "thing did not answer within 1ns: still refused") {
		t.Errorf("until = %v", err)
	}

	// A cancelled run stops waiting.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w.wait = time.Hour
	if err := w.until(ctx, "thing", func(context.Context) error { return errors.New("refused") }); !errors.Is(err, context.Canceled) {
		t.Errorf("until = %v, want context.Canceled", err)
	}
}

// A server that never answers fails the run, naming it, once -wait is
// over; nothing else is attempted.
func TestRunFailsWhenAServerIsDown(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	err := run(t.Context(), []string{"-wait", "1ms", "-targets", "mongo,elastic"},
		envOf("MONGO_URI", "mongodb://127.0.0.1:1/superdesk?connectTimeoutMS=200&serverSelectionTimeoutMS=200"), &log)
	if err == nil || !strings.Contains(err.Error(), "mongo did not answer within 1ms") {
		t.Errorf("run = %v", err)
	}
	if strings.Contains(log.String(), "elastic") {
		t.Errorf("elastic was attempted after mongo failed:\n%s", log.String())
	}
}

// sampleRoom is the sample newsroom as the seed reads it.
func sampleRoom(t testing.TB) *newsroom {
	t.Helper()
	room, err := loadNewsroom(t.Context(), sandbox.SampleFS())
	if err != nil {
		t.Fatal(err)
	}
	return room
}

// sampleDocs returns the sample's documents by collection.
func sampleDocs(t *testing.T) map[string][]*sources.Doc {
	t.Helper()
	return sampleRoom(t).colls
}

func idOf(d *sources.Doc) string {
	v, _ := d.Get("_id")
	id, _ := sources.IDString(v)
	return id
}
