package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// A Secret is a setting that must never be printed: String and LogValue
// redact it.
type Secret string

// String returns "[redacted]" (or "" when the secret is empty).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// LogValue redacts the secret in structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// A URL is a connection string that may carry credentials; String and
// LogValue show it with the password redacted.
type URL string

// String returns the URL with any password replaced by "xxxxx".
func (u URL) String() string {
	p, err := url.Parse(string(u))
	if err != nil {
		if strings.Contains(string(u), "@") {
			return "[redacted]"
		}
		return string(u)
	}
	return p.Redacted()
}

// LogValue redacts the URL's password in structured logs.
func (u URL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// Config is the whole configuration of the service. Load builds it from
// the environment; the table of variables is Settings (settings.go).
type Config struct {
	Port        string // PORT
	URL         string // PRODAPI_URL: the service's public base URL
	URLPrefix   string // PRODAPI_URL_PREFIX: the API lives at /<prefix>/v1
	MediaPrefix string // MEDIA_PREFIX: base of rendition hrefs

	Secret      Secret        // AUTH_SERVER_SHARED_SECRET
	AuthEnabled bool          // PRODAPI_AUTH_ENABLED
	AuthLeeway  time.Duration // AUTH_LEEWAY
	Audience    string        // PRODAPI_AUDIENCE
	// TokenURL is the token endpoint of Superdesk's auth server
	// (PRODAPI_TOKEN_URL): set, the reference page offers OAuth 2 client
	// credentials against it.
	TokenURL string
	Issuer   string // PRODAPI_ISSUER: the iss every token must carry; empty: any
	// CursorSecret seals list cursors (PRODAPI_CURSOR_SECRET); empty:
	// AUTH_SERVER_SHARED_SECRET's (see CursorKey).
	CursorSecret Secret

	Debug bool // DEBUG: debug-level logs
	// AccessLogHits is the share of cache hits the access log writes a
	// line for (PRODAPI_ACCESS_LOG_HITS): 1 every hit, 0.01 one in a
	// hundred, 0 none. Every other request is always logged.
	AccessLogHits float64
	// TrustedProxyHeader names the header the proxy in front writes the
	// client's address in (PRODAPI_TRUSTED_PROXY_HEADER). Empty: the
	// client is the TCP peer, and no header is believed.
	TrustedProxyHeader string
	// TrustedProxies are the ranges of the proxies whose header is
	// believed (PRODAPI_TRUSTED_PROXIES), as nginx's set_real_ip_from;
	// empty, with a header, any peer's is (a warning at start).
	TrustedProxies []netip.Prefix
	Testing        bool // SUPERDESK_TESTING: accepted for compatibility; no effect

	Sandbox        string        // PRODAPI_SANDBOX: "sample" or a directory; empty means the platform
	SandboxLatency time.Duration // PRODAPI_SANDBOX_LATENCY

	MongoURI       URL           // MONGO_URI
	MongoMaxPool   uint64        // PRODAPI_MONGO_MAX_POOL
	ElasticURL     URL           // ELASTICSEARCH_URL
	ElasticIndex   string        // ELASTICSEARCH_INDEX
	BackendTimeout time.Duration // PRODAPI_BACKEND_TIMEOUT: per backend operation
	WalkReadAhead  uint64        // PRODAPI_WALK_READ_AHEAD: pages a cursor walk is read ahead of its client

	ObjStore ObjStore

	Cache Cache

	// AdminAddr is the admin listener's address (POST /purge); empty:
	// none. AdminSecret is the bearer secret it requires.
	AdminAddr   string // PRODAPI_ADMIN_ADDR
	AdminSecret Secret // PRODAPI_ADMIN_SECRET
	// OpsAddr is the operator listener's address (PRODAPI_OPS_ADDR): the
	// probes and /metrics, without authentication, apart from the API.
	OpsAddr string

	ShutdownGrace     time.Duration // PRODAPI_SHUTDOWN_GRACE
	ShutdownDelay     time.Duration // PRODAPI_SHUTDOWN_DELAY: unready, still serving, before the drain
	ReadHeaderTimeout time.Duration // PRODAPI_READ_HEADER_TIMEOUT
	ReadTimeout       time.Duration // PRODAPI_READ_TIMEOUT
	WriteTimeout      time.Duration // PRODAPI_WRITE_TIMEOUT
	IdleTimeout       time.Duration // PRODAPI_IDLE_TIMEOUT
	// MaxConns caps the client connections held open; at the cap a new
	// connection closes the longest idle one, else answers the oldest
	// /changes long poll early (PRODAPI_MAX_CONNS).
	MaxConns int
	// ReadyRequiresBackends makes /readyz answer 503 while no backend can
	// answer (PRODAPI_READY_REQUIRES_BACKENDS); by default readiness is
	// the replica's own.
	ReadyRequiresBackends bool
	// ChangesMaxStreams caps the /changes event streams open at once
	// (PRODAPI_CHANGES_MAX_STREAMS); ChangesWriteTimeout bounds each write
	// of a stream, and a long poll's answer, in place of WriteTimeout
	// (PRODAPI_CHANGES_WRITE_TIMEOUT).
	ChangesMaxStreams   int
	ChangesWriteTimeout time.Duration
	// ChangesMaxPolls caps the /changes long polls waiting at once on a
	// replica (PRODAPI_CHANGES_MAX_POLLS), beside its streams'.
	ChangesMaxPolls int
	// ChangesMaxStreamAge is the longest a /changes event stream lives
	// (PRODAPI_CHANGES_MAX_STREAM_AGE): then it ends, and the client
	// reconnects with its token checked anew.
	ChangesMaxStreamAge time.Duration
	// ClientMaxWaits caps the event streams, long polls and min_position
	// waits one client holds at once, across the fleet when it shares
	// Redis (PRODAPI_CLIENT_MAX_WAITS); 0: no cap.
	ClientMaxWaits int
	// ChangesRetain is how long the change log keeps its entries
	// (PRODAPI_CHANGES_RETAIN): a client may resume that long after it
	// stopped reading.
	ChangesRetain time.Duration
	// FeedPoll is how often the feed's holder polls each collection's
	// _updated where the database has no change streams
	// (PRODAPI_FEED_POLL).
	FeedPoll time.Duration
	// FeedReconcile is how often, while it polls, the feed's holder walks
	// each collection's ids to find what was deleted
	// (PRODAPI_FEED_RECONCILE).
	FeedReconcile time.Duration
	// MinPositionWait is the longest a list or detail request with
	// min_position waits for this replica to apply the change log up to
	// it, before a 503 (PRODAPI_MIN_POSITION_WAIT).
	MinPositionWait time.Duration

	Limits Limits // the fair share: rate limits and the cap on loads (limits.go)

	Tracing Tracing

	// Warnings are what LoadFrom found suspicious but not wrong enough to
	// stop the start (a variable that looks like a misspelt setting), one
	// sentence each, for the start-up log.
	Warnings []string

	// invalid are the variables whose values LoadFrom refused, by name:
	// their rows in `prodapi config` show the value set and why it was
	// refused (Setting.Shown), not the default the field fell back on.
	invalid map[string]*invalidValue

	// urlDefault and mediaDefault are true when URL and MediaPrefix are
	// derived from the port, not set: Listening moves them.
	urlDefault, mediaDefault bool
}

func (c Config) defaultMediaPrefix() string { return c.URL + "/" + c.URLPrefix + "/v1/assets" }

// Listening returns the configuration of the service listening at addr,
// which the -addr flag may have moved off PORT (or put on a port the
// system chose, for :0): Port is addr's, and so are the base URL and the
// media prefix where they are derived from it, that is unless
// PRODAPI_URL, or MEDIA_PREFIX, is set. What is derived from the base
// URL follows (the OpenAPI document's server, the start-up banner). The
// host stays localhost, unless addr is one other address of the machine's
// (not a wildcard, not loopback), which localhost would not reach: then
// that address.
func (c Config) Listening(addr net.Addr) Config {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return c
	}
	c.Port = strconv.Itoa(ta.Port)
	host := "localhost"
	if ip := ta.IP; ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		host = ip.String()
		if ta.Zone != "" {
			host += "%25" + ta.Zone // a zone, escaped as RFC 6874 has it
		}
	}
	if c.urlDefault {
		c.URL = "http://" + net.JoinHostPort(host, c.Port)
	}
	if c.mediaDefault {
		c.MediaPrefix = c.defaultMediaPrefix()
	}
	return c
}

