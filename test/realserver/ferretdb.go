package realserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// FerretDB is a running FerretDB: a MongoDB-wire server on loopback,
// storing in SQLite files in a scratch directory.
type FerretDB struct {
	// URI is the connection string, mongodb://127.0.0.1:PORT/.
	URI string
	// Version is what buildInfo.ferretdbVersion answers, "v1.24.2";
	// tests key FerretDB's known differences from MongoDB on it.
	Version string
}

// ferretDBStart bounds a start: the process is running by then, so this
// is how long it may take to answer its first command on a loaded
// machine (it takes well under a second on an idle one).
const ferretDBStart = 2 * time.Minute

// FerretDB returns the set's FerretDB, building the command of the nested
// module test/ferretdb and starting it on first use; it stops with the
// set. Tests share it: each uses a database of its own.
func (s *Set) FerretDB(t testing.TB) *FerretDB {
	t.Helper()
	return Shared(t, s, "ferretdb", func() (*FerretDB, error) { return s.startFerretDB(t) })
}

var readyLine = regexp.MustCompile(`ferretdb: ready (\S+) version (\S+)`)

func (s *Set) startFerretDB(t testing.TB) (*FerretDB, error) {
	f, p, dir, err := launchFerretDB(t)
	if p != nil {
		s.OnClose(func() { stopFerretDB(p, dir) })
	}
	return f, err
}

// StartFerretDB starts a FerretDB of the test's own, which it may freeze,
// stop or kill through the Process (a shared one must stay up for the
// other tests), and stops it at the test's cleanup.
func StartFerretDB(t testing.TB) (*FerretDB, *Process) {
	t.Helper()
	f, p, dir, err := launchFerretDB(t)
	if p != nil {
		t.Cleanup(func() { stopFerretDB(p, dir) })
	}
	if errors.Is(err, ErrUnavailable) {
		what, how := splitUnavailable(err)
		Missing(t, what, how)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f, p
}

func stopFerretDB(p *Process, dir string) {
	p.Stop(10 * time.Second)
	os.RemoveAll(dir)
}

// launchFerretDB builds FerretDB if need be, starts it in a scratch
// directory and waits until it answers. The process and directory come
// back even when it never became ready, for the caller to clean up.
func launchFerretDB(t testing.TB) (*FerretDB, *Process, string, error) {
	begin := time.Now()
	bin, built, err := buildFerretDB()
	if err != nil {
		return nil, nil, "", err
	}
	if built {
		t.Logf("realserver: built FerretDB into %s in %s", bin, time.Since(begin).Round(100*time.Millisecond))
	}
	begin = time.Now()
	dir, err := os.MkdirTemp("", "prodapi-ferretdb-")
	if err != nil {
		return nil, nil, "", err
	}
	// Port 0: the server binds a free port itself and names it in its
	// ready line, so no other process can take the port in between.
	p, err := Start("ferretdb", exec.Command(bin, "-addr", "127.0.0.1:0", "-dir", dir))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, "", err
	}
	f := &FerretDB{}
	err = p.WaitReady(ferretDBStart, func(ctx context.Context) error {
		m := readyLine.FindStringSubmatch(p.Output())
		if m == nil {
			return errors.New("no ready line yet")
		}
		v, err := ferretDBVersion(ctx, m[1])
		if err != nil {
			return err
		}
		if v != m[2] {
			return fmt.Errorf("buildInfo.ferretdbVersion is %q, the ready line says %q", v, m[2])
		}
		f.URI, f.Version = m[1], v
		return nil
	})
	if err != nil {
		return nil, p, dir, err
	}
	t.Logf("realserver: FerretDB %s ready at %s in %s (pid %d, %s)", f.Version, f.URI, time.Since(begin).Round(10*time.Millisecond), p.PID(), bin)
	return f, p, dir, nil
}

// ferretDBVersion asks the server at uri for buildInfo.ferretdbVersion.
func ferretDBVersion(ctx context.Context, uri string) (string, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		return "", err
	}
	defer c.Disconnect(context.WithoutCancel(ctx))
	var info struct {
		FerretDBVersion string `bson:"ferretdbVersion"`
	}
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return "", err
	}
	if info.FerretDBVersion == "" {
		return "", errors.New("buildInfo has no ferretdbVersion: not FerretDB")
	}
	return info.FerretDBVersion, nil
}

// buildFerretDB builds the command of test/ferretdb into the user's cache
// directory, under a name keyed by the Go version and the module's files,
// and returns its path, and whether it built it now. A binary already there is reused, so only the
// first run after a change pays for the build (minutes, cold; the Go
// build cache makes later ones cheap). Packages tested in parallel take
// turns under a file lock; the binary is renamed into place whole.
func buildFerretDB() (bin string, built bool, err error) {
	goBin, err := LookPath("go", "install the Go toolchain named in go.mod (https://go.dev/dl/)")
	if err != nil {
		return "", false, err
	}
	src, err := ferretDBModule(goBin)
	if err != nil {
		return "", false, err
	}
	key, err := ferretDBKey(goBin, src)
	if err != nil {
		return "", false, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "prodapi", "realserver")
	bin = filepath.Join(dir, "ferretdb-"+key)
	if _, err := os.Stat(bin); err == nil {
		return bin, false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	// One build at a time: go test runs packages in parallel, and each
	// would otherwise compile FerretDB's ~47 modules cold at once. The
	// lock goes with the process, however it ends.
	lock, err := os.OpenFile(filepath.Join(dir, "ferretdb.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", false, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", false, fmt.Errorf("realserver: locking the FerretDB build: %w", err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, false, nil // built while this one waited
	}
	tmp, err := os.CreateTemp(dir, "ferretdb-build-")
	if err != nil {
		return "", false, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(goBin, "build", "-o", tmp.Name(), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("realserver: building FerretDB in %s: %w\n%s", src, err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", false, err
	}
	return bin, true, nil
}

// ferretDBModule finds test/ferretdb from the main module's root, which
// go env names from the test's working directory (its package's).
func ferretDBModule(goBin string) (string, error) {
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("realserver: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("realserver: not inside prodapi's module, cannot find test/ferretdb")
	}
	src := filepath.Join(filepath.Dir(gomod), "test", "ferretdb")
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		return "", fmt.Errorf("realserver: the FerretDB module: %w", err)
	}
	return src, nil
}

// ferretDBKey hashes what the binary is built from: the Go version and
// the module's go.mod, go.sum and Go files (not its tests).
func ferretDBKey(goBin, src string) (string, error) {
	h := sha256.New()
	v, err := exec.Command(goBin, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("realserver: go env GOVERSION: %w", err)
	}
	h.Write(v)
	names, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return "", err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasSuffix(n, "_test.go") })
	for _, name := range append([]string{filepath.Join(src, "go.mod"), filepath.Join(src, "go.sum")}, names...) {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00", filepath.Base(name))
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
