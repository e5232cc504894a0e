package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// Targets the seed can load, in the order it loads them.
const (
	targetMongo   = "mongo"
	targetElastic = "elastic"
	targetS3      = "s3"
)

var allTargets = []string{targetMongo, targetElastic, targetS3}

// settings are the seed's flags and the platform settings it shares with
// prodapi.
type settings struct {
	wait    time.Duration // how long to wait for each server
	data    string        // "sample" or a newsroom directory
	targets []string      // subset of allTargets, in allTargets order
	cfg     config.Config
}

// parseOptions reads the flags and, through config.Load, the variables
// prodapi reads, with its defaults. The seed serves nothing, so it needs
// no AUTH_SERVER_SHARED_SECRET.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (settings, error) {
	fset := flag.NewFlagSet("prodapi-seed", flag.ContinueOnError)
	fset.SetOutput(stderr)
	wait := fset.Duration("wait", 120*time.Second, "how long to wait for each server to answer")
	data := fset.String("data", "sample", `the newsroom to load: "sample" (the bundled one) or a directory of <collection>.json and assets/`)
	targets := fset.String("targets", strings.Join(allTargets, ","), "what to load, comma-separated: "+strings.Join(allTargets, ","))
	if err := fset.Parse(args); err != nil {
		return settings{}, err
	}
	if fset.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected arguments %q", fset.Args())
	}
	o := settings{wait: *wait, data: *data}
	if o.wait <= 0 {
		return settings{}, errors.New("-wait must be positive")
	}
	if o.data == "" {
		return settings{}, errors.New("-data must name the sample or a directory")
	}
	want := map[string]bool{}
	for t := range strings.SplitSeq(*targets, ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		if !slices.Contains(allTargets, t) {
			return settings{}, fmt.Errorf("-targets: unknown target %q (known: %s)", t, strings.Join(allTargets, ", "))
		}
		want[t] = true
	}
	for _, t := range allTargets {
		if want[t] {
			o.targets = append(o.targets, t)
		}
	}
	if len(o.targets) == 0 {
		return settings{}, errors.New("-targets names nothing to load")
	}
	cfg, err := config.Load(func(k string) string {
		if k == "PRODAPI_AUTH_ENABLED" {
			return "false"
		}
		return getenv(k)
	})
	if err != nil {
		return settings{}, fmt.Errorf("configuration:\n%w", err)
	}
	o.cfg = cfg
	return o, nil
}

// newsroomFS returns the files of the newsroom to load.
func newsroomFS(data string) (fs.FS, error) {
	if data == "sample" {
		return sandbox.SampleFS(), nil
	}
	info, err := os.Stat(data)
	if err != nil {
		return nil, fmt.Errorf("-data: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("-data: %s is not a directory", data)
	}
	return os.DirFS(data), nil
}

// run seeds the platform; it logs JSON lines to stderr and returns the
// first failure.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	fsys, err := newsroomFS(o.data)
	if err != nil {
		return err
	}
	room, err := loadNewsroom(ctx, fsys)
	if err != nil {
		return err
	}
	logger.Info("newsroom loaded", "data", o.data, "documents", room.counts(), "assets", len(room.assets))
	start := time.Now()
	w := waiter{wait: o.wait, logger: logger}
	for _, t := range o.targets {
		var err error
		switch t {
		case targetMongo:
			err = seedMongo(ctx, o.cfg, room, w, logger)
		case targetElastic:
			err = seedElastic(ctx, o.cfg, room, w, logger)
		case targetS3:
			if !o.cfg.ObjStore.Enabled() {
				logger.Info("s3: OBJSTORE_CONTAINER_NAME is not set; skipping object storage")
				continue
			}
			err = seedS3(ctx, o.cfg, room, w, logger)
		}
		if err != nil {
			return err
		}
	}
	logger.Info("seeded", "targets", o.targets, "duration", time.Since(start).Round(time.Millisecond).String())
	return nil
}
