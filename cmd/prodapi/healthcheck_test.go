package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, `{"status":"ready"}`)
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ts := httptest.NewServer(mux)
	defer ts.Close()
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())

	opsAddr := ":" + port
	check := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), env{args: append([]string{"healthcheck"}, args...),
			getenv: func(k string) string { return map[string]string{"PRODAPI_OPS_ADDR": opsAddr}[k] }, stdout: &out, stderr: io.Discard})
		return out.String(), err
	}
	// By default it probes /readyz on the operator listener,
	// PRODAPI_OPS_ADDR's port on 127.0.0.1 for a wildcard address, or
	// its address.
	for _, addr := range []string{":" + port, "0.0.0.0:" + port, "[::]:" + port, "127.0.0.1:" + port} {
		opsAddr = addr
		if out, err := check(); err != nil || out != "{\"status\":\"ready\"}\n" {
			t.Errorf("PRODAPI_OPS_ADDR=%s, ready: %q, %v", addr, out, err)
		}
	}
	opsAddr = "127.0.0.1:1"
	if _, err := check(); err == nil {
		t.Error("PRODAPI_OPS_ADDR=127.0.0.1:1: healthy")
	}
	opsAddr = ":" + port
	status = http.StatusServiceUnavailable
	if _, err := check(); err == nil || !strings.Contains(err.Error(), `answered 503 Service Unavailable: {"status":"ready"}`) {
		t.Errorf("unavailable: %v", err)
	}
	for _, args := range [][]string{
		{"-url", ts.URL + "/slow", "-timeout", "50ms"},
		{"-url", ts.URL + "/nothing-here"},
		{"-url", "http://127.0.0.1:1/readyz"},
		{"-url", "::"},
		{"-frobnicate"},
	} {
		if _, err := check(args...); err == nil {
			t.Errorf("healthcheck %v succeeded", args)
		}
	}
}

// Against the service itself: a serving sandbox is healthy, asked where
// its PRODAPI_OPS_ADDR says, not on the API's port (where /readyz is
// 404).
func TestHealthcheckAgainstTheService(t *testing.T) {
	in := start(t)
	ops := strings.TrimPrefix(in.ops, "http://")
	var out bytes.Buffer
	err := run(context.Background(), env{args: []string{"healthcheck"},
		getenv: func(k string) string { return map[string]string{"PRODAPI_OPS_ADDR": ops}[k] }, stdout: &out, stderr: io.Discard})
	if err != nil || !strings.Contains(out.String(), `"status":"ready"`) {
		t.Errorf("healthcheck: %v, %s", err, out.String())
	}
	err = run(context.Background(), env{args: []string{"healthcheck", "-url", in.base + "/readyz"},
		getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("healthcheck of the API's port: %v, want its 404", err)
	}
}
