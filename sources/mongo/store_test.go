package mongo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
)

// docCmp compares documents field by field, in order, with types.
var docCmp = cmp.Transformer("fields", func(d *sources.Doc) []sources.Field { return d.Fields() })

// env is a store over a fake server, with its counter.
type env struct {
	srv     *mongotest.Server
	store   *mongosrc.Store
	queries *metrics.Queries
}

func newEnv(t *testing.T, seed map[string][]*sources.Doc, opts mongosrc.Options) *env {
	t.Helper()
	srv := mongotest.Start(t, seed)
	return connect(t, srv, opts)
}

func connect(t *testing.T, srv *mongotest.Server, opts mongosrc.Options) *env {
	t.Helper()
	client, err := mongodriver.Connect(mongosrc.ClientOptions(srv.URI(), 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the client goes before the server.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	if opts.Queries == nil {
		opts.Queries = metrics.NewMetrics().SourceQueries()
	}
	return &env{
		srv:     srv,
		store:   mongosrc.New(client.Database(mongosrc.DatabaseName(srv.URI())), opts),
		queries: opts.Queries,
	}
}

func mustOID(t testing.TB, s string) sources.ObjectID {
	t.Helper()
	id, ok := sources.ParseObjectID(s)
	if !ok {
		t.Fatalf("bad ObjectID %q", s)
	}
	return id
}

func res(name string) *sources.Resource {
	r, ok := sources.ResourceByName(name)
	if !ok {
		panic("no resource " + name)
	}
	return r
}

// lastCommand returns the last command named name.
func lastCommand(t *testing.T, srv *mongotest.Server, name string) mongotest.Command {
	t.Helper()
	cmds := srv.Named(name)
	if len(cmds) == 0 {
		t.Fatalf("no %s command received", name)
	}
	return cmds[len(cmds)-1]
}

// field returns the value at path in a command as the server received
// it, in canonical Extended JSON (types visible) without spaces.
func field(cmd mongotest.Command, path ...string) string {
	v, err := bson.Raw(cmd.Raw).LookupErr(path...)
	if err != nil {
		return "<absent>"
	}
	return compact(v.String())
}

const (
	deskOID   = "5d553c333031e2855a2e5662"
	deskStr   = "5d553c333031e2855a2e5663" // a 24-hex id stored as a string
	deskBoth  = "5d553c333031e2855a2e5664" // stored twice: ObjectId and string
	userOneID = "5d553c333031e2855a2e0001"
)

func deskSeed(t testing.TB) map[string][]*sources.Doc {
	return map[string][]*sources.Doc{
		"desks": {
			sources.D("_id", mustOID(t, deskOID), "name", "Sports", "desk_type", "production"),
			sources.D("_id", deskStr, "name", "Politics (string id)"),
			sources.D("_id", deskBoth, "name", "Both (string)"),
			sources.D("_id", mustOID(t, deskBoth), "name", "Both (ObjectId)"),
		},
		"archive": {
			sources.D("_id", "urn:newsml:localhost:2019-08-15T12:23:04:123", "headline", "Item"),
		},
	}
}

func TestGet(t *testing.T) {
	e := newEnv(t, deskSeed(t), mongosrc.Options{})
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		res, id  string
		wantName string
		filter   string
	}{
		{"ObjectId", "desks", deskOID, "Sports",
			`{"$in": [{"$oid":"` + deskOID + `"},"` + deskOID + `"]}`},
		{"upper-case hex", "desks", strings.ToUpper(deskOID), "Sports",
			`{"$in": [{"$oid":"` + deskOID + `"},"` + strings.ToUpper(deskOID) + `"]}`},
		{"24-hex string id", "desks", deskStr, "Politics (string id)",
			`{"$in": [{"$oid":"` + deskStr + `"},"` + deskStr + `"]}`},
		{"ObjectId wins over string", "desks", deskBoth, "Both (ObjectId)",
			`{"$in": [{"$oid":"` + deskBoth + `"},"` + deskBoth + `"]}`},
		{"URN", "items", "urn:newsml:localhost:2019-08-15T12:23:04:123", "",
			`"urn:newsml:localhost:2019-08-15T12:23:04:123"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := e.store.Get(ctx, res(tc.res), tc.id)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if tc.wantName != "" {
				if got, _ := d.String("name"); got != tc.wantName {
					t.Errorf("name = %q, want %q", got, tc.wantName)
				}
			}
			cmd := lastCommand(t, e.srv, "find")
			if got := field(cmd, "filter", "_id"); got != compact(tc.filter) {
				t.Errorf("filter _id = %s, want %s", got, tc.filter)
			}
			if got := field(cmd, "limit"); got != `{"$numberLong":"2"}` {
				t.Errorf("limit = %s, want 2", got)
			}
		})
	}
	if got := e.queries.Value("mongo", "desks", "get"); got != 4 {
		t.Errorf("get queries on desks = %d, want 4", got)
	}
	if got := e.queries.Value("mongo", "items", "get"); got != 1 {
		t.Errorf("get queries on items (archive) = %d, want 1", got)
	}
}

func TestGetNotFound(t *testing.T) {
	e := newEnv(t, deskSeed(t), mongosrc.Options{})
	for _, id := range []string{"5d553c333031e2855a2e9999", "nope", "urn:x"} {
		_, err := e.store.Get(t.Context(), res("desks"), id)
		if !errors.Is(err, sources.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

func userSeed(t testing.TB) map[string][]*sources.Doc {
	day := func(d int) time.Time { return time.Date(2024, 1, d, 12, 0, 0, 0, time.UTC) }
	var users []*sources.Doc
	for i, u := range []struct {
		name string
		desk any
		upd  time.Time
		tags []any
	}{
		{"alice", mustOID(t, deskOID), day(1), []any{"a", "b"}},
		{"bob", deskOID, day(2), []any{"b"}}, // the desk id as a string
		{"carol", mustOID(t, deskBoth), day(3), []any{}},
		{"dave", nil, day(4), []any{"a"}},
		{"erin", mustOID(t, deskOID), day(5), nil},
		{"frank", "other", day(6), []any{"c"}},
	} {
		id := mustOID(t, userOneID)
		id[11] = byte(i + 1)
		d := sources.D("_id", id, "username", u.name, "desk", u.desk, "_updated", u.upd)
		if u.tags != nil {
			d.Set("tags", u.tags)
		}
		users = append(users, d)
	}
	return map[string][]*sources.Doc{"users": users}
}

func names(docs []*sources.Doc) []string {
	out := []string{}
	for _, d := range docs {
		s, _ := d.String("username")
		out = append(out, s)
	}
	return out
}

func listQuery(t testing.TB, resource, where string, sort []sources.SortKey, page, max int) *sources.Query {
	q := &sources.Query{Resource: res(resource), Page: page, MaxResults: max, Sort: sort}
	if q.Sort == nil {
		q.Sort = q.Resource.DefaultSort
	}
	if where != "" {
		v, err := codec.DecodeJSON([]byte(where), codec.DecodeOptions{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		q.Where = v.(*sources.Doc)
	}
	return q
}

func TestFind(t *testing.T) {
	e := newEnv(t, userSeed(t), mongosrc.Options{})
	asc := []sources.SortKey{{Field: "username"}}
	for _, tc := range []struct {
		name       string
		where      string
		sort       []sources.SortKey
		page, max  int
		want       []string
		wantTotal  int
		wantFilter string
		wantCount  bool
	}{
		{name: "default sort, one page", page: 1, max: 25,
			want: []string{"alice", "bob", "carol", "dave", "erin", "frank"}, wantTotal: 6, wantFilter: "{}"},
		{name: "descending", sort: []sources.SortKey{{Field: "_updated", Desc: true}}, page: 1, max: 2,
			want: []string{"frank", "erin"}, wantTotal: 6, wantFilter: "{}", wantCount: true},
		{name: "second page", sort: asc, page: 2, max: 4,
			want: []string{"erin", "frank"}, wantTotal: 6, wantFilter: "{}"},
		{name: "past the end counts", sort: asc, page: 5, max: 4,
			want: []string{}, wantTotal: 6, wantFilter: "{}", wantCount: true},
		{name: "hex matches ObjectId and string", where: `{"desk": "` + deskOID + `"}`, sort: asc, page: 1, max: 25,
			want: []string{"alice", "bob", "erin"}, wantTotal: 3,
			wantFilter: `{"desk": {"$in": [{"$oid":"` + deskOID + `"},"` + deskOID + `"]}}`},
		{name: "date range", where: `{"_updated": {"$gte": "2024-01-03T00:00:00+0000", "$lt": "2024-01-05T00:00:00+0000"}}`,
			sort: asc, page: 1, max: 25, want: []string{"carol", "dave"}, wantTotal: 2,
			wantFilter: `{"_updated": {"$gte": {"$date":{"$numberLong":"1704240000000"}},"$lt": {"$date":{"$numberLong":"1704412800000"}}}}`},
		{name: "$or and $in", where: `{"$or": [{"username": {"$in": ["dave", "frank"]}}, {"tags": {"$size": 0}}]}`,
			sort: asc, page: 1, max: 2, want: []string{"carol", "dave"}, wantTotal: 3, wantCount: true,
			wantFilter: `{"$or": [{"username": {"$in": ["dave","frank"]}},{"tags": {"$size": {"$numberInt":"0"}}}]}`},
		{name: "$ne hex", where: `{"desk": {"$ne": "` + deskOID + `"}}`, sort: asc, page: 1, max: 25,
			want: []string{"carol", "dave", "frank"}, wantTotal: 3,
			wantFilter: `{"desk": {"$nin": [{"$oid":"` + deskOID + `"},"` + deskOID + `"]}}`},
		{name: "$exists false", where: `{"tags": {"$exists": false}}`, sort: asc, page: 1, max: 25,
			want: []string{"erin"}, wantTotal: 1, wantFilter: `{"tags": {"$exists": false}}`},
		{name: "$all and $elemMatch", where: `{"tags": {"$all": ["b"], "$elemMatch": {"$eq": "a"}}}`, sort: asc, page: 1, max: 25,
			want: []string{"alice"}, wantTotal: 1, wantFilter: `{"tags": {"$all": ["b"],"$elemMatch": {"$eq": "a"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.srv.Reset()
			sort := tc.sort
			if sort == nil {
				sort = res("users").DefaultSort
			}
			got, err := e.store.Find(t.Context(), listQuery(t, "users", tc.where, sort, tc.page, tc.max))
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			if diff := cmp.Diff(names(got.Docs), tc.want); diff != "" {
				t.Errorf("documents (-got +want):\n%s", diff)
			}
			if got.Total != tc.wantTotal {
				t.Errorf("Total = %d, want %d", got.Total, tc.wantTotal)
			}
			find := lastCommand(t, e.srv, "find")
			if got := field(find, "filter"); got != compact(tc.wantFilter) {
				t.Errorf("filter sent = %s, want %s", got, tc.wantFilter)
			}
			counts := e.srv.Named("aggregate", "count")
			if got := len(counts) > 0; got != tc.wantCount {
				t.Errorf("counted = %v, want %v", got, tc.wantCount)
			}
		})
	}
}

// TestFindCommand checks the find and count commands sent for a list.
func TestFindCommand(t *testing.T) {
	e := newEnv(t, userSeed(t), mongosrc.Options{})
	q := listQuery(t, "users", `{"username": {"$gt": "a"}}`,
		[]sources.SortKey{{Field: "_updated", Desc: true}, {Field: "username"}}, 2, 2)
	if _, err := e.store.Find(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	find := lastCommand(t, e.srv, "find")
	for key, want := range map[string]string{
		"find":      `"users"`,
		"sort":      `{"_updated": {"$numberInt":"-1"},"username": {"$numberInt":"1"},"_id": {"$numberInt":"1"}}`,
		"skip":      `{"$numberLong":"2"}`,
		"limit":     `{"$numberLong":"2"}`,
		"batchSize": `{"$numberInt":"2"}`,
		"$db":       `"superdesk"`,
	} {
		if got := field(find, key); got != compact(want) {
			t.Errorf("find %s = %s, want %s", key, got, want)
		}
	}
	agg := lastCommand(t, e.srv, "aggregate")
	if got, want := field(agg, "pipeline"),
		compact(`[{"$match": {"username": {"$gt": "a"}}},{"$group": {"_id": {"$numberInt":"1"},"n": {"$sum": {"$numberInt":"1"}}}}]`); got != want {
		t.Errorf("count pipeline = %s, want %s", got, want)
	}
	if got := e.queries.Value("mongo", "users", "find"); got != 1 {
		t.Errorf("find queries = %d, want 1", got)
	}
	if got := e.queries.Value("mongo", "users", "count"); got != 1 {
		t.Errorf("count queries = %d, want 1", got)
	}
	// Every counted query is timed too.
	if got := e.queries.Timed("mongo", "users", ""); got != 2 {
		t.Errorf("timed queries = %d, want 2 (the find and the count)", got)
	}
}

// TestFindNearCount checks that a $near list counts with $geoWithin,
// which the count aggregation accepts.
func TestFindNearCount(t *testing.T) {
	e := newEnv(t, map[string][]*sources.Doc{"events_files": {
		sources.D("_id", "a", "loc", []any{int64(0), int64(0)}),
		sources.D("_id", "b", "loc", []any{int64(1), int64(1)}),
	}}, mongosrc.Options{})
	q := listQuery(t, "events_files", `{"loc": {"$near": [0, 0], "$maxDistance": 5}}`, nil, 1, 1)
	_, err := e.store.Find(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := field(lastCommand(t, e.srv, "find"), "filter"), compact(`{"loc": {"$near": [{"$numberInt":"0"},{"$numberInt":"0"}],"$maxDistance": {"$numberInt":"5"}}}`); got != want {
		t.Errorf("find filter = %s, want %s", got, want)
	}
	if got, want := field(lastCommand(t, e.srv, "aggregate"), "pipeline", "0", "$match"), compact(`{"loc": {"$geoWithin": {"$center": [[{"$numberInt":"0"},{"$numberInt":"0"}],{"$numberInt":"5"}]}}}`); got != want {
		t.Errorf("count $match = %s, want %s", got, want)
	}
}

func TestFindRefusesBadWhere(t *testing.T) {
	e := newEnv(t, userSeed(t), mongosrc.Options{})
	_, err := e.store.Find(t.Context(), listQuery(t, "users", `{"$where": "sleep(100)"}`, nil, 1, 25))
	if !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("Find error = %v, want ErrInvalid", err)
	}
	if cmds := e.srv.Named("find", "aggregate"); len(cmds) != 0 {
		t.Errorf("%d commands reached the server, want none", len(cmds))
	}
}

func TestLookup(t *testing.T) {
	e := newEnv(t, userSeed(t), mongosrc.Options{})
	for _, tc := range []struct {
		name   string
		l      sources.Lookup
		want   []string
		filter string
	}{
		{"hex and ObjectID values", sources.Lookup{Collection: "users", Field: "desk",
			Values: []any{deskOID, mustOID(t, deskBoth)}, Sort: []sources.SortKey{{Field: "username", Desc: true}}},
			[]string{"erin", "carol", "bob", "alice"},
			`{"desk": {"$in": [{"$oid":"` + deskOID + `"},"` + deskOID + `",{"$oid":"` + deskBoth + `"},"` + deskBoth + `"]}}`},
		{"limit", sources.Lookup{Collection: "users", Field: "username", Values: []any{"frank", "alice", "zed"},
			Sort: []sources.SortKey{{Field: "username"}}, Limit: 1},
			[]string{"alice"}, `{"username": {"$in": ["frank","alice","zed"]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.store.Lookup(t.Context(), tc.l)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(names(got), tc.want); diff != "" {
				t.Errorf("documents (-got +want):\n%s", diff)
			}
			if got := field(lastCommand(t, e.srv, "find"), "filter"); got != compact(tc.filter) {
				t.Errorf("filter = %s, want %s", got, tc.filter)
			}
		})
	}
	if got := e.queries.Value("mongo", "users", "lookup"); got != 2 {
		t.Errorf("lookup queries = %d, want 2", got)
	}
	e.srv.Reset()
	got, err := e.store.Lookup(t.Context(), sources.Lookup{Collection: "users", Field: "desk"})
	if err != nil || len(got) != 0 {
		t.Errorf("Lookup without values = %v, %v; want none", got, err)
	}
	if cmds := e.srv.Named("find"); len(cmds) != 0 {
		t.Errorf("a lookup without values sent %d finds", len(cmds))
	}
}

// TestDocumentConversion reads a document holding every BSON type
// through the driver and checks the values and their order.
func TestDocumentConversion(t *testing.T) {
	srv := mongotest.Start(t, nil)
	oid := bson.ObjectID(mustOID(t, deskOID))
	when := time.Date(2019, 8, 15, 12, 23, 4, 567e6, time.UTC)
	dec, _ := bson.ParseDecimal128("12.50")
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: oid},
		{Key: "zeta", Value: "first"},
		{Key: "alpha", Value: int32(7)},
		{Key: "big", Value: int64(1) << 50},
		{Key: "ratio", Value: 0.25},
		{Key: "when", Value: bson.NewDateTimeFromTime(when)},
		{Key: "price", Value: dec},
		{Key: "nested", Value: bson.D{{Key: "y", Value: bson.A{int32(1), "two", bson.D{{Key: "ref", Value: oid}}}}, {Key: "x", Value: nil}}},
		{Key: "blob", Value: bson.Binary{Data: []byte{1, 2, 3}}},
		{Key: "pattern", Value: bson.Regex{Pattern: "a+", Options: "i"}},
		{Key: "flag", Value: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.InsertRaw("desks", raw); err != nil {
		t.Fatal(err)
	}
	e := connect(t, srv, mongosrc.Options{})
	got, err := e.store.Get(t.Context(), res("desks"), deskOID)
	if err != nil {
		t.Fatal(err)
	}
	want := sources.D(
		"_id", mustOID(t, deskOID),
		"zeta", "first",
		"alpha", int64(7),
		"big", int64(1)<<50,
		"ratio", 0.25,
		"when", when,
		"price", "12.50",
		"nested", sources.D("y", []any{int64(1), "two", sources.D("ref", mustOID(t, deskOID))}, "x", nil),
		"blob", "AQID",
		"pattern", "/a+/i",
		"flag", true,
	)
	if diff := cmp.Diff(got, want, docCmp); diff != "" {
		t.Errorf("document (-got +want):\n%s", diff)
	}
}

func TestDatabaseName(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"mongodb://localhost/superdesk", "superdesk"},
		{"mongodb://localhost:27017/sd_prod?replicaSet=rs0", "sd_prod"},
		{"mongodb://user:p%40ss@h1,h2/db1?authSource=admin", "db1"},
		{"mongodb+srv://cluster.example.com/news", "news"},
		{"mongodb://localhost", "superdesk"},
		{"mongodb://localhost/", "superdesk"},
		{"mongodb://localhost/?w=1", "superdesk"},
		{"mongodb://localhost/my%20db", "my db"},
		{"garbage", "superdesk"},
	} {
		if got := mongosrc.DatabaseName(tc.uri); got != tc.want {
			t.Errorf("DatabaseName(%q) = %q, want %q", tc.uri, got, tc.want)
		}
	}
}

func TestClientOptions(t *testing.T) {
	o := mongosrc.ClientOptions("mongodb://127.0.0.1:1/superdesk", 7, 0)
	if o.ServerSelectionTimeout == nil || *o.ServerSelectionTimeout != 2*time.Second {
		t.Errorf("server selection timeout = %v, want 2s", o.ServerSelectionTimeout)
	}
	if o.ConnectTimeout == nil || *o.ConnectTimeout != 2*time.Second {
		t.Errorf("connect timeout = %v, want 2s", o.ConnectTimeout)
	}
	if o.MaxPoolSize == nil || *o.MaxPoolSize != 7 {
		t.Errorf("max pool size = %v, want 7", o.MaxPoolSize)
	}
	if o.AppName == nil || *o.AppName != "prodapi" {
		t.Errorf("app name = %v, want prodapi", o.AppName)
	}
	if o.RetryReads == nil || !*o.RetryReads {
		t.Errorf("retry reads = %v, want true", o.RetryReads)
	}
	if o.ReadPreference == nil || o.ReadPreference.Mode().String() != "primaryPreferred" {
		t.Errorf("read preference = %v, want primaryPreferred", o.ReadPreference)
	}
	short := mongosrc.ClientOptions("mongodb://127.0.0.1:1/", 0, 500*time.Millisecond)
	if *short.ServerSelectionTimeout != 500*time.Millisecond {
		t.Errorf("with a 500ms timeout, server selection timeout = %v", *short.ServerSelectionTimeout)
	}
	uri := mongosrc.ClientOptions("mongodb://127.0.0.1:1/?readPreference=secondary&maxPoolSize=3&serverSelectionTimeoutMS=9000&appName=x", 7, 0)
	if uri.ReadPreference.Mode().String() != "secondary" || *uri.MaxPoolSize != 3 ||
		*uri.ServerSelectionTimeout != 9*time.Second || *uri.AppName != "x" {
		t.Errorf("URI options did not win: %v %v %v %v", uri.ReadPreference.Mode(), *uri.MaxPoolSize, *uri.ServerSelectionTimeout, *uri.AppName)
	}
}

func TestPing(t *testing.T) {
	e := newEnv(t, nil, mongosrc.Options{})
	if err := e.store.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if len(e.srv.Named("ping")) == 0 {
		t.Error("no ping reached the server")
	}
}

// compact drops the spaces Extended JSON rendering puts after colons.
func compact(s string) string { return strings.ReplaceAll(s, " ", "") }
