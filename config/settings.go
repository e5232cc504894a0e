package config

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A Setting is one environment variable the service reads. The table of
// them, Settings, is the one list: `prodapi help` prints it, `prodapi
// config` and the start-up log print each one's effective value, and
// LoadFrom refuses a PRODAPI_ variable that is not in it (and warns of
// others that look like its names misspelt). A test checks that Load
// reads exactly these variables.
type Setting struct {
	Name string // the variable; a per-resource family ends in _<RESOURCE>
	Help string // one line
	// PerResource marks PRODAPI_CACHE_TTL_<RESOURCE>: one variable per
	// resource, Name being its prefix plus "<RESOURCE>".
	PerResource bool
	// Value is the setting's effective value in c, redacted when secret.
	// The default shown by help is Value of the configuration Load gives
	// with nothing set, so defaults are written once, in Load.
	Value func(c Config) string
}

// Shown is the setting's row in `prodapi config` and the start-up log:
// its effective value in c or, where LoadFrom refused the value set,
// that value and why, rather than the default the field fell back on
// (for the per-resource family, each resource's).
func (s Setting) Shown(c Config) string {
	if !s.PerResource {
		if bad, ok := c.invalid[s.Name]; ok {
			return bad.String()
		}
		return s.Value(c)
	}
	parts := strings.Fields(s.Value(c)) // ITEMS=10s ...
	for i, part := range parts {
		res, _, _ := strings.Cut(part, "=")
		if bad, ok := c.invalid[perResourcePrefix+res]; ok {
			parts[i] = res + "=" + bad.String()
		}
	}
	return strings.Join(parts, " ")
}

// perResourcePrefix is the prefix of the per-resource TTL variables.
const perResourcePrefix = "PRODAPI_CACHE_TTL_"

// Settings returns every setting, in the order help prints them.
func Settings() []Setting { return slices.Clone(settings) }

