// Command prodapi serves Superdesk's production API (/prodapi/v1) as a
// read-through caching edge over the newsroom's MongoDB and
// Elasticsearch, or over an embedded sandbox newsroom.
//
// Usage:
//
//	prodapi [serve] [-addr host:port]   serve the API (the default)
//	prodapi token -scope ARCHIVE_READ,DESKS_READ [-ttl 1h] [-client-id id]
//	                                    print a token signed with AUTH_SERVER_SHARED_SECRET
//	prodapi healthcheck [-url http://127.0.0.1:$PORT/readyz]
//	                                    exit 0 when the service is ready (for container health checks)
//
// Configuration comes from environment variables; see the README.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, env{args: os.Args[1:], getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "prodapi:", err)
		os.Exit(1)
	}
}
