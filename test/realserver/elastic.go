package realserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ElasticVersion is the Elasticsearch version the launcher in
// test/elastic runs (the one Superdesk's docker-compose ships, give or
// take a patch release).
const ElasticVersion = "7.10.2"

// defaultJavaHome is Debian's JDK 17, on which Elasticsearch 7.10 runs.
const defaultJavaHome = "/usr/lib/jvm/java-17-openjdk-amd64"

// elasticStartTimeout bounds a start on a loaded machine (the node is
// ready in 12-15 s with the cached classpath, on 2 cores under a load of
// 30); it is not a measurement.
const elasticStartTimeout = 3 * time.Minute

// Elastic is a running Elasticsearch node.
type Elastic struct {
	URL     string // http://127.0.0.1:port
	Version string // what the node reports, as "7.10.2"
	// PID is the node's process, for benchmarks that read the CPU time
	// it spends (/proc/PID/stat).
	PID int
}

// Elastic returns the set's Elasticsearch 7.10.2 node, starting it on
// first use: one JVM (heap 256-512 MB) on free loopback ports, with its
// data in a temporary directory removed when the set closes. It needs a
// JDK (Debian's JDK 17, or the one JAVA_HOME names) and, the first time,
// Maven with access to Maven Central; without them the test is skipped
// loudly, or fails under PRODAPI_REQUIRE_REAL.
func (s *Set) Elastic(t testing.TB) *Elastic {
	t.Helper()
	return Shared(t, s, "elastic", func() (*Elastic, error) { return s.startElastic(t) })
}

func (s *Set) startElastic(t testing.TB) (*Elastic, error) {
	java, javaHome, err := findJava()
	if err != nil {
		return nil, err
	}
	dir, err := findElasticProject()
	if err != nil {
		return nil, err
	}
	cp, err := elasticClasspath(dir, javaHome)
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "prodapi-es-")
	if err != nil {
		return nil, err
	}
	// No t.Fatal in here: Shared's other callers wait for this to return.
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(home)
		return nil, err
	}
	// The node ends when this pipe does: at Close, or when the test
	// binary dies without closing (the kernel closes it then).
	stdin, parentEnd, err := os.Pipe()
	if err != nil {
		os.RemoveAll(home)
		return nil, err
	}
	// C1 only: the node is ready in about half the time (12 s instead of
	// 25 s here), and test searches are too small to miss C2. A benchmark
	// that measures the node's throughput asks for a node as deployed:
	// PRODAPI_TEST_ES_JVM replaces these flags (say "-Xms2g -Xmx2g
	// -XX:+UseG1GC").
	jvm := []string{"-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	if v := strings.Fields(os.Getenv("PRODAPI_TEST_ES_JVM")); len(v) > 0 {
		jvm = v
	}
	cmd := exec.Command(java, append(jvm,
		"-Djava.io.tmpdir="+home,
		"-Djava.awt.headless=true",
		"-Dlog4j2.disable.jmx=true",
		"-Dlog4j.shutdownHookEnabled=false",
		// What the OSS tarball reports in GET /: the launcher loads
		// exactly the OSS modules.
		"-Des.distribution.flavor=oss",
		"-Des.distribution.type=tar",
		"-Dprodapi.exitOnStdinEOF=true",
		"-Dprodapi.deleteHomeOnExit=true",
		"-cp", cp,
		"prodapi.elastic.Launcher",
		strconv.Itoa(ports[0]), strconv.Itoa(ports[1]), home)...)
	cmd.Env = append(os.Environ(), "JAVA_HOME="+javaHome)
	cmd.Stdin = stdin
	begin := time.Now()
	p, err := Start("elasticsearch", cmd)
	stdin.Close() // the child's end
	if err != nil {
		parentEnd.Close()
		os.RemoveAll(home)
		return nil, err
	}
	// The node stops before its directory goes: a cleanup, not Adopt,
	// because cleanups run before the adopted processes stop.
	s.OnClose(func() {
		p.Stop(30 * time.Second)
		parentEnd.Close()
		os.RemoveAll(home)
	})
	es := &Elastic{URL: "http://" + Addr(ports[0]), PID: p.PID()}
	err = p.WaitReady(elasticStartTimeout, func(ctx context.Context) error {
		v, err := elasticReady(ctx, es.URL)
		es.Version = v
		return err
	})
	if err != nil {
		return nil, err
	}
	t.Logf("realserver: Elasticsearch %s ready at %s in %s (pid %d, %s)", es.Version, es.URL, time.Since(begin).Round(100*time.Millisecond), p.PID(), java)
	return es, nil
}