var settings = []Setting{
	{Name: "PORT", Help: "listen port", Value: func(c Config) string { return c.Port }},
	{Name: "PRODAPI_URL", Help: "public base URL (default: http://localhost:<the port listened on>); builds MEDIA_PREFIX", Value: func(c Config) string { return c.URL }},
	{Name: "PRODAPI_URL_PREFIX", Help: "the API is served at /<prefix>/v1", Value: func(c Config) string { return c.URLPrefix }},
	{Name: "MEDIA_PREFIX", Help: "base of rendition hrefs (default: $PRODAPI_URL/<prefix>/v1/assets)", Value: func(c Config) string { return c.MediaPrefix }},
	{Name: "AUTH_SERVER_SHARED_SECRET", Help: "HS256 key of Superdesk's auth server; required while auth is on", Value: func(c Config) string { return c.Secret.String() }},
	{Name: "PRODAPI_AUTH_ENABLED", Help: "check tokens (true/false spellings; anything else is an error)", Value: func(c Config) string { return strconv.FormatBool(c.AuthEnabled) }},
	{Name: "AUTH_LEEWAY", Help: "clock skew allowed on exp and nbf (at most 1m)", Value: func(c Config) string { return Duration(c.AuthLeeway) }},
	{Name: "PRODAPI_AUDIENCE", Help: "tokens carrying aud must name it", Value: func(c Config) string { return c.Audience }},
	{Name: "PRODAPI_TOKEN_URL", Help: "token endpoint of Superdesk's auth server (https://<superdesk>/api/auth_server/token); set, the reference page offers OAuth 2 client credentials against it", Value: func(c Config) string { return c.TokenURL }},
	{Name: "PRODAPI_ISSUER", Help: "every token must carry this iss (Superdesk's: \"Superdesk Auth Server\"); unset: any", Value: func(c Config) string { return c.Issuer }},
	{Name: "PRODAPI_CURSOR_SECRET", Help: "seals list cursors, the same on every replica; at least 32 bytes (unset: derived from AUTH_SERVER_SHARED_SECRET)", Value: func(c Config) string { return c.CursorSecret.String() }},
	{Name: "DEBUG", Help: "debug-level logs", Value: func(c Config) string { return strconv.FormatBool(c.Debug) }},
	{Name: "PRODAPI_ACCESS_LOG_HITS", Help: "share of cache hits written to the access log: 1 all, 0.01 one in a hundred, 0 none (other requests always)", Value: func(c Config) string {
		return strconv.FormatFloat(c.AccessLogHits, 'g', -1, 64)
	}},
	{Name: "PRODAPI_TRUSTED_PROXY_HEADER", Help: "header the proxy in front writes the client's address in (X-Forwarded-For, Forwarded, X-Real-IP), believed from PRODAPI_TRUSTED_PROXIES (from any peer without them: a warning); unset: the client is the TCP peer", Value: func(c Config) string { return c.TrustedProxyHeader }},
	{Name: "PRODAPI_TRUSTED_PROXIES", Help: "address ranges of the proxies whose header is believed, comma-separated (10.0.0.0/8,192.0.2.7), as nginx's set_real_ip_from: the client is the header's right-most address outside them", Value: func(c Config) string {
		var s []string
		for _, p := range c.TrustedProxies {
			s = append(s, p.String())
		}
		return strings.Join(s, ",")
	}},
	{Name: "SUPERDESK_TESTING", Help: "accepted for compatibility; no effect", Value: func(c Config) string { return strconv.FormatBool(c.Testing) }},
	{Name: "PRODAPI_SANDBOX", Help: `"sample" or a directory of <collection>.json: serve it, no servers needed`, Value: func(c Config) string { return c.Sandbox }},
	{Name: "PRODAPI_SANDBOX_LATENCY", Help: "delay every sandbox query (to model a real backend)", Value: func(c Config) string { return Duration(c.SandboxLatency) }},
	{Name: "MONGO_URI", Help: "MongoDB of the newsroom", Value: func(c Config) string { return c.MongoURI.String() }},
	{Name: "PRODAPI_MONGO_MAX_POOL", Help: "MongoDB connection pool size", Value: func(c Config) string { return strconv.FormatUint(c.MongoMaxPool, 10) }},
	{Name: "ELASTICSEARCH_URL", Help: "Elasticsearch of the newsroom", Value: func(c Config) string { return c.ElasticURL.String() }},
	{Name: "ELASTICSEARCH_INDEX", Help: "index prefix: <prefix>_archive, ...", Value: func(c Config) string { return c.ElasticIndex }},
	{Name: "PRODAPI_BACKEND_TIMEOUT", Help: "per backend operation", Value: func(c Config) string { return Duration(c.BackendTimeout) }},
	{Name: "PRODAPI_WALK_READ_AHEAD", Help: "pages a cursor walk is read ahead of its client (0: none)", Value: func(c Config) string { return strconv.FormatUint(c.WalkReadAhead, 10) }},
	{Name: "OBJSTORE_CONTAINER_NAME", Help: "S3 bucket of the media; set, media are presigned redirects, unset, GridFS streams", Value: func(c Config) string { return c.ObjStore.Container }},
	{Name: "OBJSTORE_ACCESS_KEY_ID", Help: "S3 access key (unset: the AWS default chain)", Value: func(c Config) string { return Secret(c.ObjStore.AccessKeyID).String() }},
	{Name: "OBJSTORE_SECRET_ACCESS_KEY", Help: "S3 secret key", Value: func(c Config) string { return c.ObjStore.SecretAccessKey.String() }},
	{Name: "OBJSTORE_REGION", Help: "S3 region", Value: func(c Config) string { return c.ObjStore.Region }},
	{Name: "OBJSTORE_S3_SUBFOLDER", Help: `key prefix in the bucket ("" or "false": none)`, Value: func(c Config) string { return c.ObjStore.Subfolder }},
	{Name: "OBJSTORE_OBJECT_ACL", Help: "used by Superdesk on writes; accepted, unused", Value: func(c Config) string { return c.ObjStore.ACL }},
	{Name: "OBJSTORE_ENDPOINT_URL", Help: "S3-compatible endpoint (MinIO, ...); unset: AWS", Value: func(c Config) string { return c.ObjStore.EndpointURL }},
	{Name: "PRODAPI_ASSET_URL_LIFETIME", Help: "lifetime of presigned media URLs (at most 7 days)", Value: func(c Config) string { return Duration(c.ObjStore.URLLifetime) }},
	{Name: "REDIS_URL", Help: "shared cache: redis://, rediss://, redis+cluster://, redis-sentinel://...; unset: in-process tier only", Value: func(c Config) string { return c.Cache.RedisURL.String() }},
	{Name: "PRODAPI_CACHE_TTL", Help: "freshness of every list and detail, desks and users too", Value: func(c Config) string {
		if c.Cache.ListTTL == c.Cache.DetailTTL {
			return Duration(c.Cache.ListTTL)
		}
		return Duration(c.Cache.ListTTL) + " lists, " + Duration(c.Cache.DetailTTL) + " details"
	}},
	{Name: perResourcePrefix + "<RESOURCE>", PerResource: true, Help: "freshness of one resource's lists and details, e.g. PRODAPI_CACHE_TTL_ITEMS=10s", Value: func(c Config) string {
		var parts []string
		for _, r := range slices.Sorted(maps.Keys(c.Cache.ResourceTTL)) {
			parts = append(parts, strings.ToUpper(r)+"="+Duration(c.Cache.ResourceTTL[r]))
		}
		return strings.Join(parts, " ")
	}},
	{Name: "PRODAPI_CACHE_STALE", Help: "serve-stale window after freshness (while refreshing, while a backend fails)", Value: func(c Config) string { return Duration(c.Cache.Stale) }},
	{Name: "PRODAPI_CACHE_NOTFOUND_TTL", Help: "freshness of 404s", Value: func(c Config) string { return Duration(c.Cache.NotFoundTTL) }},
	{Name: "PRODAPI_CACHE_TTL_ASSETS", Help: "freshness of media redirects; must be below PRODAPI_ASSET_URL_LIFETIME", Value: func(c Config) string { return Duration(c.Cache.AssetTTL) }},
	{Name: "PRODAPI_CACHE_LOCAL_BYTES", Help: "in-process tier size in bytes (negative: off)", Value: func(c Config) string { return strconv.FormatInt(c.Cache.LocalBytes, 10) }},
	{Name: "PRODAPI_CACHE_LOCAL_TTL", Help: "how long the in-process tier serves an entry before asking Redis again", Value: func(c Config) string { return Duration(c.Cache.LocalTTL) }},
	{Name: "PRODAPI_ADMIN_ADDR", Help: "admin listener (POST /purge), e.g. 127.0.0.1:5501; empty: off", Value: func(c Config) string { return c.AdminAddr }},
	{Name: "PRODAPI_ADMIN_SECRET", Help: "bearer secret of the admin listener; at least 32 bytes, required with PRODAPI_ADMIN_ADDR", Value: func(c Config) string { return c.AdminSecret.String() }},
	{Name: "PRODAPI_OPS_ADDR", Help: "operator listener: /healthz, /readyz and /metrics, without authentication, apart from the API's port (which answers them 404)", Value: func(c Config) string { return c.OpsAddr }},
	{Name: "PRODAPI_SHUTDOWN_GRACE", Help: "drain time on SIGTERM", Value: func(c Config) string { return Duration(c.ShutdownGrace) }},
	{Name: "PRODAPI_SHUTDOWN_DELAY", Help: "on SIGTERM, how long /readyz answers 503 while the listener still serves, before the drain", Value: func(c Config) string { return Duration(c.ShutdownDelay) }},
	{Name: "PRODAPI_READY_REQUIRES_BACKENDS", Help: "true: /readyz answers 503 while no backend can answer (default: readiness is the replica's own)", Value: func(c Config) string {
		return strconv.FormatBool(c.ReadyRequiresBackends)
	}},
	{Name: "PRODAPI_READ_HEADER_TIMEOUT", Help: "time to read a request's headers", Value: func(c Config) string { return Duration(c.ReadHeaderTimeout) }},
	{Name: "PRODAPI_READ_TIMEOUT", Help: "time to read a whole request (0: none)", Value: func(c Config) string { return Duration(c.ReadTimeout) }},
	{Name: "PRODAPI_WRITE_TIMEOUT", Help: "time to write a response (0: none); above twice PRODAPI_BACKEND_TIMEOUT", Value: func(c Config) string { return Duration(c.WriteTimeout) }},
	{Name: "PRODAPI_IDLE_TIMEOUT", Help: "keep-alive connections close after this long idle", Value: func(c Config) string { return Duration(c.IdleTimeout) }},
	{Name: "OTEL_TRACES_EXPORTER", Help: "traces: otlp, console (stdout) or none; an OTLP endpoint alone means otlp", Value: func(c Config) string { return cmp.Or(strings.Join(c.Tracing.Exporters, ","), "none") }},
	{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Help: "OTLP/HTTP base URL; traces go to <url>/v1/traces (default http://localhost:4318)", Value: func(c Config) string { return c.Tracing.OTLPEndpoint }},
	{Name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Help: "OTLP/HTTP traces URL, used as is", Value: func(c Config) string { return c.Tracing.OTLPTracesEndpoint }},
	{Name: "OTEL_EXPORTER_OTLP_PROTOCOL", Help: "http/protobuf (the only one supported)", Value: func(c Config) string { return c.Tracing.Protocol }},
	{Name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Help: "overrides OTEL_EXPORTER_OTLP_PROTOCOL for traces", Value: func(c Config) string { return c.Tracing.Protocol }},
	{Name: "OTEL_SERVICE_NAME", Help: "service.name of the spans", Value: func(c Config) string { return c.Tracing.ServiceName }},
	{Name: "OTEL_TRACES_SAMPLER", Help: "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", Value: func(c Config) string { return c.Tracing.Sampler }},
	{Name: "OTEL_TRACES_SAMPLER_ARG", Help: "the ratio of the traceidratio samplers", Value: func(c Config) string { return strconv.FormatFloat(c.Tracing.SamplerRatio, 'g', -1, 64) }},
	{Name: "OTEL_SDK_DISABLED", Help: "true turns tracing off whatever else is set", Value: func(c Config) string { return strconv.FormatBool(c.Tracing.Disabled) }},
	{Name: "PRODAPI_MAX_CONNS", Help: "client connections held open; at the cap a new one closes the longest idle one, else answers the oldest /changes long poll early", Value: func(c Config) string { return strconv.Itoa(c.MaxConns) }},
	{Name: "PRODAPI_CHANGES_MAX_STREAMS", Help: "/changes event streams open at once; beyond, a new one is refused (503); each holds a connection of PRODAPI_MAX_CONNS", Value: func(c Config) string { return strconv.Itoa(c.ChangesMaxStreams) }},
	{Name: "PRODAPI_CHANGES_MAX_POLLS", Help: "/changes long polls waiting at once; beyond, a new one that would wait is refused (503); each holds a connection of PRODAPI_MAX_CONNS, and at that cap the oldest is answered early for a new connection", Value: func(c Config) string { return strconv.Itoa(c.ChangesMaxPolls) }},
	{Name: "PRODAPI_CHANGES_MAX_STREAM_AGE", Help: "the longest a /changes event stream lives: then it ends (close 503, retry 0) and the client reconnects, its token checked again", Value: func(c Config) string { return Duration(c.ChangesMaxStreamAge) }},
	{Name: "PRODAPI_CLIENT_MAX_WAITS", Help: "/changes event streams, long polls and min_position waits one client (its token's client_id, else sub) holds at once, across the fleet with Redis; beyond, 429; 0: no cap", Value: func(c Config) string { return strconv.Itoa(c.ClientMaxWaits) }},
	{Name: "PRODAPI_CHANGES_RETAIN", Help: "how long the change log keeps its entries (in Redis, or the ring of a replica without it); a /changes position older than that gets 410", Value: func(c Config) string { return Duration(c.ChangesRetain) }},
	{Name: "PRODAPI_FEED_POLL", Help: "where the database has no change streams (standalone, FerretDB), how often the feed's holder polls each collection for _updated (updates and insertions; PRODAPI_FEED_RECONCILE finds deletions)", Value: func(c Config) string { return Duration(c.FeedPoll) }},
	{Name: "PRODAPI_FEED_RECONCILE", Help: "while the feed polls, how often its holder walks each collection's ids (the _id index, pages of 1000) against those it knew: each id gone is a deletion, in the cache and /changes", Value: func(c Config) string { return Duration(c.FeedReconcile) }},
	{Name: "PRODAPI_MIN_POSITION_WAIT", Help: "the longest a list or detail request with min_position waits for this replica to apply the change log up to that position (and a /changes page with include=doc for its entries); then 503 with Retry-After", Value: func(c Config) string { return Duration(c.MinPositionWait) }},
	{Name: "PRODAPI_RATE_LIMIT", Help: "each client's rate limit, shared by the fleet: <n>/s, /m or /h, or off; a request costs 1, one that loads from a backend 1 + PRODAPI_RATE_MISS_COST", Value: func(c Config) string { return c.Limits.Rate.String() }},
	{Name: "PRODAPI_RATE_LIMIT_CLIENTS", Help: "clients' own limits, by client_id (else sub): client-a=50/s,client-b=off", Value: func(c Config) string { return clientRates(c.Limits.Clients) }},
	{Name: "PRODAPI_RATE_LIMIT_ADDR", Help: "limit per client address of the requests authentication refuses; once spent, every request from there is refused (429) before authentication; off: none", Value: func(c Config) string { return c.Limits.Address.String() }},
	{Name: "PRODAPI_RATE_MISS_COST", Help: "what a request that starts a backend load costs on top of its 1", Value: func(c Config) string { return strconv.Itoa(c.Limits.MissCost) }},
	{Name: "PRODAPI_CLIENT_MAX_LOADS", Help: "backend loads one client may have in flight on a replica; beyond, 429; 0: no cap", Value: func(c Config) string { return strconv.Itoa(c.Limits.MaxLoads) }},
	{Name: "PRODAPI_CHANGES_WRITE_TIMEOUT", Help: "time each write of a /changes stream, or a long poll's answer, may take (instead of PRODAPI_WRITE_TIMEOUT); a consumer that does not read is dropped after it", Value: func(c Config) string { return Duration(c.ChangesWriteTimeout) }},
}

