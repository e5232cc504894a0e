package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/cache/changelog"
	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/admin"
	changeshttp "github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
)

// env is what run takes from the operating system, so tests can run the
// whole program in-process.
type env struct {
	args   []string
	getenv func(string) string
	// environ is the environment as os.Environ gives it, for refusing
	// unknown PRODAPI_ variables; nil skips that check.
	environ        []string
	stdout, stderr io.Writer
	// ready, when set, receives the bound address once the server
	// listens (tests listen on 127.0.0.1:0).
	ready func(addr string)
	// adminReady, when set, receives the admin listener's address.
	adminReady func(addr string)
	// opsReady, when set, receives the operator listener's address (the
	// probes and /metrics).
	opsReady func(addr string)
	// draining, when set, is called once the server drains (/readyz
	// answers 503) and before its listener closes.
	draining func()
}

func run(ctx context.Context, e env) error {
	cmd, args := "run", e.args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd == "run" && len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			cmd = "help"
		case "-version", "--version":
			cmd = "version"
		}
	}
	var err error
	switch cmd {
	case "run", "serve": // serve: the name before run
		err = serve(ctx, e, args)
	case "token":
		err = mintToken(e, args)
	case "healthcheck":
		err = healthcheck(ctx, e, args)
	case "check":
		err = checkPlatform(ctx, e, args)
	case "config":
		err = printConfig(e)
	case "version":
		printVersion(e.stdout, readBuildInfo())
	case "help":
		printHelp(e.stdout)
	default:
		var b strings.Builder
		printHelp(&b)
		return fmt.Errorf("unknown command %q\n\n%s", cmd, b.String())
	}
	if errors.Is(err, flag.ErrHelp) { // a subcommand's -h: the flag package printed its usage
		return nil
	}
	return err
}

// loadConfig loads the configuration as the service does: refusing
// unknown PRODAPI_ variables and per-resource settings naming no resource,
// and warning of other variables that look like misspelt settings.
func loadConfig(e env) (config.Config, error) {
	var names []string
	if e.environ != nil {
		names = []string{}
		for _, kv := range e.environ {
			name, _, _ := strings.Cut(kv, "=")
			names = append(names, name)
		}
	}
	return config.LoadFrom(config.Env{Getenv: e.getenv, Names: names, Resources: resourceNames()})
}

func resourceNames() []string {
	var names []string
	for _, r := range sources.Resources() {
		names = append(names, r.Name)
	}
	return names
}

// serve runs the service until ctx ends, in the manner of a main struct:
// open builds it, run serves, shutdown drains and stops it, and close
// releases what open acquired, whatever happened.
func serve(ctx context.Context, e env, args []string) error {
	s := &service{e: e}
	defer s.close()
	if err := s.open(ctx, args); err != nil {
		return err
	}
	if err := s.run(ctx); err != nil {
		return err
	}
	return s.shutdown(ctx)
}

// A service is what serve builds, in the order open builds it.
type service struct {
	e env
	// undo releases what open acquired (listener, log sink, tracing,
	// clients); close runs it last first.
	undo []func()

	cfg       config.Config
	ln        net.Listener
	registry  *metrics.Metrics
	logs      *logOutput
	logger    *slog.Logger
	cursorKey []byte
	tracer    trace.TracerProvider // nil: tracing off

	b       *backends
	tier    *redistier.Tier
	limits  *fairshare.Limiter // nil: no limits
	cache   *cache.Cache
	changes *changelog.Log
	// feeds report the backends' writes to the cache and the change log;
	// run starts them.
	feeds  []interface{ Run(context.Context) error }
	checks []server.Check

	srv         *server.Server
	hs          *http.Server
	served      chan error
	admin       *http.Server // nil without PRODAPI_ADMIN_ADDR
	adminLn     net.Listener
	adminServed chan error
	ops         *http.Server // the operator listener: probes and /metrics
	opsLn       net.Listener
	opsServed   chan error
}

