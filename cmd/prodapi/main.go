// Command prodapi serves Superdesk's production API (/prodapi/v1) as a
// read-through caching edge over the newsroom's MongoDB and
// Elasticsearch, or over an embedded sandbox newsroom.
//
// Usage:
//
//	prodapi [run] [-addr host:port]     serve the API (the default)
//	prodapi token -scope ARCHIVE_READ,DESKS_READ [-ttl 1h] [-client-id id]
//	                                    print a token signed with AUTH_SERVER_SHARED_SECRET
//	prodapi healthcheck [-url http://127.0.0.1:5502/readyz]
//	                                    exit 0 when the service is ready (for container health checks)
//	prodapi check                       report what prodapi needs from the platform; writes nothing
//	prodapi config                      print the effective configuration, secrets redacted
//	prodapi version                     print the version, revision and Go version (also --version)
//	prodapi help                        list the commands and every setting with its default
//
// Configuration comes from environment variables: `prodapi help` lists
// them; an unknown PRODAPI_ variable stops the start.
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
	if err := run(ctx, env{args: os.Args[1:], getenv: os.Getenv, environ: os.Environ(), stdout: os.Stdout, stderr: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "prodapi:", err)
		os.Exit(1)
	}
}
