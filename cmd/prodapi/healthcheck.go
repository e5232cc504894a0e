package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prodapi/prodapi/config"
)

// healthcheck implements `prodapi healthcheck`, the container's health
// probe (the distroless image has no curl): it succeeds when /readyz
// answers 200 within the timeout, and prints what it answered. By
// default it asks the operator listener PRODAPI_OPS_ADDR names.
func healthcheck(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	url := fs.String("url", readyzURL(e.getenv("PRODAPI_OPS_ADDR")), "the readiness URL to probe")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// Straight to the server: no proxy from the environment.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if err != nil {
		return fmt.Errorf("healthcheck: reading the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s: %s", *url, res.Status, body)
	}
	fmt.Fprintf(e.stdout, "%s\n", body)
	return nil
}

// readyzURL is the URL of /readyz on the operator listener at opsAddr
// (PRODAPI_OPS_ADDR; empty: its default), reached from this machine:
// 127.0.0.1 for a wildcard address. It reads no other setting, so that a
// configuration the service would refuse does not fail the probe too.
func readyzURL(opsAddr string) string {
	host, port, err := net.SplitHostPort(cmp.Or(opsAddr, config.DefaultOpsAddr))
	if err != nil {
		return "http://" + opsAddr + "/readyz" // fails as the service would, naming the address
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz"
}