// open builds the service: nothing serves until run.
func (s *service) open(ctx context.Context, args []string) error {
	cfg, err := loadConfig(s.e)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(s.e.stderr)
	addr := fs.String("addr", ":"+cfg.Port, "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Listening first, before any backend is dialled: a port in use fails
	// at once, and what is derived from the port (the default base URL,
	// the media prefix, the OpenAPI server) names the one listened on.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	s.undo = append(s.undo, func() { ln.Close() }) // for an early return; Shutdown closes it otherwise
	s.ln, s.cfg = ln, cfg.Listening(ln.Addr())
	oln, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		return fmt.Errorf("listening for the operator listener (PRODAPI_OPS_ADDR): %w", err)
	}
	s.undo = append(s.undo, func() { oln.Close() })
	s.opsLn = oln

	s.openLog()
	if err := s.openTracing(ctx); err != nil {
		return err
	}
	if err := s.openCache(ctx); err != nil {
		return err
	}
	s.openServer()
	return s.openAdmin()
}

// openLog sets up the metrics registry and the JSON log, and logs the
// configuration's warnings.
func (s *service) openLog() {
	cfg := s.cfg
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	s.registry = metrics.NewMetrics()
	build := readBuildInfo()
	s.registry.Register(metrics.Build{Version: build.Version, Revision: build.Revision})
	s.logs = newLogOutput(s.e.stderr, s.registry.Counter("prodapi_log_lines_dropped_total",
		"Log lines dropped because the log sink (stderr) was blocked and the buffer in front of it full."))
	s.undo = append(s.undo, func() { s.logs.Close() })
	logger := slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: level, ReplaceAttr: goDurations}))
	s.logger = logger
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	if cfg.AuthEnabled && len(cfg.Secret) < config.MinSecretLength {
		logger.Warn("AUTH_SERVER_SHARED_SECRET is shorter than 32 bytes: HS256 wants a longer key", "length", len(cfg.Secret))
	}
	if !cfg.AuthEnabled {
		logger.Warn("authentication is disabled (PRODAPI_AUTH_ENABLED=false): the API is open to anyone who can reach it")
	}
	cursorKey, shared := cfg.CursorKey()
	if !shared {
		logger.Warn("neither PRODAPI_CURSOR_SECRET nor AUTH_SERVER_SHARED_SECRET is set: list cursors are sealed with a key " +
			"of this process's own, so they fail after a restart and on any other replica")
	}
	s.cursorKey = cursorKey
}

// goDurations writes a duration attribute as Go writes it ("1.5s"), as
// the settings are written, whatever package logged it: the JSON handler
// would write nanoseconds. (The access log's duration_us is its own.)
func goDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// openTracing starts the tracing SDK when PRODAPI_TRACING asks for it.
func (s *service) openTracing(ctx context.Context) error {
	sdk, err := tracing(ctx, s.cfg.Tracing, s.e.stdout, readBuildInfo().Version)
	if err != nil {
		return err
	}
	if sdk == nil {
		return nil
	}
	s.tracer = sdk
	// Runs last: the spans of the drain and the cache's flush are
	// exported too.
	s.undo = append(s.undo, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := sdk.Shutdown(sctx); err != nil {
			s.logger.Warn("flushing traces", "error", err)
		}
	})
	return nil
}