// ObjStore configures S3-compatible object storage for media. It is used
// when Container is set; otherwise media come from GridFS.
type ObjStore struct {
	AccessKeyID     string        // OBJSTORE_ACCESS_KEY_ID
	SecretAccessKey Secret        // OBJSTORE_SECRET_ACCESS_KEY
	Region          string        // OBJSTORE_REGION
	Container       string        // OBJSTORE_CONTAINER_NAME: the bucket
	Subfolder       string        // OBJSTORE_S3_SUBFOLDER: key prefix ("" or "false": none)
	ACL             string        // OBJSTORE_OBJECT_ACL: used on writes only; accepted, unused
	EndpointURL     string        // OBJSTORE_ENDPOINT_URL: S3-compatible endpoint (MinIO); "" means AWS
	URLLifetime     time.Duration // PRODAPI_ASSET_URL_LIFETIME: presigned URL lifetime
}

// CursorKey is the secret list cursors are sealed with, the same on
// every replica given the same configuration: PRODAPI_CURSOR_SECRET, or
// else AUTH_SERVER_SHARED_SECRET (cursors derive a key of their own from
// it). None: ok is false, and the server makes a secret of its own, so
// cursors fail after a restart and on other replicas.
func (c Config) CursorKey() (secret []byte, ok bool) {
	s := cmp.Or(c.CursorSecret, c.Secret)
	return []byte(s), s != ""
}

