package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
)

// checkPlatform implements `prodapi check`: with the service's settings,
// it connects to the platform and reports what prodapi needs of it, one
// finding per line, then the indexes an operator could create. It writes
// nothing anywhere: read commands only (buildInfo, listIndexes, a change
// stream opened and closed, count where the feed polls, GET /, searches
// of no documents, PING, INFO, HeadBucket). It fails when prodapi could not work: a server
// unreachable, a product or version refused. A missing index is
// reported, not a failure.
func checkPlatform(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	b, err := openBackends(ctx, cfg, telemetry{queries: metrics.NewMetrics().SourceQueries()}, quiet)
	if err != nil {
		return err
	}
	defer b.close(quiet)
	rdb, err := b.redis(cfg)
	if err != nil {
		return err
	}
	p := &checkState{cfg: cfg, backends: b, redis: rdb}
	var findings []finding
	for _, check := range platformChecks() {
		findings = append(findings, check(ctx, p)...)
	}
	failed := writeReport(e.stdout, cfg, findings)
	if failed > 0 {
		return fmt.Errorf("check: %d %s", failed, plural(failed, "failure", "failures"))
	}
	return nil
}

// A platformCheck is one entry of the report: it looks at one thing
// prodapi needs and says what it found, in a finding per line. It may
// read what the checks before it learnt (checkState).
type platformCheck func(ctx context.Context, p *checkState) []finding

// platformChecks is the report, in order. A new check is one more entry.
func platformChecks() []platformCheck {
	return []platformCheck{
		checkMongo,
		checkChangeStreams,
		checkReconcile,
		checkElastic,
		checkSearchIndexes,
		checkRedis,
		checkObjectStorage,
		checkIndexes,
	}
}

// checkState is what the checks look at: the clients prodapi would use, and
// what the earlier checks learnt.
type checkState struct {
	cfg      config.Config
	backends *backends
	redis    redis.UniversalClient // nil: REDIS_URL unset

	mongoUp, elasticUp bool
	// polls: the database has no change streams, so the feed polls
	// each collection's _updated (checkChangeStreams says).
	polls bool
}

// A finding is one line of the report.
type finding struct {
	level   level
	subject string
	text    string
	// fix is a command an operator could run (a createIndex), listed
	// after the findings.
	fix string
}

type level int

const (
	levelInfo level = iota // not configured or not applicable
	levelOK
	levelWarn // prodapi works, less well
	levelFail // prodapi could not work
)

func (l level) String() string {
	return [...]string{"-", "ok", "warn", "FAIL"}[l]
}

func found(l level, subject, format string, args ...any) finding {
	return finding{level: l, subject: subject, text: fmt.Sprintf(format, args...)}
}

func checkMongo(ctx context.Context, p *checkState) []finding {
	const subject = "mongo"
	if p.backends.mongo == nil {
		return []finding{found(levelInfo, subject, "not used: PRODAPI_SANDBOX serves %s", p.cfg.Sandbox)}
	}
	where := fmt.Sprintf("at %s, database %s", p.cfg.MongoURI, mongosrc.DatabaseName(string(p.cfg.MongoURI)))
	srv, err := p.backends.mongo.BuildInfo(ctx)
	if err != nil {
		return []finding{found(levelFail, subject, "MongoDB %s cannot be used: %s", where, detail(err))}
	}
	p.mongoUp = true
	switch {
	case srv.FerretDB != "":
		return []finding{found(levelWarn, subject, "FerretDB %s (answering as MongoDB %s) %s: a test server for prodapi, with the differences the README lists; production should run MongoDB",
			srv.FerretDB, srv.Version, where)}
	case !mongosrc.Tested(srv.Version):
		return []finding{found(levelWarn, subject, "MongoDB %s %s: outside the versions prodapi is tested with (4.4 to 7)", srv.Version, where)}
	}
	return []finding{found(levelOK, subject, "MongoDB %s %s", srv.Version, where)}
}