// openCache opens the backends, and over them the cache, the change log
// and the feeds that keep both current.
func (s *service) openCache(ctx context.Context) error {
	cfg, logger, registry := s.cfg, s.logger, s.registry
	b, err := openBackends(ctx, cfg, telemetry{queries: registry.SourceQueries(), tracer: s.tracer}, logger)
	if err != nil {
		return err
	}
	s.b = b
	// Clients close last, after the server has drained and the cache has
	// flushed its writes.
	s.undo = append(s.undo, func() { b.close(logger) })

	enricher := enrich.New(b.store, enrich.Options{MediaPrefix: cfg.MediaPrefix, Timeout: cfg.BackendTimeout, Logger: logger})
	// A page read ahead is served while the cache, made below, has
	// applied no invalidation since its reading began.
	renderer := render.NewWithOptions(b.store, enricher.Enrich, render.Options{ReadAhead: int(cfg.WalkReadAhead),
		Invalidations: func() uint64 { return s.cache.Invalidations() }})
	rdb, err := b.redis(cfg)
	if err != nil {
		return err
	}
	if rdb == nil {
		logger.Warn("REDIS_URL is not set: this replica's cache and change log are its own, so several replicas need Redis "+
			"(without it each keeps a /changes of its own, whose tokens the others refuse, and drops only what it saw change)",
			"fix", "run one replica, or set REDIS_URL (the chart's redis.url or redis.existingSecret)")
	}
	// While the database's change stream runs, entries are obsoleted as
	// their documents change: they may live long (config.Cache.FeedTTL).
	// A poll sees deletions only when it reconciles the ids
	// (PRODAPI_FEED_RECONCILE): the TTLs stay.
	var running atomic.Pointer[feed.Feed]
	ttl := func(resource string, detail bool) time.Duration {
		if f := running.Load(); f != nil && streamed(f) {
			return cfg.Cache.FeedTTL(resource, detail)
		}
		return cfg.Cache.TTL(resource, detail)
	}
	// The Redis tier is this replica's part of what the fleet shares:
	// the cache's entries and invalidations, and the change feed's lease
	// and token. Without Redis the replica is alone.
	s.tier = redistier.New(rdb, redistier.Options{Metrics: registry, Logger: logger, Tracer: s.tracer})
	// The fair share: its counts are the fleet's, in the Redis tier, and
	// the cache asks it before each load a request starts.
	if s.limits, err = openLimits(cfg.Limits, s.tier, registry, logger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	var gate cache.Gate
	if s.limits != nil {
		gate = s.limits
		s.undo = append(s.undo, func() { s.limits.Close(context.Background()) })
	}
	s.cache = cache.New(s.tier, renderer, cache.Options{
		Gate:        gate,
		TTL:         ttl,
		Stale:       cfg.Cache.Stale,
		NotFoundTTL: cfg.Cache.NotFoundTTL,
		LocalBytes:  cfg.Cache.LocalBytes,
		LocalTTL:    cfg.Cache.LocalTTL,
		LoadTimeout: cfg.LoadTimeout(),
		Metrics:     registry,
		Logger:      logger,
		Tracer:      s.tracer,
	})
	// The fleet's change log, served at /changes: the Redis stream every
	// replica follows, or this replica's ring without Redis.
	var stream changelog.Stream
	if rdb != nil {
		stream = s.tier
	}
	// Every entry is applied here before this replica hands it out or
	// says it applied it (WaitApplied: min_position, include=doc).
	s.changes = changelog.New(stream, changelog.Options{Retain: cfg.ChangesRetain, Metrics: registry, Logger: logger,
		Apply: replicaApplier{cache: s.cache, sandbox: b.catchUp}})
	if f := s.openFeeds(); f != nil {
		running.Store(f)
	}
	return nil
}

// A catchUpper brings a store up to the change log's entries (package
// sandbox's Live: it reloads when its view lacks an entry's version).
type catchUpper interface {
	CatchUp(ctx context.Context, entries []sources.LogEntry) error
}

// replicaApplier applies the change log's entries to this replica, as
// its follower reads them: the watched sandbox catches up first (its
// reload reports its changes to the cache and the log, as any other),
// then the cache drops what it holds of the documents, in this process
// (the replica that appended the entry wrote the generations in Redis
// and told the others already; this makes it so here, in log order).
type replicaApplier struct {
	cache interface {
		ApplyLocal(context.Context, []sources.Change)
		PurgeAll(context.Context) error
	}
	sandbox catchUpper // nil: none watched
}

// EpochEnded drops every entry of the cache, in Redis too: the stream
// lost entries, and the invalidations written with them (Redis restarted
// on persistence lacking its newest writes, a failover to a replica
// lacking them) may be lost too, so that Redis could serve again what
// they had made obsolete. Every replica that followed the old epoch does
// it once; it fails (and is retried) while Redis does not take it.
func (a replicaApplier) EpochEnded(ctx context.Context) error {
	return a.cache.PurgeAll(ctx)
}

func (a replicaApplier) ApplyEntries(ctx context.Context, entries []sources.LogEntry) error {
	if a.sandbox != nil {
		if err := a.sandbox.CatchUp(ctx, entries); err != nil {
			return err
		}
	}
	changes := make([]sources.Change, 0, len(entries))
	for _, e := range entries {
		res, ok := sources.ResourceByName(e.Resource)
		if !ok {
			continue
		}
		changes = append(changes, sources.Change{Collection: res.Collection, ID: e.ID, Op: e.Op, At: e.At, Version: e.Version})
	}
	a.cache.ApplyLocal(ctx, changes)
	return nil
}

// openFeeds builds the feeds that report the backends' writes to the
// cache and the change log: a sandbox directory's watcher, which every
// replica runs, and the database's change stream (or its poll), which
// one replica of the fleet follows under a lease. It returns the
// latter's, nil without a database.
func (s *service) openFeeds() *feed.Feed {
	s.checks = s.b.checks
	// Each change brings the changes of the documents whose answers
	// embed it. What a document linked to at its last change is kept
	// where every replica reads it: in Redis, or in memory without it.
	var refs enrich.RefStore
	var known feed.KnownIDs
	if s.tier.Enabled() {
		refs, known = s.tier, s.tier
	}
	derive := enrich.NewDeriver(s.b.store, enrich.DeriveOptions{Refs: refs, Logger: s.logger})
	if s.b.watcher != nil {
		// Every replica watches the sandbox and appends what it saw: the
		// log keeps the first report of each version.
		s.feeds = append(s.feeds, feed.NewLocal(s.b.watcher, s.cache, s.changes,
			feed.LocalOptions{Source: changelog.SourceSandbox, Derive: derive, Logger: s.logger}))
	}
	if s.b.stream == nil {
		return nil
	}
	f := feed.New(s.b.stream, s.tier, s.cache, feed.Options{
		Unsupported:    func(err error) bool { return errors.Is(err, mongosrc.ErrNoChangeStreams) },
		HistoryLost:    func(err error) bool { return errors.Is(err, mongosrc.ErrHistoryLost) },
		Log:            s.changes,
		Derive:         derive,
		Poller:         s.b.poller,
		PollEvery:      s.cfg.FeedPoll,
		IDs:            s.b.ids,
		Known:          known,
		ReconcileEvery: s.cfg.FeedReconcile,
		Metrics:        s.registry,
		Logger:         s.logger,
	})
	s.feeds = append(s.feeds, f)
	s.checks = append(slices.Clone(s.checks), feedCheck(f, noteFeedPolls(s.cfg)))
	return f
}

// feedCheck is /readyz's check of the fleet's feed, with the note it
// gives while the feed polls.
func feedCheck(f *feed.Feed, polls string) server.Check {
	return server.Check{Name: "change_feed", Probe: func(context.Context) error {
		switch f.Status() {
		case feed.StatusUnsupported:
			return errors.New("the database has no change streams (not a replica set, or FerretDB): entries refresh by TTL only")
		case feed.StatusRetrying:
			return errors.New("the change stream or the poll failed; retrying")
		}
		return nil
	}, Note: func() string {
		if f.Mode() == feed.ModePoll {
			return polls
		}
		return ""
	}}
}

// openServer builds the API's handler and its http.Server, on the
// listener open made.
func (s *service) openServer() {
	cfg, c, b, changes := s.cfg, s.cache, s.b, s.changes
	checks, registry, logger, logs, tracer, cursorKey := s.checks, s.registry, s.logger, s.logs, s.tracer, s.cursorKey
	if s.limits != nil && s.tier.Enabled() {
		checks = append(slices.Clone(checks), limitsCheck(s.limits))
	}
	var assets sources.AssetStore
	if b.assets != nil {
		assets = c.Assets(b.assets, cfg.Cache.AssetTTL)
	}
	srv := server.New(c, server.Options{
		Prefix:  cfg.URLPrefix,
		BaseURL: cfg.URL,
		Auth: server.AuthOptions{Enabled: cfg.AuthEnabled, Secret: []byte(cfg.Secret), Leeway: cfg.AuthLeeway,
			Audience: cfg.Audience, TokenURL: cfg.TokenURL, Issuer: cfg.Issuer},
		Assets:             assets,
		Checks:             checks,
		Metrics:            registry,
		Logger:             logger,
		AccessLog:          logs,
		AccessLogHits:      &cfg.AccessLogHits,
		TrustedProxyHeader: cfg.TrustedProxyHeader,
		TrustedProxies:     cfg.TrustedProxies,
		Tracer:             tracer,
		CursorSecret:       cursorKey,
		Changes:            changeshttp.New(changes, s.feedOptions()),

		ReadyRequiresBackends: cfg.ReadyRequiresBackends,
		Limits:                s.limits,
	})

	limit := newConnLimiter(cfg.MaxConns, registry)
	s.ln = limit.listener(server.Listener(s.ln))
	s.srv, s.hs = srv, apiServer(cfg, srv, limit, logger)
	// The probes' and the scrapes' own allowance, which no client of the
	// API's port can take.
	opsLimit := newConnLimiter(opsMaxConns, nil)
	s.opsLn = opsLimit.listener(server.Listener(s.opsLn))
	s.ops = opsServer(cfg, srv, opsLimit, logger)
}

// feedOptions are the options of /changes: its caps, the client's across
// the fleet when it shares Redis.
func (s *service) feedOptions() changeshttp.Options {
	cfg := s.cfg
	opts := changeshttp.Options{MaxStreams: cfg.ChangesMaxStreams, MaxPolls: cfg.ChangesMaxPolls,
		ClientMaxWaits: cfg.ClientMaxWaits, MaxStreamAge: cfg.ChangesMaxStreamAge,
		WriteTimeout: cfg.ChangesWriteTimeout, Metrics: s.registry,
		// Positions are sealed as cursors are, under a label of their own.
		Secret: s.cursorKey, MinPositionWait: cfg.MinPositionWait}
	if s.tier.Enabled() {
		opts.Fleet = s.tier
	}
	return opts
}

// opsMaxConns is the operator listener's connection allowance: kubelet's
// probes, a load balancer's, a scraper or two and `prodapi healthcheck`
// need a handful at once; at the cap a new one closes the longest idle.
const opsMaxConns = 32

// openAdmin listens for the operator's purges when PRODAPI_ADMIN_ADDR is
// set.
func (s *service) openAdmin() error {
	cfg := s.cfg
	if cfg.AdminAddr == "" {
		return nil
	}
	aln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("listening for the admin listener (PRODAPI_ADMIN_ADDR): %w", err)
	}
	s.adminLn = aln
	s.admin = &http.Server{
		Handler: admin.Handler(s.cache, string(cfg.AdminSecret), admin.Options{
			Partial: func(err error) bool { return errors.Is(err, cache.ErrNotPropagated) },
			Logger:  s.logger,
			Metrics: s.registry,
		}),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	return nil
}

// run starts the feeds and serves until ctx ends (nil) or a listener
// fails.
func (s *service) run(ctx context.Context) error {
	for _, f := range s.feeds {
		// Ends when ctx does; the fleet's feed at once on a server
		// without change streams and without a poller.
		go func() {
			if err := f.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				s.logger.Error("change feed stopped", "error", err)
			}
		}()
	}
	s.opsServed = make(chan error, 1)
	s.logger.Info("operator listener", "addr", s.opsLn.Addr().String())
	if s.e.opsReady != nil {
		s.e.opsReady(s.opsLn.Addr().String())
	}
	go func() { s.opsServed <- s.ops.Serve(s.opsLn) }() // ends when Shutdown closes the listener
	s.adminServed = make(chan error, 1)
	if s.admin != nil {
		s.logger.Info("admin listener", "addr", s.adminLn.Addr().String())
		if s.e.adminReady != nil {
			s.e.adminReady(s.adminLn.Addr().String())
		}
		// Ends when Shutdown closes the listener.
		go func() { s.adminServed <- s.admin.Serve(s.adminLn) }()
	}
	s.logger.Info("listening", "addr", s.ln.Addr().String(), "backends", s.b.describe, "config", s.cfg)
	if s.cfg.Sandbox != "" {
		greet(s.e.stdout, s.cfg, s.ln.Addr(), s.opsLn.Addr())
	}
	if s.e.ready != nil {
		s.e.ready(s.ln.Addr().String())
	}

	s.served = make(chan error, 1)
	go func() { s.served <- s.hs.Serve(s.ln) }() // ends when Shutdown closes the listener
	select {
	case err := <-s.served:
		return fmt.Errorf("serving: %w", err)
	case err := <-s.adminServed:
		_ = s.hs.Close()
		return fmt.Errorf("serving the admin listener: %w", err)
	case err := <-s.opsServed:
		_ = s.hs.Close()
		return fmt.Errorf("serving the operator listener: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// shutdown drains the service: unready, the delay, the listeners' grace,
// then the cache, the change log and the Redis tier.
func (s *service) shutdown(ctx context.Context) error {
	cfg := s.cfg
	// Unready first, still serving: load balancers that probe /readyz
	// (on the operator listener, which serves until the API has drained)
	// stop sending before the API's listener closes.
	s.srv.Drain()
	s.logger.Info("shutting down", "delay", cfg.ShutdownDelay.String(), "grace", cfg.ShutdownGrace.String())
	if s.e.draining != nil {
		s.e.draining()
	}
	if cfg.ShutdownDelay > 0 {
		time.Sleep(cfg.ShutdownDelay)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	var errs []error
	if err := s.hs.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("draining requests: %w", err))
	}
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if err := s.ops.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("draining operator requests: %w", err))
	}
	if err := <-s.opsServed; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if s.admin != nil {
		if err := s.admin.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("draining admin requests: %w", err))
		}
		if err := <-s.adminServed; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	// The cache first: its refreshes end, then the writes they queued
	// drain.
	if err := s.cache.Close(sctx); err != nil {
		errs = append(errs, fmt.Errorf("flushing the cache: %w", err))
	}
	if err := s.changes.Close(sctx); err != nil {
		errs = append(errs, fmt.Errorf("closing the change log: %w", err))
	}
	if err := s.tier.Close(sctx); err != nil {
		errs = append(errs, fmt.Errorf("flushing the cache: %w", err))
	}
	s.logger.Info("stopped")
	return errors.Join(errs...)
}