// Enabled reports whether media are read from object storage.
func (o ObjStore) Enabled() bool { return o.Container != "" }

// Cache configures the read-through cache.
type Cache struct {
	RedisURL URL // REDIS_URL: redis://, rediss://, redis-sentinel://... ; empty: in-process only

	// ListTTL and DetailTTL are the freshness of list and detail entries
	// by default (PRODAPI_CACHE_TTL sets both).
	ListTTL, DetailTTL time.Duration
	// ResourceTTL overrides both for one resource
	// (PRODAPI_CACHE_TTL_<RESOURCE>, e.g. PRODAPI_CACHE_TTL_ITEMS=10s).
	ResourceTTL map[string]time.Duration
	Stale       time.Duration // PRODAPI_CACHE_STALE: serve-stale window after freshness
	NotFoundTTL time.Duration // PRODAPI_CACHE_NOTFOUND_TTL: 404s
	AssetTTL    time.Duration // PRODAPI_CACHE_TTL_ASSETS: asset redirects; below the URL lifetime

	LocalBytes int64         // PRODAPI_CACHE_LOCAL_BYTES: in-process tier size; negative turns it off
	LocalTTL   time.Duration // PRODAPI_CACHE_LOCAL_TTL: in-process tier entry lifetime

	// Invalidated is true when something obsoletes entries as documents
	// change (a watched sandbox directory, or the purge listener): the
	// default TTLs are then long, and the TTL is only the safety net.
	Invalidated bool
	// feedTTL is the freshness when a database change feed turns out to
	// run (FeedTTL); nil when TTLs were set explicitly.
	feedTTL map[string]time.Duration
}

// FeedTTL is the freshness of a resource's entries while a database
// change feed runs (package feed): as long as with Invalidated, since
// entries are obsoleted as their documents change. Whether the feed runs
// is known only once the server answers, so the cache asks per entry.
// TTLs set explicitly (PRODAPI_CACHE_TTL, PRODAPI_CACHE_TTL_<RESOURCE>)
// stay as they are.
func (c Cache) FeedTTL(resource string, detail bool) time.Duration {
	if c.feedTTL == nil {
		return c.TTL(resource, detail)
	}
	if d, ok := c.feedTTL[resource]; ok {
		return d
	}
	if detail {
		return invalidatedDetailTTL
	}
	return invalidatedListTTL
}

// TTL returns the freshness of a resource's list or detail entries.
func (c Cache) TTL(resource string, detail bool) time.Duration {
	if d, ok := c.ResourceTTL[resource]; ok {
		return d
	}
	if detail {
		return c.DetailTTL
	}
	return c.ListTTL
}