// elasticReady returns the node's version once it answers GET / and its
// cluster is green.
func elasticReady(ctx context.Context, url string) (string, error) {
	var info struct {
		Version struct {
			Number string `json:"number"`
		} `json:"version"`
	}
	if err := getJSON(ctx, url+"/", &info); err != nil {
		return "", err
	}
	var health struct {
		Status string `json:"status"`
	}
	if err := getJSON(ctx, url+"/_cluster/health?wait_for_status=green&timeout=5s", &health); err != nil {
		return "", err
	}
	if health.Status != "green" {
		return "", fmt.Errorf("cluster health is %q", health.Status)
	}
	return info.Version.Number, nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// freePorts returns n distinct free loopback ports, without a testing.TB,
// for Shared's start function, which must return rather than fail its
// caller.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// findJava returns the java binary and its JAVA_HOME:
// Debian's JDK 17, else JAVA_HOME. Debian's comes first: a JAVA_HOME
// set for other work may name a JDK too new for Elasticsearch 7.10.
func findJava() (java, home string, err error) {
	const how = "install a JDK 17 (apt-get install -y openjdk-17-jdk-headless) or point JAVA_HOME at one"
	for _, h := range []string{defaultJavaHome, os.Getenv("JAVA_HOME")} {
		if h == "" {
			continue
		}
		j := filepath.Join(h, "bin", "java")
		if fi, err := os.Stat(j); err == nil && !fi.IsDir() {
			return j, h, nil
		}
	}
	return "", "", Unavailable("java (JDK 17)", how)
}

// findElasticProject finds test/elastic, the Maven project of the
// launcher, from this source file (or, in a build without source paths,
// from the working directory up).
func findElasticProject() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for {
			p := filepath.Join(d, "test", "elastic")
			if _, err := os.Stat(filepath.Join(p, "pom.xml")); err == nil {
				return p, nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", errors.New("realserver: test/elastic/pom.xml not found above the test's directory")
}

// elasticClasspath returns the launcher's classpath: its compiled
// classes and the jars Maven resolved. Maven runs only when the pom or
// the launcher changed (the key is their hash) or a jar has gone from
// the local repository; concurrent test binaries take turns on a lock.
func elasticClasspath(dir, javaHome string) (string, error) {
	key, err := hashFiles(filepath.Join(dir, "pom.xml"), filepath.Join(dir, "src/main/java/prodapi/elastic/Launcher.java"))
	if err != nil {
		return "", err
	}
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(target, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(target, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	cpFile, keyFile := filepath.Join(target, "classpath.txt"), filepath.Join(target, "classpath.key")
	classes := filepath.Join(target, "classes")
	if cp, ok := cachedClasspath(cpFile, keyFile, key, filepath.Join(classes, "prodapi/elastic/Launcher.class")); ok {
		return classes + string(os.PathListSeparator) + cp, nil
	}
	mvn, err := LookPath("mvn", "install Maven (apt-get install -y maven); it fetches Elasticsearch 7.10.2 from Maven Central once")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(mvn, "-B", "-q", "-f", filepath.Join(dir, "pom.xml"),
		"compile", "dependency:build-classpath", "-Dmdep.outputFile="+cpFile)
	cmd.Env = append(os.Environ(), "JAVA_HOME="+javaHome)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("realserver: mvn could not assemble the Elasticsearch node (needs Maven Central or a warm ~/.m2): %v\n%s", err, out)
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(keyFile, []byte(key), 0o644); err != nil {
		return "", err
	}
	return classes + string(os.PathListSeparator) + strings.TrimSpace(string(cp)), nil
}

// cachedClasspath returns the cached classpath when its key matches and
// every file it needs is still there.
func cachedClasspath(cpFile, keyFile, key, launcher string) (string, bool) {
	k, err := os.ReadFile(keyFile)
	if err != nil || string(k) != key {
		return "", false
	}
	if _, err := os.Stat(launcher); err != nil {
		return "", false
	}
	b, err := os.ReadFile(cpFile)
	if err != nil {
		return "", false
	}
	cp := strings.TrimSpace(string(b))
	for _, jar := range filepath.SplitList(cp) {
		if _, err := os.Stat(jar); err != nil {
			return "", false
		}
	}
	return cp, cp != ""
}

func hashFiles(paths ...string) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(p), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
