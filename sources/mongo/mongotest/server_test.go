package mongotest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func seed() map[string][]*sources.Doc {
	var docs []*sources.Doc
	for i, name := range []string{"e", "b", "d", "a", "c"} {
		docs = append(docs, sources.D("_id", int64(i), "name", name, "n", int64(i*10),
			"sub", sources.D("x", int64(i), "y", "keep"), "list", []any{sources.D("k", int64(i), "v", "w")}))
	}
	return map[string][]*sources.Doc{"things": docs}
}

func start(t *testing.T) (*mongotest.Server, *mongodriver.Collection) {
	t.Helper()
	srv := mongotest.Start(t, seed())
	client, err := mongodriver.Connect(options.Client().ApplyURI(srv.URI()).
		SetServerSelectionTimeout(2 * time.Second).SetRetryReads(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	return srv, client.Database(mongotest.Database).Collection("things")
}

func all(t *testing.T, cur *mongodriver.Cursor) []string {
	t.Helper()
	var out []string
	for cur.Next(t.Context()) {
		out = append(out, cur.Current.Lookup("name").StringValue())
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHandshake(t *testing.T) {
	srv, coll := start(t)
	if err := coll.Database().Client().Ping(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	cmds := srv.Commands()
	if len(cmds) == 0 || cmds[0].Name != "isMaster" || cmds[0].DB != "admin" {
		t.Errorf("first command = %+v, want the legacy isMaster on admin", cmds[0])
	}
	if len(srv.Named("ping")) != 1 {
		t.Errorf("pings = %d, want 1", len(srv.Named("ping")))
	}
}

func TestFindBatches(t *testing.T) {
	srv, coll := start(t)
	cur, err := coll.Find(t.Context(), bson.D{}, options.Find().SetSort(bson.D{{Key: "name", Value: 1}}).SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all(t, cur), []string{"a", "b", "c", "d", "e"}); diff != "" {
		t.Errorf("names (-got +want):\n%s", diff)
	}
	if n := len(srv.Named("getMore")); n != 2 {
		t.Errorf("getMores = %d, want 2", n)
	}
	if n := srv.OpenCursors(); n != 0 {
		t.Errorf("open cursors = %d", n)
	}

	cur, err = coll.Find(t.Context(), bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 20}}}},
		options.Find().SetSort(bson.D{{Key: "n", Value: -1}}).SetSkip(1).SetLimit(2).SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Next(t.Context()) || cur.Current.Lookup("name").StringValue() != "a" {
		t.Fatalf("first = %v, want a", cur.Current)
	}
	if n := srv.OpenCursors(); n != 1 {
		t.Errorf("open cursors mid-read = %d, want 1", n)
	}
	cur.Close(t.Context())
	if n := srv.OpenCursors(); n != 0 || len(srv.Named("killCursors")) != 1 {
		t.Errorf("after Close: %d open cursors, %d killCursors", n, len(srv.Named("killCursors")))
	}
}

func TestProjection(t *testing.T) {
	_, coll := start(t)
	for _, tc := range []struct {
		name string
		proj bson.D
		want string
	}{
		{"inclusion", bson.D{{Key: "name", Value: 1}}, `{"_id": {"$numberInt":"0"},"name": "e"}`},
		{"without _id", bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 0}}, `{"name": "e"}`},
		{"exclusion", bson.D{{Key: "sub", Value: 0}, {Key: "list", Value: 0}, {Key: "n", Value: 0}}, `{"_id": {"$numberInt":"0"},"name": "e"}`},
		{"dotted inclusion", bson.D{{Key: "sub.y", Value: 1}, {Key: "list.v", Value: true}},
			`{"_id": {"$numberInt":"0"},"sub": {"y": "keep"},"list": [{"v": "w"}]}`},
		{"dotted exclusion", bson.D{{Key: "sub.x", Value: 0}, {Key: "list", Value: 0}, {Key: "n", Value: 0}, {Key: "_id", Value: 0}},
			`{"name": "e","sub": {"y": "keep"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := coll.FindOne(t.Context(), bson.D{{Key: "name", Value: "e"}}, options.FindOne().SetProjection(tc.proj)).Raw()
			if err != nil {
				t.Fatal(err)
			}
			if got := raw.String(); got != strings.ReplaceAll(tc.want, " ", "") && got != tc.want {
				t.Errorf("document = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCountAndAggregate(t *testing.T) {
	_, coll := start(t)
	n, err := coll.CountDocuments(t.Context(), bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: 30}}}}, options.Count().SetSkip(1))
	if err != nil || n != 2 {
		t.Errorf("CountDocuments = %d, %v; want 2", n, err)
	}
	var res bson.M
	err = coll.Database().RunCommand(t.Context(), bson.D{{Key: "count", Value: "things"}, {Key: "query", Value: bson.D{{Key: "name", Value: "a"}}}}).Decode(&res)
	if err != nil || res["n"] != int32(1) {
		t.Errorf("count = %v, %v; want n 1", res, err)
	}
	cur, err := coll.Aggregate(t.Context(), mongodriver.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 0}}}}}},
		{{Key: "$sort", Value: bson.D{{Key: "name", Value: -1}}}},
		{{Key: "$skip", Value: 1}},
		{{Key: "$limit", Value: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all(t, cur), []string{"c", "b"}); diff != "" {
		t.Errorf("aggregate (-got +want):\n%s", diff)
	}
	cur, err = coll.Aggregate(t.Context(), mongodriver.Pipeline{{{Key: "$count", Value: "total"}}})
	if err != nil || !cur.Next(t.Context()) || cur.Current.Lookup("total").Int32() != 5 {
		t.Errorf("$count: %v %v", err, cur.Current)
	}
	_, err = coll.Aggregate(t.Context(), mongodriver.Pipeline{{{Key: "$lookup", Value: bson.D{}}}})
	if !hasCode(err, 40324) {
		t.Errorf("$lookup: %v, want code 40324", err)
	}
}

func hasCode(err error, code int) bool {
	var se mongodriver.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

func TestCommandErrorsOfTheFake(t *testing.T) {
	_, coll := start(t)
	err := coll.Database().RunCommand(t.Context(), bson.D{{Key: "insert", Value: "things"}}).Err()
	if !hasCode(err, 59) {
		t.Errorf("insert: %v, want CommandNotFound", err)
	}
	_, err = coll.Find(t.Context(), bson.D{{Key: "$where", Value: "1"}})
	if !hasCode(err, 2) {
		t.Errorf("$where: %v, want BadValue", err)
	}
}

func TestFaults(t *testing.T) {
	srv, coll := start(t)
	srv.Fail(mongotest.Fault{Commands: []string{"find"}, Times: 1, Code: 2, CodeName: "BadValue", Message: "boom"})
	if _, err := coll.Find(t.Context(), bson.D{}); !hasCode(err, 2) {
		t.Errorf("first find: %v, want the injected BadValue", err)
	}
	if _, err := coll.Find(t.Context(), bson.D{}); err != nil {
		t.Errorf("second find: %v, want the fault spent", err)
	}
	srv.Fail(mongotest.Fault{Code: 11600, CodeName: "InterruptedAtShutdown"})
	if err := coll.Database().Client().Ping(t.Context(), nil); !hasCode(err, 11600) {
		t.Errorf("ping under a catch-all fault: %v", err)
	}
	srv.ClearFaults()

	release := make(chan struct{})
	srv.Fail(mongotest.Fault{Commands: []string{"count"}, Hang: release})
	done := make(chan error)
	go func() {
		done <- coll.Database().RunCommand(t.Context(), bson.D{{Key: "count", Value: "things"}}).Err()
	}()
	if err := srv.WaitCommand(t.Context(), "count"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("count answered while held: %v", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("released count: %v", err)
	}
}

func TestStopRestart(t *testing.T) {
	srv, coll := start(t)
	if _, err := coll.CountDocuments(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := coll.CountDocuments(t.Context(), bson.D{}); err == nil {
		t.Error("count with the server stopped succeeded")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Generous: the driver's monitor must notice on a busy machine.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		_, err := coll.CountDocuments(ctx, bson.D{})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the driver did not reconnect: %v", err)
		}
	}
}
