package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/prodapi/prodapi/config"
)

const usage = `prodapi serves Superdesk's production API (/prodapi/v1) as a read-through caching edge over the
newsroom's MongoDB and Elasticsearch, or over an embedded sandbox newsroom.

Usage:
  prodapi [run] [-addr host:port]       serve the API (the default command)
  prodapi token -scope SCOPE[,SCOPE...] [-ttl 1h] [-client-id ID]
                                        print a token signed with AUTH_SERVER_SHARED_SECRET
  prodapi healthcheck [-url http://127.0.0.1:5502/readyz]
                                        exit 0 when /readyz answers 200 within 2s
  prodapi check                         report what prodapi needs from the platform (versions, change
                                        streams, Redis, object storage, indexes); writes nothing
  prodapi config                        print the effective configuration, secrets redacted
  prodapi version                       print the version, revision and Go version (also --version)
  prodapi help                          print this help (also -h, --help)
`

// printHelp prints the usage and every setting with its default, from
// the configuration's own table.
func printHelp(w io.Writer) {
	io.WriteString(w, usage)
	fmt.Fprintf(w, "\nSettings, from the environment (durations: 10s, 5m, or a number of seconds):\n\n")
	defaults, _ := config.Load(func(string) string { return "" }) // nothing set: what Load defaults to
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, s := range config.Settings() {
		help := s.Help
		if s.PerResource {
			help += "; resources: " + strings.ToUpper(strings.Join(resourceNames(), ", "))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, orNone(s.Value(defaults)), help)
	}
	tw.Flush()
}

// printConfig implements `prodapi config`: every setting's effective
// value, the warnings the start would log, then the problems that would
// stop it.
func printConfig(e env) error {
	cfg, err := loadConfig(e)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	for _, s := range config.Settings() {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, orNone(s.Shown(cfg)))
	}
	tw.Flush()
	for _, w := range cfg.Warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	return nil
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}
