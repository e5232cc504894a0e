package realserver

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestFerretDB(t *testing.T) {
	var s Set
	defer s.Close()
	f := s.FerretDB(t)
	t.Logf("FerretDB %s at %s", f.Version, f.URI)
	if !strings.HasPrefix(f.Version, "v1.") {
		t.Errorf("Version = %q, want the v1 module's version", f.Version)
	}
	if again := s.FerretDB(t); again != f {
		t.Errorf("a second call started another server: %+v, first %+v", again, f)
	}

	c, err := mongo.Connect(options.Client().ApplyURI(f.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("realserver").Collection("docs")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(t.Context(), bson.D{{Key: "_id", Value: "a"}}).Decode(&got); err != nil || got.N != 1 {
		t.Errorf("reading back: %+v, %v", got, err)
	}

	// Close stops it: the port stops answering.
	u, err := url.Parse(f.URI)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", u.Host)
	}
}

// Without a Go toolchain FerretDB cannot be built: that is a missing
// prerequisite (a loud skip, or a failure under PRODAPI_REQUIRE_REAL),
// not an error.
func TestFerretDBWithoutGo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, _, err := buildFerretDB(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("buildFerretDB without go on PATH: %v, want ErrUnavailable", err)
	}
}

// StartFerretDB's server is the test's own: another from the shared one,
// and the test may kill it.
func TestStartFerretDB(t *testing.T) {
	var s Set
	defer s.Close()
	shared := s.FerretDB(t)
	f, p := StartFerretDB(t)
	if f.URI == shared.URI {
		t.Fatalf("StartFerretDB returned the shared server %s", f.URI)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(f.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	if err := c.Ping(t.Context(), nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	p.Kill()
	u, err := url.Parse(f.URI)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Kill", u.Host)
	}
	// The shared server is untouched.
	sc, err := mongo.Connect(options.Client().ApplyURI(shared.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Disconnect(context.Background())
	if err := sc.Ping(t.Context(), nil); err != nil {
		t.Errorf("the shared server after the test's own was killed: %v", err)
	}
}