func checkChangeStreams(ctx context.Context, p *checkState) []finding {
	const subject = "change streams"
	switch {
	case p.backends.mongo == nil && p.backends.watcher != nil:
		return []finding{found(levelInfo, subject, "not used: the sandbox directory is watched, and reports its own changes")}
	case p.backends.mongo == nil:
		return []finding{found(levelInfo, subject, "not used, and nothing is watched: the sandbox %s never changes", p.cfg.Sandbox)}
	case !p.mongoUp:
		return []finding{found(levelInfo, subject, "not checked: MongoDB cannot be used")}
	}
	switch err := p.backends.mongo.ChangeStreams(ctx); {
	case err == nil:
		return []finding{found(levelOK, subject, "available: one replica follows the database's writes and every replica drops what they change at once")}
	case errors.Is(err, mongosrc.ErrNoChangeStreams):
		p.polls = true
		return []finding{found(levelWarn, subject, "not available (a standalone server, or FerretDB): the feed polls each collection's _updated every %s instead, "+
			"so updates reach the cache and /changes at once and deletions only when it reconciles the ids, every %s",
			config.Duration(p.cfg.FeedPoll), config.Duration(p.cfg.FeedReconcile))}
	default:
		return []finding{found(levelWarn, subject, "could not open one: %s; cached entries refresh by their TTL until the feed works", detail(err))}
	}
}

// knownIDBytes is about what Redis spends on an id the reconcile knows,
// in its sorted set: 130 bytes for an ObjectId's hex, 180 for a
// 70-character URN (redis-server 7, used_memory over 100,000 ids).
const knownIDBytes = 150

// checkReconcile reports what the polling fallback's reconcile costs:
// every PRODAPI_FEED_RECONCILE, the lease holder reads the _id of every
// document of every collection, in pages, and keeps the ids it knows.
func checkReconcile(ctx context.Context, p *checkState) []finding {
	const subject = "reconcile"
	if !p.polls {
		return nil
	}
	var docs, pages, largestDocs int64
	largest := ""
	for _, coll := range sources.Collections {
		n, err := p.backends.mongo.EstimatedCount(ctx, coll)
		if err != nil {
			return []finding{found(levelWarn, subject, "cannot count the documents of %s: %s", coll, detail(err))}
		}
		docs += n
		// A page per ReconcilePage ids, and the short last page of each
		// type of id (strings, then ObjectIds).
		pages += n/feed.ReconcilePage + 2
		if n > largestDocs {
			largest, largestDocs = coll, n
		}
	}
	kept := fmt.Sprintf("in Redis, a sorted set per collection (about %s)", sizeOf(docs*knownIDBytes))
	if p.redis == nil {
		kept = "in the holder's memory (REDIS_URL is not set)"
	}
	text := fmt.Sprintf("every %s the feed's holder reads the _id of every document to find deletions: %d %s in %d collections "+
		"(the most in %s: %d), about %d queries of up to %d ids on the _id index; the ids it knows are kept %s",
		config.Duration(p.cfg.FeedReconcile), docs, plural(int(docs), "document", "documents"), len(sources.Collections),
		cmp.Or(largest, "none"), largestDocs, pages, feed.ReconcilePage, kept)
	return []finding{found(levelOK, subject, "%s", text)}
}

// sizeOf is a byte count in the unit that suits it.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

func checkElastic(ctx context.Context, p *checkState) []finding {
	const subject = "elasticsearch"
	if p.backends.elastic == nil {
		return []finding{found(levelInfo, subject, "not used: PRODAPI_SANDBOX serves %s", p.cfg.Sandbox)}
	}
	node, err := p.backends.elastic.Node(ctx)
	if err != nil {
		return []finding{found(levelFail, subject, "%s cannot be reached: %s", p.cfg.ElasticURL, detail(err))}
	}
	what := "Elasticsearch " + node.Version
	if node.BuildFlavor != "" {
		what += " (" + node.BuildFlavor + ")"
	}
	switch {
	case !node.Accepted:
		product := strings.TrimSpace(node.Distribution + " " + node.Version)
		return []finding{found(levelFail, subject, "%s answers as %q (tagline %q), which the product check refuses: prodapi would refuse every answer",
			p.cfg.ElasticURL, product, node.Tagline)}
	case !node.Tested():
		p.elasticUp = true
		return []finding{found(levelWarn, subject, "%s at %s: outside the versions prodapi is tested with (7.10 to 7.17, 8.x)", what, p.cfg.ElasticURL)}
	}
	p.elasticUp = true
	how := "the X-Elastic-Product header"
	if node.Legacy() {
		how = "its GET /, as the 7.x client checked it (no X-Elastic-Product header before 7.14)"
	}
	return []finding{found(levelOK, subject, "%s at %s: the product check passes by %s", what, p.cfg.ElasticURL, how)}
}