// Built-in defaults. The original's defaults where it had the setting.
const (
	defaultPort           = "5500"
	defaultURLPrefix      = "prodapi"
	defaultMongoURI       = "mongodb://localhost/superdesk"
	defaultElasticURL     = "http://localhost:9200"
	defaultElasticIndex   = "superdesk"
	defaultRegion         = "us-east-1"
	defaultMongoMaxPool   = 100
	defaultBackendTimeout = 5 * time.Second
	defaultWalkReadAhead  = 2
	maxWalkReadAhead      = 8
	defaultURLLifetime    = 15 * time.Minute

	defaultListTTL     = 10 * time.Second
	defaultDetailTTL   = time.Minute
	defaultSlowTTL     = 5 * time.Minute // desks and users change rarely
	defaultStale       = 15 * time.Minute
	defaultNotFoundTTL = 5 * time.Second
	defaultAssetTTL    = 10 * time.Minute
	defaultLocalBytes  = 64 << 20
	defaultLocalTTL    = 2 * time.Second

	// With invalidation in use (Cache.Invalidated) an entry is obsoleted
	// when its documents change, so freshness only bounds what the feed
	// cannot see: a write the feed missed while it was down, enrichment
	// that is not a link. Details an hour; lists ten minutes, since a
	// search index shows a write a moment after the database reports it
	// (the cache invalidates search lists a second time for that).
	invalidatedListTTL   = 10 * time.Minute
	invalidatedDetailTTL = time.Hour

	defaultShutdownGrace     = 10 * time.Second
	defaultReadHeaderTimeout = 5 * time.Second
	defaultReadTimeout       = 10 * time.Second
	defaultWriteTimeout      = 30 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	// About 20 KiB each when idle: 4096 hold some 80 MiB, well under a
	// file-descriptor limit of 65536.
	defaultMaxConns = 4096
	// A stream holds a connection (of PRODAPI_MAX_CONNS) and a goroutine:
	// a quarter of the default connections.
	defaultChangesMaxStreams   = 1000
	defaultChangesWriteTimeout = 10 * time.Second
	defaultChangesRetain       = 24 * time.Hour
	defaultFeedPoll            = time.Second
	defaultFeedReconcile       = 10 * time.Minute
	defaultMinPositionWait     = 2 * time.Second

	// Long polls hold connections as streams do: another quarter.
	defaultChangesMaxPolls     = 1000
	defaultChangesMaxStreamAge = time.Hour
	// Far more than one consumer's streams and long polls, far fewer
	// than a replica's 1000 of each.
	defaultClientMaxWaits = 50
)

// DefaultOpsAddr is PRODAPI_OPS_ADDR's default, the operator listener's
// address: where `prodapi healthcheck` probes unless told otherwise.
const DefaultOpsAddr = ":5502"

// MinSecretLength is the length under which a shared secret draws a
// warning at start: HS256 wants at least 32 bytes of key.
const MinSecretLength = 32

// ResourceNames are the resources that take a PRODAPI_CACHE_TTL_<NAME>.
var ResourceNames = []string{"items", "desks", "assignments", "events", "events_history", "events_files", "planning", "contacts", "users"}

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_.~-]+(/[A-Za-z0-9_.~-]+)*$`)

// headerNamePattern is an HTTP field name (RFC 9110 token).
var headerNamePattern = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// hostPattern is a URL's host and optional port as the reference page's
// Content-Security-Policy can name it (PRODAPI_TOKEN_URL's): a DNS name,
// an IPv4 address or a bracketed IPv6 address.
var hostPattern = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$`)

// Load reads the configuration through getenv and validates it, returning
// every problem at once. It does not look for unknown variables: LoadFrom
// does, given their names.
func Load(getenv func(string) string) (Config, error) { return LoadFrom(Env{Getenv: getenv}) }

