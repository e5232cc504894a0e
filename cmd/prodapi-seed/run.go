package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// Targets the seed can load, in the order it loads them.
const (
	targetMongo   = "mongo"
	targetElastic = "elastic"
	targetS3      = "s3"
)

var allTargets = []string{targetMongo, targetElastic, targetS3}

const usage = `Usage: prodapi-seed [flags]

Loads a newsroom (the bundled sample, or -data DIR) into MongoDB, Elasticsearch and object
storage as prodapi reads them (MONGO_URI, ELASTICSEARCH_URL, ELASTICSEARCH_INDEX, OBJSTORE_*),
or, with -out DIR, writes it as a sandbox directory. -scale N first makes a newsroom of N items
out of it: copies of its items, planning, events, assignments and event history, with their
links kept within each copy, ids unique, and times spread back an hour a copy.

  prodapi-seed                                   # the sample into the platform
  prodapi-seed -scale 300000                     # 300,000 items into the platform
  prodapi-seed -scale 25000 -out /tmp/newsroom   # then PRODAPI_SANDBOX=/tmp/newsroom

Flags:
`

// settings are the seed's flags and the platform settings it shares with
// prodapi.
type settings struct {
	wait     time.Duration // how long to wait for each server
	data     string        // "sample" or a newsroom directory
	targets  []string      // subset of allTargets, in allTargets order
	scale    int           // items to make from the newsroom; 0: the newsroom as it is
	seed     uint64        // of a scaled newsroom's time spread
	out      string        // a directory to write the newsroom to instead of loading it
	lim      limits        // of each bulk or insert request
	parallel int           // bulk or insert requests in flight at once
	compress bool          // gzip Elasticsearch bulk bodies
	timeout  time.Duration // of each request while loading
	progress time.Duration // between progress lines
	cfg      config.Config
}

// Defaults of a request's size: Elasticsearch's guidance for bulk bodies
// is a few megabytes; a thousand sample items make about four.
const (
	defaultBatchDocs  = 1000
	defaultBatchBytes = 8 << 20
)

// defaultParallel is how many bulk or insert requests a stage keeps in
// flight: enough that the server always has the next one in hand while
// it answers one (and a node of several cores indexes several at once),
// few enough that their bodies stay well inside the tenth of its heap an
// Elasticsearch node lets bulk bodies hold (four of 8 MiB at most: 32
// MiB, against 51 MiB on a 512 MiB heap).
const defaultParallel = 4

// parseOptions reads the flags and, through config.Load, the variables
// prodapi reads, with its defaults. The seed serves nothing, so it needs
// no AUTH_SERVER_SHARED_SECRET.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (settings, error) {
	fset := flag.NewFlagSet("prodapi-seed", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), usage)
		fset.PrintDefaults()
	}
	wait := fset.Duration("wait", 120*time.Second, "how long to wait for each server to answer")
	data := fset.String("data", "sample", `the newsroom to load: "sample" (the bundled one) or a directory of <collection>.json and assets/`)
	targets := fset.String("targets", strings.Join(allTargets, ","), "what to load, comma-separated: "+strings.Join(allTargets, ","))
	scale := fset.Int("scale", 0, "make a newsroom of this many items out of -data's (0: load it as it is)")
	seed := fset.Uint64("seed", 1, "with -scale, what spreads the copies' times (the same seed and -scale give the same newsroom)")
	out := fset.String("out", "", "write the newsroom as a sandbox directory (PRODAPI_SANDBOX=DIR serves it) instead of loading it; DIR must be empty or absent")
	batchDocs := fset.Int("batch-docs", defaultBatchDocs, "at most this many documents per bulk or insert request")
	batchBytes := fset.Int("batch-bytes", defaultBatchBytes, "at most this many bytes per bulk or insert request (a larger document goes alone)")
	parallel := fset.Int("parallel", defaultParallel, "at most this many bulk or insert requests in flight at once")
	compress := fset.Bool("compress", false, "gzip the bodies of Elasticsearch bulk requests (for a node across a slow link; it costs CPU on both sides)")
	timeout := fset.Duration("request-timeout", defaultRequestTimeout, "how long each request may take while loading (a bulk request, an insert, a put)")
	every := fset.Duration("progress", 5*time.Second, "how often to log progress while loading or writing (0: after every request)")
	if err := fset.Parse(args); err != nil {
		return settings{}, err
	}
	if fset.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected arguments %q", fset.Args())
	}
	o := settings{wait: *wait, data: *data, scale: *scale, seed: *seed, out: *out,
		lim: limits{docs: *batchDocs, bytes: *batchBytes}, parallel: *parallel, compress: *compress, timeout: *timeout, progress: *every}
	if o.wait <= 0 {
		return settings{}, errors.New("-wait must be positive")
	}
	if o.data == "" {
		return settings{}, errors.New("-data must name the sample or a directory")
	}
	if o.scale < 0 || o.scale > maxScale {
		return settings{}, fmt.Errorf("-scale must be between 0 and %d", maxScale)
	}
	if o.lim.docs < 1 || o.lim.bytes < 1 {
		return settings{}, errors.New("-batch-docs and -batch-bytes must be positive")
	}
	if o.parallel < 1 {
		return settings{}, errors.New("-parallel must be positive")
	}
	if o.timeout <= 0 {
		return settings{}, errors.New("-request-timeout must be positive")
	}
	if o.progress < 0 {
		return settings{}, errors.New("-progress must not be negative")
	}
	explicit := false
	fset.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "targets" })
	if o.out != "" && explicit {
		return settings{}, errors.New("-out writes a directory and loads nothing: it takes no -targets")
	}
	want := map[string]bool{}
	for t := range strings.SplitSeq(*targets, ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		if !slices.Contains(allTargets, t) {
			return settings{}, fmt.Errorf("-targets: unknown target %q (known: %s)", t, strings.Join(allTargets, ", "))
		}
		want[t] = true
	}
	for _, t := range allTargets {
		if want[t] {
			o.targets = append(o.targets, t)
		}
	}
	if len(o.targets) == 0 {
		return settings{}, errors.New("-targets names nothing to load")
	}
	cfg, err := config.Load(func(k string) string {
		if k == "PRODAPI_AUTH_ENABLED" {
			return "false"
		}
		return getenv(k)
	})
	if err != nil {
		return settings{}, fmt.Errorf("configuration:\n%w", err)
	}
	o.cfg = cfg
	return o, nil
}