func checkSearchIndexes(ctx context.Context, p *checkState) []finding {
	const subject = "search index"
	if !p.elasticUp {
		return nil
	}
	var out []finding
	for _, r := range sources.Resources() {
		if !r.Search {
			continue
		}
		index := p.cfg.ElasticIndex + "_" + r.Collection
		n, exists, err := p.backends.elastic.Count(ctx, r.Collection)
		switch {
		case err != nil:
			out = append(out, found(levelFail, subject, "%s cannot be searched: %s", index, detail(err)))
		case !exists:
			out = append(out, found(levelWarn, subject, "%s does not exist: %s lists read as empty (a fresh newsroom, or ELASTICSEARCH_INDEX is not Superdesk's)", index, r.Name))
		case n >= sources.MaxTotal:
			out = append(out, found(levelOK, subject, "%s: %d documents or more", index, sources.MaxTotal))
		default:
			out = append(out, found(levelOK, subject, "%s: %d %s", index, n, plural(n, "document", "documents")))
		}
	}
	return out
}

func checkRedis(ctx context.Context, p *checkState) []finding {
	const subject = "redis"
	if p.redis == nil {
		return []finding{found(levelInfo, subject, "REDIS_URL is not set: each replica caches in process only")}
	}
	info, err := p.redis.Info(ctx, "server").Result()
	if err != nil {
		return []finding{found(levelFail, subject, "%s cannot be reached: %v", p.cfg.Cache.RedisURL, err)}
	}
	version := "(version unknown)"
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	return []finding{found(levelOK, subject, "Redis %s at %s", version, p.cfg.Cache.RedisURL)}
}

func checkObjectStorage(ctx context.Context, p *checkState) []finding {
	const subject = "object storage"
	switch {
	case p.backends.mongo == nil:
		return []finding{found(levelInfo, subject, "not used: the sandbox serves its own media")}
	case p.backends.media == nil:
		return []finding{found(levelInfo, subject, "OBJSTORE_CONTAINER_NAME is not set: media stream from GridFS")}
	}
	o := p.cfg.ObjStore
	where := "bucket " + o.Container
	if o.EndpointURL != "" {
		where += " at " + o.EndpointURL
	}
	if err := p.backends.media.Ping(ctx); err != nil {
		return []finding{found(levelFail, subject, "%s cannot be read: %s", where, detail(err))}
	}
	return []finding{found(levelOK, subject, "%s: readable", where)}
}

// listFilters are the fields clients filter the document lists on, beside
// the default sort: a newsroom's history is read per event and per
// operation.
var listFilters = map[string][]string{"events_history": {"event_id", "operation"}}