// close releases what open acquired, last first: the backends' clients,
// the traces, the log sink, the listener.
func (s *service) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// noteFeedPolls is /readyz's note while the fleet's feed polls.
func noteFeedPolls(cfg config.Config) string {
	return fmt.Sprintf("the database has no change streams: the feed polls _updated every %s for updates and insertions, "+
		"and walks every collection's ids every %s for deletions, which reach the cache and /changes up to that late",
		config.Duration(cfg.FeedPoll), config.Duration(cfg.FeedReconcile))
}

// streamed reports whether the fleet's feed follows a change stream,
// which obsoletes entries as their documents change, deletions too.
func streamed(f *feed.Feed) bool {
	switch f.Status() {
	case feed.StatusWatching, feed.StatusFollowing:
		return f.Mode() != feed.ModePoll
	}
	return false
}

// apiServer is the http.Server of the API, srv's handler, on a listener
// made by limit.listener(server.Listener(ln)): net/http's own plain-text
// errors (malformed Host, oversized headers) leave in the error
// envelope, and connections count against PRODAPI_MAX_CONNS, which
// answers the oldest long poll early when no connection is idle.
func apiServer(cfg config.Config, srv *server.Server, limit *connLimiter, logger *slog.Logger) *http.Server {
	hs := &http.Server{
		Handler:   srv.Handler(),
		ConnState: limit.connState,
		// A request's connection in its context: a change stream caps
		// its send buffer, and the cap finds a long poll's connection.
		ConnContext:       server.ConnContext,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		// Read more than our limit, so the handler answers oversized
		// headers (431) and request lines (414) in the envelope.
		MaxHeaderBytes: server.NetHTTPMaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Change streams and long polls end at once on Shutdown, which
	// would otherwise wait for them.
	hs.RegisterOnShutdown(srv.EndStreams)
	// At the connection cap with none idle, the oldest long poll is
	// answered early to make room.
	limit.evict = srv.EndOldestPoll
	return hs
}

// opsServer is the http.Server of the operator listener, srv's
// OpsHandler, on a listener made by limit.listener(server.Listener(ln)).
func opsServer(cfg config.Config, srv *server.Server, limit *connLimiter, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           srv.OpsHandler(),
		ConnState:         limit.connState,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10, // a probe's or a scrape's headers
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// greet prints, in sandbox mode, a ready token and a curl line, and where
// the probes and the metrics are.
func greet(w io.Writer, cfg config.Config, addr, opsAddr net.Addr) {
	base := cfg.URL + "/" + cfg.URLPrefix + "/v1"
	fmt.Fprintf(w, "\nprodapi is serving the %s newsroom at %s (listening on %s)\n", sandboxName(cfg.Sandbox), base, addr)
	fmt.Fprintf(w, "Probes and metrics, without a token: %s/healthz, /readyz and /metrics (PRODAPI_OPS_ADDR)\n", localURL(opsAddr))
	if !cfg.AuthEnabled {
		fmt.Fprintf(w, "Authentication is off. Try:\n\n  curl %s/items\n\n", base)
		return
	}
	tok, err := server.MintToken([]byte(cfg.Secret), "sandbox", sources.AllScopes, 24*time.Hour, time.Now())
	if err != nil {
		return
	}
	fmt.Fprintf(w, "A token with every scope, valid for 24 hours:\n\n  export TOKEN=%s\n\nTry:\n\n  curl -H \"Authorization: Bearer $TOKEN\" %s/items\n\n", tok, base)
}

// localURL is the http URL of a listener of this machine's: at its
// address, or at localhost for a wildcard.
func localURL(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	host := "localhost"
	if !ta.IP.IsUnspecified() {
		host = ta.IP.String()
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(ta.Port))
}

func sandboxName(spec string) string {
	if spec == "sample" {
		return "sample"
	}
	return "sandbox (" + spec + ")"
}

// mintToken implements `prodapi token`.
func mintToken(e env, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	scope := fs.String("scope", "", "comma-separated scopes: "+strings.Join(sources.AllScopes, ","))
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	clientID := fs.String("client-id", "prodapi-dev", "client_id claim")
	if err := fs.Parse(args); err != nil {
		return err
	}
	scopeSet := false
	fs.Visit(func(f *flag.Flag) { scopeSet = scopeSet || f.Name == "scope" })
	if !scopeSet {
		// A token without scopes can read nothing: say so rather than mint
		// one by default.
		return fmt.Errorf("token: -scope is required: the scopes the token grants, comma-separated, of %s (-scope '' mints a token without any)",
			strings.Join(sources.AllScopes, ", "))
	}
	secret := e.getenv("AUTH_SERVER_SHARED_SECRET")
	if secret == "" {
		return errors.New("token: AUTH_SERVER_SHARED_SECRET is not set")
	}
	var scopes []string
	for s := range strings.SplitSeq(*scope, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		known := false
		for _, k := range sources.AllScopes {
			known = known || k == s
		}
		if !known {
			return fmt.Errorf("token: unknown scope %q (known: %s)", s, strings.Join(sources.AllScopes, ", "))
		}
		scopes = append(scopes, s)
	}
	if *ttl <= 0 {
		return errors.New("token: -ttl must be positive")
	}
	tok, err := server.MintToken([]byte(secret), *clientID, scopes, *ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, tok)
	return nil
}
