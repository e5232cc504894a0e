// Command ferretdb runs FerretDB, a MongoDB-wire server, for prodapi's
// tests: the embeddable github.com/FerretDB/FerretDB/ferretdb package
// with the pure-Go SQLite backend, its data in a directory of its own,
// listening on one loopback address.
//
// It prints one line when it accepts connections,
//
//	ferretdb: ready mongodb://127.0.0.1:PORT/ version v1.24.2
//
// and exits on SIGTERM or SIGINT. The version is the FerretDB module's,
// read from the binary's build information: the embeddable package
// reports "unknown" because the generated version.txt of FerretDB's own
// build is absent (its cmd/ferretdb panics on that; this does not).
//
// This is a module of its own so that FerretDB's ~47 dependencies never
// reach prodapi's go.mod or its production binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/FerretDB/FerretDB/build/version"
	"github.com/FerretDB/FerretDB/ferretdb"
)

const module = "github.com/FerretDB/FerretDB"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ferretdb:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ferretdb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "loopback `host:port` to listen on (port 0: any free port)")
	dir := fs.String("dir", "", "`directory` for the SQLite databases (required; it must exist)")
	level := fs.String("log", "warn", "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log: %w", err)
	}

	v, err := moduleVersion()
	if err != nil {
		return err
	}
	// buildInfo.ferretdbVersion answers with this: tests key the known
	// differences from MongoDB on it.
	version.Get().Version = v

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *addr},
		Logger:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})),
		Handler:   "sqlite",
		SQLiteURL: "file:" + *dir + "/",
	})
	if err != nil {
		return err
	}
	// New has bound the listener, so the address is known; connections
	// made before Run accepts them wait in the backlog.
	fmt.Fprintf(stdout, "ferretdb: ready %s version %s\n", f.MongoDBURI(), v)
	return f.Run(ctx)
}

// moduleVersion is the version of the FerretDB module linked in.
func moduleVersion() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information in the binary")
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s is not among the binary's dependencies", module)
}