// checkIndexes reports, for each query prodapi sends to MongoDB that an
// index could serve (the document lists in their default sort, with the
// filters clients use, the enrichment lookups, the feed's lookups of what
// a change obsoletes, GridFS reads, and each collection's poll where the
// feed polls), whether an index does, and the index to create when none
// does.
func checkIndexes(ctx context.Context, p *checkState) []finding {
	const subject = "index"
	if !p.mongoUp {
		return nil
	}
	var needs []mongosrc.Need
	for _, r := range sources.Resources() {
		if r.Search {
			continue
		}
		needs = append(needs, mongosrc.ListNeed(r))
		for _, f := range listFilters[r.Name] {
			needs = append(needs, mongosrc.ListNeed(r, f))
		}
	}
	// The enrichers' lookups, then the feed's, which find the documents
	// a change obsoletes (once per change, on the document database).
	for _, l := range slices.Concat(enrich.Lookups(), enrich.DeriveLookups()) {
		if n := mongosrc.LookupNeed(l); !l.Search && !slices.ContainsFunc(needs, func(m mongosrc.Need) bool { return m.String() == n.String() }) {
			needs = append(needs, n)
		}
	}
	if p.backends.media == nil {
		needs = append(needs, mongosrc.ChunksNeed())
	}
	if p.polls {
		for _, coll := range sources.Collections {
			needs = append(needs, mongosrc.PollNeed(coll))
		}
	}

	type listing struct {
		indexes []mongosrc.Index
		exists  bool
		err     error
	}
	listed := map[string]*listing{}
	// proposed: the indexes proposed so far, per collection, so that a
	// query one of them serves gets no second proposal.
	proposed := map[string][]mongosrc.Index{}
	var out []finding
	for _, n := range needs {
		l := listed[n.Collection]
		if l == nil {
			l = &listing{}
			l.indexes, l.exists, l.err = p.backends.mongo.Indexes(ctx, n.Collection)
			listed[n.Collection] = l
			switch {
			case l.err != nil:
				out = append(out, found(levelFail, subject, "%s: cannot list its indexes: %s", n.Collection, detail(l.err)))
			case !l.exists:
				out = append(out, found(levelWarn, subject, "%s: no such collection in database %s (a fresh newsroom, or MONGO_URI names another database)",
					n.Collection, mongosrc.DatabaseName(string(p.cfg.MongoURI))))
			}
		}
		if l.err != nil || !l.exists {
			continue
		}
		if ix, ok := n.ServedBy(l.indexes); ok {
			out = append(out, found(levelOK, subject, "%s: served by %s", n, ix.Name))
			continue
		}
		f := found(levelWarn, subject, "%s: no index serves it; the server reads the whole collection", n)
		if ix, ok := n.ServedBy(proposed[n.Collection]); ok {
			f.text += "; the index proposed for " + ix.Name + " would serve it too"
		} else {
			f.fix = n.CreateIndex()
			proposed[n.Collection] = append(proposed[n.Collection], mongosrc.Index{Name: n.String(), Keys: n.Keys()})
		}
		out = append(out, f)
	}
	return out
}

// writeReport prints the findings, then the indexes to create, then a
// verdict, and returns the number of failures.
func writeReport(w io.Writer, cfg config.Config, findings []finding) int {
	fmt.Fprint(w, "prodapi check: what prodapi needs from the platform (it writes nothing)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var fixes []string
	failed, warned := 0, 0
	for _, f := range findings {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.level, f.subject, f.text)
		switch f.level {
		case levelFail:
			failed++
		case levelWarn:
			warned++
		}
		if f.fix != "" && !slices.Contains(fixes, f.fix) {
			fixes = append(fixes, f.fix)
		}
	}
	tw.Flush()
	if len(fixes) > 0 {
		fmt.Fprintf(w, "\nIndexes an operator could create (prodapi never does: it writes nothing to the newsroom's database):\n\n  use %s\n",
			mongosrc.DatabaseName(string(cfg.MongoURI)))
		for _, f := range fixes {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "\nprodapi could not work with this platform: %d %s, %d %s.\n",
			failed, plural(failed, "failure", "failures"), warned, plural(warned, "warning", "warnings"))
	} else {
		fmt.Fprintf(w, "\nprodapi can work with this platform: %d %s.\n", warned, plural(warned, "warning", "warnings"))
	}
	return failed
}

// detail is an adapter error's text for an operator: the driver's own
// description when the error carries one (MongoDB's), else its message.
func detail(err error) string {
	var d interface{ Detail() string }
	if errors.As(err, &d) && d.Detail() != "" {
		return d.Detail()
	}
	return err.Error()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