// LoadFrom reads the configuration from e and validates it, returning
// every problem at once: bad values, settings that contradict each other
// and, given e.Names, unknown PRODAPI_ variables. Given e.Names, it also
// warns of other variables that look like misspelt settings.
func LoadFrom(e Env) (Config, error) {
	getenv := e.Getenv
	resources := e.Resources
	if resources == nil {
		resources = ResourceNames
	}
	p := parser{getenv: getenv}
	c := Config{
		Port:      cmp.Or(getenv("PORT"), defaultPort),
		URLPrefix: strings.Trim(cmp.Or(getenv("PRODAPI_URL_PREFIX"), defaultURLPrefix), "/"),
		Secret:    Secret(getenv("AUTH_SERVER_SHARED_SECRET")),

		CursorSecret:       Secret(getenv("PRODAPI_CURSOR_SECRET")),
		AuthEnabled:        p.bool("PRODAPI_AUTH_ENABLED", true),
		AuthLeeway:         p.duration("AUTH_LEEWAY", 0),
		Audience:           getenv("PRODAPI_AUDIENCE"),
		TokenURL:           getenv("PRODAPI_TOKEN_URL"),
		Issuer:             getenv("PRODAPI_ISSUER"),
		Debug:              p.bool("DEBUG", false),
		AccessLogHits:      p.fraction("PRODAPI_ACCESS_LOG_HITS", 1),
		TrustedProxyHeader: getenv("PRODAPI_TRUSTED_PROXY_HEADER"),
		TrustedProxies:     p.prefixes("PRODAPI_TRUSTED_PROXIES"),
		Testing:            p.bool("SUPERDESK_TESTING", false),

		Sandbox:        getenv("PRODAPI_SANDBOX"),
		SandboxLatency: p.duration("PRODAPI_SANDBOX_LATENCY", 0),

		MongoURI:       URL(cmp.Or(getenv("MONGO_URI"), defaultMongoURI)),
		MongoMaxPool:   p.uint("PRODAPI_MONGO_MAX_POOL", defaultMongoMaxPool),
		ElasticURL:     URL(cmp.Or(getenv("ELASTICSEARCH_URL"), defaultElasticURL)),
		ElasticIndex:   cmp.Or(getenv("ELASTICSEARCH_INDEX"), defaultElasticIndex),
		BackendTimeout: p.duration("PRODAPI_BACKEND_TIMEOUT", defaultBackendTimeout),
		WalkReadAhead:  p.uint("PRODAPI_WALK_READ_AHEAD", defaultWalkReadAhead),

		ObjStore: ObjStore{
			AccessKeyID:     getenv("OBJSTORE_ACCESS_KEY_ID"),
			SecretAccessKey: Secret(getenv("OBJSTORE_SECRET_ACCESS_KEY")),
			Region:          cmp.Or(getenv("OBJSTORE_REGION"), defaultRegion),
			Container:       getenv("OBJSTORE_CONTAINER_NAME"),
			Subfolder:       subfolder(getenv("OBJSTORE_S3_SUBFOLDER")),
			ACL:             getenv("OBJSTORE_OBJECT_ACL"),
			EndpointURL:     getenv("OBJSTORE_ENDPOINT_URL"),
			URLLifetime:     p.duration("PRODAPI_ASSET_URL_LIFETIME", defaultURLLifetime),
		},

		AdminAddr:   getenv("PRODAPI_ADMIN_ADDR"),
		AdminSecret: Secret(getenv("PRODAPI_ADMIN_SECRET")),
		OpsAddr:     cmp.Or(getenv("PRODAPI_OPS_ADDR"), DefaultOpsAddr),

		ShutdownGrace:     p.duration("PRODAPI_SHUTDOWN_GRACE", defaultShutdownGrace),
		ShutdownDelay:     p.duration("PRODAPI_SHUTDOWN_DELAY", 0),
		ReadHeaderTimeout: p.duration("PRODAPI_READ_HEADER_TIMEOUT", defaultReadHeaderTimeout),
		ReadTimeout:       p.duration("PRODAPI_READ_TIMEOUT", defaultReadTimeout),
		WriteTimeout:      p.duration("PRODAPI_WRITE_TIMEOUT", defaultWriteTimeout),
		IdleTimeout:       p.duration("PRODAPI_IDLE_TIMEOUT", defaultIdleTimeout),
		MaxConns:          int(min(max(p.int("PRODAPI_MAX_CONNS", defaultMaxConns), 0), 1<<30)),

		ReadyRequiresBackends: p.bool("PRODAPI_READY_REQUIRES_BACKENDS", false),
		ChangesMaxStreams:     int(min(max(p.int("PRODAPI_CHANGES_MAX_STREAMS", defaultChangesMaxStreams), 0), 1<<30)),
		ChangesWriteTimeout:   p.duration("PRODAPI_CHANGES_WRITE_TIMEOUT", defaultChangesWriteTimeout),
		ChangesMaxPolls:       int(min(max(p.int("PRODAPI_CHANGES_MAX_POLLS", defaultChangesMaxPolls), 0), 1<<30)),
		ChangesMaxStreamAge:   p.duration("PRODAPI_CHANGES_MAX_STREAM_AGE", defaultChangesMaxStreamAge),
		ClientMaxWaits:        int(min(max(p.int("PRODAPI_CLIENT_MAX_WAITS", defaultClientMaxWaits), -1), 1<<30)),
		ChangesRetain:         p.duration("PRODAPI_CHANGES_RETAIN", defaultChangesRetain),
		FeedPoll:              p.duration("PRODAPI_FEED_POLL", defaultFeedPoll),
		FeedReconcile:         p.duration("PRODAPI_FEED_RECONCILE", defaultFeedReconcile),
		MinPositionWait:       p.duration("PRODAPI_MIN_POSITION_WAIT", defaultMinPositionWait),
	}
	c.urlDefault, c.mediaDefault = getenv("PRODAPI_URL") == "", getenv("MEDIA_PREFIX") == ""
	c.URL = strings.TrimRight(cmp.Or(getenv("PRODAPI_URL"), "http://localhost:"+c.Port), "/")
	c.MediaPrefix = strings.TrimRight(cmp.Or(getenv("MEDIA_PREFIX"), c.defaultMediaPrefix()), "/")
	c.Cache = p.cache(resources, c.AdminAddr != "" || (c.Sandbox != "" && c.Sandbox != "sample"))
	c.Tracing = p.tracing()
	c.Limits = p.limits()

	if !validPort(c.Port) {
		p.invalid("PORT", "is not a port number")
	}
	p.listenAddr("PRODAPI_OPS_ADDR", c.OpsAddr)
	if c.TrustedProxyHeader != "" && !headerNamePattern.MatchString(c.TrustedProxyHeader) {
		p.invalid("PRODAPI_TRUSTED_PROXY_HEADER", "is not a header name (X-Forwarded-For, Forwarded, X-Real-IP...)")
	}
	if !prefixPattern.MatchString(c.URLPrefix) {
		p.invalid("PRODAPI_URL_PREFIX", "must be path segments of letters, digits and -._~")
	}
	for _, u := range []struct{ name, value string }{
		{"PRODAPI_URL", c.URL}, {"MEDIA_PREFIX", c.MediaPrefix}, {"ELASTICSEARCH_URL", string(c.ElasticURL)},
		{"OBJSTORE_ENDPOINT_URL", c.ObjStore.EndpointURL},
	} {
		if u.value == "" {
			continue
		}
		if parsed, err := url.Parse(u.value); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			p.invalidURL(u.name, u.value, "must be an http(s) URL")
		}
	}
	if t, err := url.Parse(c.TokenURL); c.TokenURL != "" && (err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.User != nil || !hostPattern.MatchString(t.Host)) {
		p.invalidURL("PRODAPI_TOKEN_URL", c.TokenURL, "must be an http(s) URL without credentials, the token endpoint of Superdesk's auth server (https://<superdesk>/api/auth_server/token)")
	}
	if m, err := url.Parse(string(c.MongoURI)); err != nil || (m.Scheme != "mongodb" && m.Scheme != "mongodb+srv") {
		p.invalidURL("MONGO_URI", string(c.MongoURI), "must be a mongodb:// or mongodb+srv:// URI")
	}
	if c.Cache.RedisURL != "" {
		if r, err := url.Parse(string(c.Cache.RedisURL)); err != nil || !strings.HasPrefix(r.Scheme, "redis") {
			p.invalidURL("REDIS_URL", string(c.Cache.RedisURL), "must be a redis://, rediss:// or redis-sentinel:// URL")
		}
	}
	if c.AuthEnabled && c.Secret == "" {
		p.errorf("AUTH_SERVER_SHARED_SECRET is empty while PRODAPI_AUTH_ENABLED is true: set the secret Superdesk's auth server signs tokens with, or PRODAPI_AUTH_ENABLED=false for an open API")
	}
	if c.CursorSecret != "" && len(c.CursorSecret) < MinSecretLength {
		reason := fmt.Sprintf("is shorter than %d bytes: a short secret would let cursors be forged", MinSecretLength)
		p.errorf("PRODAPI_CURSOR_SECRET %s", reason)
		p.mark("PRODAPI_CURSOR_SECRET", c.CursorSecret.String(), reason)
	}
	if c.MaxConns < 1 {
		p.invalid("PRODAPI_MAX_CONNS", "must be at least 1")
	}
	if c.WalkReadAhead > maxWalkReadAhead {
		p.invalid("PRODAPI_WALK_READ_AHEAD", fmt.Sprintf("must be at most %d: each page read ahead is held in memory", maxWalkReadAhead))
	}
	if c.ChangesMaxStreams < 1 {
		p.invalid("PRODAPI_CHANGES_MAX_STREAMS", "must be at least 1")
	}
	if c.ChangesMaxPolls < 1 {
		p.errorf("PRODAPI_CHANGES_MAX_POLLS %d must be at least 1", c.ChangesMaxPolls)
	}
	if c.ChangesMaxStreamAge < time.Minute {
		p.errorf("PRODAPI_CHANGES_MAX_STREAM_AGE %s must be at least 1m: every stream reconnects after it", c.ChangesMaxStreamAge)
	}
	if c.ClientMaxWaits < 0 {
		p.errorf("PRODAPI_CLIENT_MAX_WAITS %d must be 0 (no cap) or more", c.ClientMaxWaits)
	}
	if c.ChangesWriteTimeout <= 0 {
		p.invalid("PRODAPI_CHANGES_WRITE_TIMEOUT", "must be above 0: a consumer that does not read is dropped after it")
	}
	if c.MinPositionWait <= 0 || c.MinPositionWait > time.Minute {
		p.errorf("PRODAPI_MIN_POSITION_WAIT %s must be above 0 and at most 1m: a request with min_position waits it at most", c.MinPositionWait)
	}
	if c.ChangesRetain < time.Minute {
		p.invalid("PRODAPI_CHANGES_RETAIN", "must be at least 1m: a client resumes within it")
	}
	if c.FeedPoll < 10*time.Millisecond {
		p.invalid("PRODAPI_FEED_POLL", "must be at least 10ms: each poll queries every collection")
	}
	if c.FeedReconcile < 100*time.Millisecond {
		p.errorf("PRODAPI_FEED_RECONCILE %s must be at least 100ms: each round reads every collection's ids", c.FeedReconcile)
	}
	if c.AuthLeeway > time.Minute {
		p.invalid("AUTH_LEEWAY", "is more than a minute")
	}
	if c.ObjStore.URLLifetime > 7*24*time.Hour {
		p.invalid("PRODAPI_ASSET_URL_LIFETIME", "is more than the 7 days S3 allows")
	}
	p.contradictions(c)
	if e.Names != nil {
		known := knownNames(resources)
		p.unknown(e.Names, known, resources)
		c.Warnings = p.typos(e.Names, known)
	}
	c.Warnings = append(c.Warnings, proxyWarnings(c)...)
	c.invalid = p.bad
	return c, errors.Join(p.errs...)
}