// testPrefixes name variables of ours that configure the test suites, not
// the service: LoadFrom leaves them alone, as `make integration` runs
// the service in their environment.
var testPrefixes = []string{"PRODAPI_TEST_", "PRODAPI_INTEGRATION", "PRODAPI_REQUIRE_"}

// Env is where LoadFrom reads the configuration.
type Env struct {
	Getenv func(string) string
	// Names are the names of the variables set (os.Environ's keys). A
	// PRODAPI_ one that is no setting stops the start; another that looks
	// like a misspelt setting is a warning (Config.Warnings). Nil skips
	// both checks.
	Names []string
	// Resources are the resources taking a PRODAPI_CACHE_TTL_<RESOURCE>
	// (sources.Resources' names); nil means ResourceNames.
	Resources []string
}

// knownNames are the variables read, per-resource ones included.
func knownNames(resources []string) map[string]bool {
	known := map[string]bool{}
	for _, s := range settings {
		if !s.PerResource {
			known[s.Name] = true
			continue
		}
		for _, r := range resources {
			known[perResourcePrefix+strings.ToUpper(r)] = true
		}
	}
	return known
}

// unknown reports each set PRODAPI_ variable that is no setting, with the
// nearest setting's name when one is near enough to be a typo. Those of
// Superdesk (PRODAPI_SECRET_KEY, read by the original, unused here) and
// of Kubernetes (a service named prodapi) are not ours to refuse.
func (p *parser) unknown(names []string, known map[string]bool, resources []string) {
	candidates := slices.Sorted(maps.Keys(known))
	for _, name := range slices.Sorted(slices.Values(names)) {
		if !strings.HasPrefix(name, "PRODAPI_") || known[name] || slices.ContainsFunc(testPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) ||
			p.otherProgram(name) {
			continue
		}
		msg := fmt.Sprintf("%s is not a setting", name)
		if s, ok := nearest(name, candidates); ok {
			msg += fmt.Sprintf(": did you mean %s?", s)
		} else if strings.HasPrefix(name, perResourcePrefix) {
			msg += fmt.Sprintf(" (resources: %s)", strings.ToUpper(strings.Join(resources, ", ")))
		}
		p.errorf("%s (prodapi help lists them)", msg)
	}
}

