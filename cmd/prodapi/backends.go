package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.opentelemetry.io/otel/trace"

	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/objstore"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// telemetry is what the backends count and trace into.
type telemetry struct {
	queries *metrics.Queries
	tracer  trace.TracerProvider // nil: no spans
}

// backends are the clients main owns: it creates them here and closes
// them, in reverse order, after the server has stopped.
type backends struct {
	logger   *slog.Logger
	store    sources.Store
	assets   sources.AssetStore
	checks   []server.Check
	describe slog.Value
	closers  []func(context.Context) error
	// watcher, when set, follows the sandbox directory's writes; every
	// replica runs its own (package feed's Local).
	watcher feed.Watcher
	// catchUp, when set, brings the watched sandbox up to the change
	// log's entries that another replica's watcher appended first.
	catchUp catchUpper
	// stream, when set, is the database's change stream, which one
	// replica of the fleet watches (package feed).
	stream feed.Source
	// poller, when set, stands in for stream where the database has no
	// change streams, and ids walks the collections' ids to find what
	// the poll cannot: deletions.
	poller feed.Poller
	ids    feed.IDLister

	// The platform's adapters, for `prodapi check`; nil on the sandbox
	// (and media, without object storage).
	mongo   *mongosrc.Store
	elastic *essrc.Store
	media   *objstore.Store
}

// openBackends selects the sandbox when PRODAPI_SANDBOX is set, else the
// platform: Mongo for details and document lists, Elastic for search
// lists, and media from object storage (OBJSTORE_CONTAINER_NAME) or
// GridFS. Nothing here waits for a server: the service starts while Mongo
// or Elastic are down and answers 503 until they come back.
func openBackends(ctx context.Context, cfg config.Config, tel telemetry, logger *slog.Logger) (*backends, error) {
	queries := tel.queries
	if cfg.Sandbox != "" {
		return openSandbox(cfg, tel, logger)
	}

	b := &backends{logger: logger}
	mo := mongosrc.ClientOptions(string(cfg.MongoURI), cfg.MongoMaxPool, cfg.BackendTimeout)
	if tel.tracer != nil {
		mo.SetMonitor(mongosrc.TraceMonitor(tel.tracer))
	}
	mc, err := mongo.Connect(mo)
	if err != nil {
		return nil, fmt.Errorf("configuring the MongoDB client for %s: %s", cfg.MongoURI, redact(err, cfg.MongoURI))
	}
	b.closers = append(b.closers, mc.Disconnect)
	dbName := mongosrc.DatabaseName(string(cfg.MongoURI))
	docs := mongosrc.New(mc.Database(dbName), mongosrc.Options{Timeout: cfg.BackendTimeout, Queries: queries, Logger: logger})

	ecfg := essrc.Config(string(cfg.ElasticURL), cfg.BackendTimeout)
	if tel.tracer != nil {
		ecfg.Instrumentation = elasticsearch.NewOpenTelemetryInstrumentation(tel.tracer, false)
	}
	ec, err := elasticsearch.NewClient(ecfg)
	if err != nil {
		b.close(logger)
		return nil, fmt.Errorf("configuring the Elasticsearch client for %s: %s", cfg.ElasticURL, redact(err, cfg.ElasticURL))
	}
	search := essrc.New(ec, essrc.Options{Index: cfg.ElasticIndex, Timeout: cfg.BackendTimeout, Queries: queries, Logger: logger})

	b.store = sources.Split{Docs: docs, Search: search}
	b.assets = docs
	media := "gridfs"
	if cfg.ObjStore.Enabled() {
		o := cfg.ObjStore
		s3c, err := objstore.NewClient(ctx, o.AccessKeyID, string(o.SecretAccessKey), o.Region, o.EndpointURL)
		if err != nil {
			b.close(logger)
			return nil, fmt.Errorf("configuring the object storage client: %w", err)
		}
		b.media = objstore.New(s3c, objstore.Options{Bucket: o.Container, Prefix: o.Subfolder, URLLifetime: o.URLLifetime,
			Timeout: cfg.BackendTimeout, Queries: queries, Logger: logger})
		b.assets = b.media
		media = "s3"
	}
	b.checks = []server.Check{
		{Name: "mongo", Critical: true, Probe: docs.Ping},
		{Name: "elastic", Critical: true, Probe: search.Ping},
	}
	b.stream, b.poller, b.ids = docs, docs, docs
	b.mongo, b.elastic = docs, search
	b.describe = slog.GroupValue(
		slog.String("kind", "platform"),
		slog.String("mongo", cfg.MongoURI.String()),
		slog.String("database", dbName),
		slog.String("elastic", cfg.ElasticURL.String()),
		slog.String("index_prefix", cfg.ElasticIndex),
		slog.String("media", media),
	)
	return b, nil
}