// listenAddr checks that value, the setting name's, is an address to
// listen on: [host]:port.
func (p *parser) listenAddr(name, value string) {
	if _, port, err := net.SplitHostPort(value); err != nil || !validPort(port) {
		p.invalid(name, "is not a listen address (:5502, 127.0.0.1:5502, [::1]:5502)")
	}
}

// proxyWarnings warns of a proxy header believed from any peer.
func proxyWarnings(c Config) []string {
	if c.TrustedProxyHeader == "" || len(c.TrustedProxies) > 0 {
		return nil
	}
	return []string{"PRODAPI_TRUSTED_PROXY_HEADER is set without PRODAPI_TRUSTED_PROXIES: " + c.TrustedProxyHeader +
		" is believed from any peer, so a client that reaches the service directly names itself by any address it writes there; " +
		"set PRODAPI_TRUSTED_PROXIES to the proxies' ranges"}
}

// validPort reports whether s is a TCP port number (0: one the system
// chooses).
func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 65535
}

func (p *parser) cache(resources []string, invalidated bool) Cache {
	c := Cache{
		RedisURL:    URL(p.getenv("REDIS_URL")),
		ResourceTTL: map[string]time.Duration{},
		Stale:       p.duration("PRODAPI_CACHE_STALE", defaultStale),
		NotFoundTTL: p.duration("PRODAPI_CACHE_NOTFOUND_TTL", defaultNotFoundTTL),
		AssetTTL:    p.duration("PRODAPI_CACHE_TTL_ASSETS", defaultAssetTTL),
		LocalBytes:  p.int("PRODAPI_CACHE_LOCAL_BYTES", defaultLocalBytes),
		LocalTTL:    p.duration("PRODAPI_CACHE_LOCAL_TTL", defaultLocalTTL),
		Invalidated: invalidated,
	}
	if p.getenv("PRODAPI_CACHE_TTL") != "" {
		all := p.duration("PRODAPI_CACHE_TTL", 0)
		c.ListTTL, c.DetailTTL = all, all
	} else if invalidated {
		c.ListTTL, c.DetailTTL = invalidatedListTTL, invalidatedDetailTTL
		c.ResourceTTL["desks"], c.ResourceTTL["users"] = invalidatedDetailTTL, invalidatedDetailTTL
	} else {
		c.ListTTL, c.DetailTTL = defaultListTTL, defaultDetailTTL
		c.ResourceTTL["desks"], c.ResourceTTL["users"] = defaultSlowTTL, defaultSlowTTL
	}
	if p.getenv("PRODAPI_CACHE_TTL") == "" {
		c.feedTTL = map[string]time.Duration{"desks": invalidatedDetailTTL, "users": invalidatedDetailTTL}
	}
	for _, r := range resources {
		name := perResourcePrefix + strings.ToUpper(r)
		if p.getenv(name) != "" {
			c.ResourceTTL[r] = p.duration(name, 0)
			if c.feedTTL != nil {
				c.feedTTL[r] = c.ResourceTTL[r]
			}
		}
	}
	return c
}

