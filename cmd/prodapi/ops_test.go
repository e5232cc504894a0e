package main

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/test/testkit"
)

// A client holding every connection of the API's port
// (PRODAPI_MAX_CONNS) starves nobody's probes: they are on the operator
// listener, whose connections are its own. The held connections have
// sent nothing (so none is idle, and none can be shed for a newcomer):
// a new connection to the API is refused, while /healthz, /readyz and
// /metrics answer 200 on new connections of their own.
func TestProbesAnswerWhileTheAPIIsFull(t *testing.T) {
	const held = 4
	in := start(t, "PRODAPI_MAX_CONNS", "4",
		// The held connections must outlive the test on a busy machine.
		"PRODAPI_READ_HEADER_TIMEOUT", "10m", "PRODAPI_READ_TIMEOUT", "10m")
	api := strings.TrimPrefix(in.base, "http://")
	for range held {
		dialRaw(t, api)
	}
	testkit.Eventually(t, "the API's connections all held", func() bool {
		return in.metric(t, "prodapi_http_connections") == held
	})
	if !dialRaw(t, api).closed() {
		t.Fatal("a connection beyond PRODAPI_MAX_CONNS was served: the API's port is not full")
	}
	if got := in.metric(t, `prodapi_http_connections_shed_total{reason="full"}`); got < 1 {
		t.Errorf("prodapi_http_connections_shed_total{reason=\"full\"} = %v, want the refusal counted", got)
	}

	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // a new connection each, as kubelet's
	for range 3 {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			res, err := probe.Get(in.ops + path)
			if err != nil {
				t.Fatalf("%s while the API's port is full: %v", path, err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("%s while the API's port is full: %d", path, res.StatusCode)
			}
		}
	}
}

// The API's port serves the API alone: the probes and the metrics are
// the operator listener's, and there they need no token.
func TestOperatorEndpointsOffTheAPI(t *testing.T) {
	in := start(t)
	tok := bearer(t, devSecret, "ARCHIVE_READ")
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, auth := range []string{"", tok} {
			status, h, body := in.get(t, path, auth)
			if status != http.StatusNotFound || h.Get("Content-Type") != "application/json" ||
				!strings.HasPrefix(string(body), `{"_status":"ERR","_error":{"code":404,`) {
				t.Errorf("%s on the API's port: %d %s %s, want the 404 envelope", path, status, h.Get("Content-Type"), body)
			}
		}
		status, h, body := in.getOps(t, path)
		if status != http.StatusOK || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s on the operator listener: %d %v %.200s", path, status, h, body)
		}
	}
	// The sandbox's banner says where they are.
	ops := strings.TrimPrefix(in.ops, "http://")
	if want := "Probes and metrics, without a token: http://" + ops + "/healthz, /readyz and /metrics"; !strings.Contains(in.stdout.String(), want) {
		t.Errorf("the banner does not say %q:\n%s", want, in.stdout)
	}
	_, port, _ := net.SplitHostPort(ops)
	testkit.Eventually(t, "a log line naming the operator listener", func() bool { // the log sink writes in the background
		return strings.Contains(in.stderr.String(), `"msg":"operator listener","addr":"127.0.0.1:`+port+`"`)
	})
}