// nearest returns the candidate closest to name by edit distance, when it
// is close enough to be a typo: three edits at most (a missing letter, a
// swap, a wrong word ending).
func nearest(name string, candidates []string) (string, bool) {
	const maxEdits = 3
	best, bestDist := "", maxEdits+1
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// editDistance is the number of edits from a to b, in bytes (setting
// names are ASCII), counting a swap of two neighbours as one edit, the
// commonest typo (the optimal string alignment distance: the Levenshtein
// distance plus transpositions, no substring edited twice).
func editDistance(a, b string) int {
	// Three rows of the table: i-2, i-1 and i.
	rows := [3][]int{make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)}
	for j := range rows[1] {
		rows[1][j] = j
	}
	for i := 1; i <= len(a); i++ {
		before, prev, cur := rows[0], rows[1], rows[2]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], before[j-2]+1)
			}
		}
		rows = [3][]int{prev, cur, before}
	}
	return rows[1][len(b)]
}

// contradictions reports settings that are each valid but cannot hold
// together.
func (p *parser) contradictions(c Config) {
	if c.Cache.AssetTTL >= c.ObjStore.URLLifetime {
		p.errorf("PRODAPI_CACHE_TTL_ASSETS (%s) must be shorter than PRODAPI_ASSET_URL_LIFETIME (%s), or cached redirects would outlive their URLs",
			Duration(c.Cache.AssetTTL), Duration(c.ObjStore.URLLifetime))
	}
	if c.ReadTimeout > 0 && c.ReadHeaderTimeout > c.ReadTimeout {
		p.errorf("PRODAPI_READ_HEADER_TIMEOUT (%s) is longer than PRODAPI_READ_TIMEOUT (%s), which includes the headers",
			Duration(c.ReadHeaderTimeout), Duration(c.ReadTimeout))
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= c.LoadTimeout() {
		p.errorf("PRODAPI_WRITE_TIMEOUT (%s) must be longer than twice PRODAPI_BACKEND_TIMEOUT (%s), how long a request may wait for its load, or a slow backend would cut connections instead of answering 504",
			Duration(c.WriteTimeout), Duration(c.BackendTimeout))
	}
	if c.AdminAddr != "" && len(c.AdminSecret) < MinSecretLength {
		p.errorf("PRODAPI_ADMIN_ADDR is set but PRODAPI_ADMIN_SECRET is shorter than %d bytes: the admin listener needs a strong bearer secret of its own", MinSecretLength)
	}
	if c.AdminAddr == "" && c.AdminSecret != "" {
		p.errorf("PRODAPI_ADMIN_SECRET is set without PRODAPI_ADMIN_ADDR: there is no admin listener to guard")
	}
	if c.AdminAddr != "" && c.AdminSecret == c.Secret {
		p.errorf("PRODAPI_ADMIN_SECRET must differ from AUTH_SERVER_SHARED_SECRET: a token signer must not also be an operator")
	}
	if _, port, _ := net.SplitHostPort(c.OpsAddr); c.AdminAddr == c.OpsAddr && port != "0" { // two ports of the system's choosing differ
		p.errorf("PRODAPI_ADMIN_ADDR and PRODAPI_OPS_ADDR are both %s: the admin listener and the operator listener need addresses of their own", c.OpsAddr)
	}
	if len(c.TrustedProxies) > 0 && c.TrustedProxyHeader == "" {
		p.errorf("PRODAPI_TRUSTED_PROXIES is set without PRODAPI_TRUSTED_PROXY_HEADER: name the header those proxies write the client's address in")
	}
	if c.Sandbox == "" && c.SandboxLatency > 0 {
		p.errorf("PRODAPI_SANDBOX_LATENCY is set without PRODAPI_SANDBOX: it delays sandbox queries only")
	}
}

// LoadTimeout is how long a request may wait for a cache load: a load
// makes up to two backend operations in a row (a document, then the
// lookups enriching it).
func (c Config) LoadTimeout() time.Duration { return 2 * c.BackendTimeout }

// Duration formats d the way one writes it in a setting: 15m, 1h30m,
// 2.5s, 0s.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