// parser reads typed variables and collects every problem.
type parser struct {
	getenv func(string) string
	errs   []error
	bad    map[string]*invalidValue // the variables refused (Config.invalid)
}

// An invalidValue is a variable's value LoadFrom refused: as `prodapi
// config` shows it, and why.
type invalidValue struct {
	shown   string
	reasons []string
}

func (v *invalidValue) String() string {
	return cmp.Or(v.shown, `""`) + " (invalid: " + strings.Join(v.reasons, "; ") + ")"
}

func (p *parser) errorf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// invalid refuses the value of the variable name for reason ("is not a
// duration"): the start fails with NAME="value" and the reason, and
// `prodapi config` shows the value beside the reason.
func (p *parser) invalid(name, reason string) {
	v := p.getenv(name)
	p.errorf("%s=%q %s", name, v, reason)
	p.mark(name, v, reason)
}

// invalidURL refuses the URL value of the variable name, which may carry
// credentials: the error names the variable, not the value, and `prodapi
// config` shows the value with its password masked.
func (p *parser) invalidURL(name, value, reason string) {
	p.errorf("%s %s", name, reason)
	p.mark(name, URL(value).String(), reason)
}

// mark records that the variable name's value, shown so (redacted where
// it may hold a secret), was refused for reason, for its row in `prodapi
// config`. The error is the caller's.
func (p *parser) mark(name, shown, reason string) {
	if p.bad == nil {
		p.bad = map[string]*invalidValue{}
	}
	v := p.bad[name]
	if v == nil {
		v = &invalidValue{shown: shown}
		p.bad[name] = v
	}
	v.reasons = append(v.reasons, strings.TrimPrefix(reason, "is "))
}