// redis opens the shared cache's client when REDIS_URL is set; nil means
// the in-process tier alone.
func (b *backends) redis(cfg config.Config) (redis.UniversalClient, error) {
	if cfg.Cache.RedisURL == "" {
		return nil, nil
	}
	rdb, err := redistier.NewClient(string(cfg.Cache.RedisURL))
	if err != nil {
		return nil, fmt.Errorf("configuring Redis: %w", err)
	}
	// go-redis reports dial failures through its own package-level logger;
	// main owns process-wide settings, so route it into our JSON log. A
	// refusal of the credentials it does not report: the hook does.
	th := newThrottle(redisLogEvery, time.Now)
	redis.SetLogger(redisLogger{l: b.logger, th: th})
	rdb.AddHook(authAlarm{l: b.logger, th: th, url: cfg.Cache.RedisURL})
	b.closers = append(b.closers, func(context.Context) error { return rdb.Close() })
	b.checks = append(b.checks, server.Check{Name: "redis", Probe: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
	return rdb, nil
}

// redact returns err's text with the URL's password masked: a driver's
// message may quote the connection string it could not use.
func redact(err error, u config.URL) string {
	msg := err.Error()
	// The password as written in the URL (perhaps %-escaped)...
	if _, rest, ok := strings.Cut(string(u), "://"); ok {
		if userinfo, _, ok := strings.Cut(rest, "@"); ok {
			if _, pw, ok := strings.Cut(userinfo, ":"); ok && pw != "" {
				msg = strings.ReplaceAll(msg, pw, "xxxxx")
			}
		}
	}
	// ...and decoded.
	if p, perr := url.Parse(string(u)); perr == nil && p.User != nil {
		if pw, ok := p.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// close closes the clients in reverse order of creation.
func (b *backends) close(logger *slog.Logger) {
	for i := len(b.closers) - 1; i >= 0; i-- {
		if err := b.closers[i](context.Background()); err != nil {
			logger.Warn("closing a backend client", "error", err.Error())
		}
	}
	b.closers = nil
}

// openSandbox opens the sample newsroom, or a directory it then watches:
// a collection file replaced there reloads and reports the documents
// that changed, as MongoDB's change streams would.
func openSandbox(cfg config.Config, tel telemetry, logger *slog.Logger) (*backends, error) {
	opts := sandbox.Options{Latency: cfg.SandboxLatency, Queries: tel.queries, Tracer: tel.tracer}
	type store interface {
		sources.Store
		sources.AssetStore
		Counts() map[string]int
	}
	var sb store
	b := &backends{logger: logger}
	if cfg.Sandbox == "sample" {
		s, err := sandbox.Open(cfg.Sandbox, opts)
		if err != nil {
			return nil, fmt.Errorf("opening the sandbox %q: %w", cfg.Sandbox, err)
		}
		sb = s
	} else {
		live, err := sandbox.OpenLive(cfg.Sandbox, opts, logger)
		if err != nil {
			return nil, fmt.Errorf("opening the sandbox %q: %w", cfg.Sandbox, err)
		}
		sb = live
		b.watcher, b.catchUp = live, live
		b.closers = append(b.closers, func(context.Context) error { return live.Close() })
	}
	var counts []any
	for coll, n := range sb.Counts() {
		counts = append(counts, slog.Int(coll, n))
	}
	b.store, b.assets = sb, sb
	b.checks = []server.Check{{Name: "sandbox", Critical: true, Probe: func(context.Context) error { return nil }}}
	b.describe = slog.GroupValue(slog.String("kind", "sandbox"), slog.String("source", cfg.Sandbox),
		slog.Bool("watched", b.watcher != nil), slog.Group("documents", counts...))
	return b, nil
}