// newsroomFS returns the files of the newsroom to load.
func newsroomFS(data string) (fs.FS, error) {
	if data == "sample" {
		return sandbox.SampleFS(), nil
	}
	info, err := os.Stat(data)
	if err != nil {
		return nil, fmt.Errorf("-data: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("-data: %s is not a directory", data)
	}
	return os.DirFS(data), nil
}

// run seeds the platform, or writes the sandbox directory -out names; it
// logs JSON lines to stderr and returns the first failure.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	fsys, err := newsroomFS(o.data)
	if err != nil {
		return err
	}
	room, err := loadNewsroom(ctx, fsys)
	if err != nil {
		return err
	}
	logger.Info("newsroom loaded", "data", o.data, "documents", room.counts(), "assets", len(room.assets))
	corp := room.corpus()
	if o.scale > 0 {
		s, err := newScaler(room, o.scale, o.seed)
		if err != nil {
			return err
		}
		corp = s.corpus()
		logger.Info("newsroom scaled", "items", o.scale, "copies", s.copies, "seed", o.seed, "documents", corp.counts())
		if s.broken {
			logger.Warn("newsroom scaled: the last copy could not take its items in whole linked groups; some of its links point to items it does not have")
		}
	}
	l := loader{lim: o.lim, parallel: o.parallel, compress: o.compress, timeout: o.timeout, every: o.progress, logger: logger}
	start := time.Now()
	if o.out != "" {
		if err := writeSandbox(ctx, o.out, corp, l); err != nil {
			return err
		}
		logger.Info("written", "dir", o.out, "duration", time.Since(start).Round(time.Millisecond).String())
		return nil
	}
	w := waiter{wait: o.wait, logger: logger}
	for _, t := range o.targets {
		var err error
		switch t {
		case targetMongo:
			err = seedMongo(ctx, o.cfg, corp, w, l)
		case targetElastic:
			err = seedElastic(ctx, o.cfg, corp, w, l)
		case targetS3:
			if !o.cfg.ObjStore.Enabled() {
				logger.Info("s3: OBJSTORE_CONTAINER_NAME is not set; skipping object storage")
				continue
			}
			err = seedS3(ctx, o.cfg, corp, w, l)
		}
		if err != nil {
			return err
		}
	}
	logger.Info("seeded", "targets", o.targets, "duration", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// A loader is what the stages share: the size of their requests and the
// time each may take, how often they report, and their clock.
type loader struct {
	lim      limits
	parallel int           // requests in flight at once; 0 means 1
	compress bool          // gzip Elasticsearch bulk bodies
	timeout  time.Duration // of each request (a stage of any size is many); 0: defaultRequestTimeout
	every    time.Duration
	logger   *slog.Logger
	// now and after are time.Now and time.After when nil; tests replace
	// them so that progress and retries need no real time.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

func (l loader) progress(msg string, total int, attrs ...any) *progress {
	return newProgress(l.logger, l.every, l.now, msg, total, attrs...)
}

// defaultRequestTimeout is generous: a bulk request of a few megabytes
// can take tens of seconds on a busy single node.
const defaultRequestTimeout = 2 * time.Minute

func (l loader) requestTimeout() time.Duration {
	if l.timeout > 0 {
		return l.timeout
	}
	return defaultRequestTimeout
}

// within runs one request under its own timeout.
func (l loader) within(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.requestTimeout())
	defer cancel()
	return op(ctx)
}

// pause waits d, or until ctx ends.
func (l loader) pause(ctx context.Context, d time.Duration) error {
	after := l.after
	if after == nil {
		after = time.After
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-after(d):
		return nil
	}
}