// bool parses Python's strtobool spellings, as the original read
// PRODAPI_AUTH_ENABLED. Unlike the original, anything else is an error
// rather than false: a typo must not switch authentication off.
func (p *parser) bool(name string, def bool) bool {
	v := p.getenv(name)
	switch strings.ToLower(v) {
	case "":
		return def
	case "y", "yes", "t", "true", "on", "1":
		return true
	case "n", "no", "f", "false", "off", "0":
		return false
	}
	p.invalid(name, "is not a boolean (use true or false)")
	return def
}

// duration parses a Go duration ("10s", "1m30s") or a number of seconds.
func (p *parser) duration(name string, def time.Duration) time.Duration {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, nerr := strconv.ParseFloat(v, 64)
		if nerr != nil {
			p.invalid(name, "is not a duration (use 10s, 5m, 1h)")
			return def
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		p.invalid(name, "is negative")
		return def
	}
	return d
}

func (p *parser) uint(name string, def uint64) uint64 {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		p.invalid(name, "is not a non-negative integer")
		return def
	}
	return n
}

// fraction parses a share between 0 and 1.
func (p *parser) fraction(name string, def float64) float64 {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		p.invalid(name, "is not a share between 0 and 1 (1: all, 0.01: one in a hundred, 0: none)")
		return def
	}
	return f
}

func (p *parser) int(name string, def int64) int64 {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.invalid(name, "is not an integer")
		return def
	}
	return n
}

// prefixes parses a list of address ranges (10.0.0.0/8) and addresses
// (one address's range), separated by commas or spaces.
func (p *parser) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	v := p.getenv(name)
	refuse := func(reason string) {
		p.errorf("%s: %s", name, reason)
		p.mark(name, v, reason)
	}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		pfx, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil || a.Zone() != "" {
				refuse(fmt.Sprintf("%q is neither an address range (10.0.0.0/8, 2001:db8::/32) nor an address", f))
				continue
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		if pfx.Addr().Is4In6() {
			refuse(fmt.Sprintf("%q is an IPv4-mapped range: write it as IPv4", f))
			continue
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// subfolder normalises OBJSTORE_S3_SUBFOLDER as the original did: "" and
// "false" (any case) mean none; slashes around it are trimmed.
func subfolder(v string) string {
	if strings.EqualFold(v, "false") {
		return ""
	}
	return strings.Trim(v, "/")
}

// LogValue is the effective configuration for the start-up log: every
// setting of Settings, keyed by its variable's name in lower case, with
// secrets and credentials redacted.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(settings))
	for _, s := range settings {
		key := strings.ToLower(s.Name)
		if s.PerResource {
			key = strings.ToLower(perResourcePrefix) + "by_resource"
		}
		attrs = append(attrs, slog.String(key, s.Shown(c)))
	}
	return slog.GroupValue(attrs...)
}
