package config

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Tracing configures OpenTelemetry traces from the standard OTEL_
// variables. Tracing is off unless an exporter is named, or an OTLP
// endpoint is set (which means otlp).
type Tracing struct {
	Disabled  bool     // OTEL_SDK_DISABLED
	Exporters []string // OTEL_TRACES_EXPORTER: otlp, console; empty: off
	// OTLPEndpoint is the base URL traces go to, under /v1/traces
	// (OTEL_EXPORTER_OTLP_ENDPOINT); OTLPTracesEndpoint, when set, is the
	// whole URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). Both empty: the
	// exporter's default, http://localhost:4318/v1/traces.
	OTLPEndpoint, OTLPTracesEndpoint string
	Protocol                         string  // OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: http/protobuf only
	ServiceName                      string  // OTEL_SERVICE_NAME
	Sampler                          string  // OTEL_TRACES_SAMPLER
	SamplerRatio                     float64 // OTEL_TRACES_SAMPLER_ARG, for the traceidratio samplers
}

// Enabled reports whether traces are recorded and exported.
func (t Tracing) Enabled() bool { return !t.Disabled && len(t.Exporters) > 0 }

// TracesURL is the URL the OTLP exporter posts to; empty: its default.
func (t Tracing) TracesURL() string {
	if t.OTLPTracesEndpoint != "" {
		return t.OTLPTracesEndpoint
	}
	if t.OTLPEndpoint != "" {
		return strings.TrimRight(t.OTLPEndpoint, "/") + "/v1/traces"
	}
	return ""
}

// Samplers are the values of OTEL_TRACES_SAMPLER.
var Samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

func (p *parser) tracing() Tracing {
	t := Tracing{
		Disabled:           p.bool("OTEL_SDK_DISABLED", false),
		OTLPEndpoint:       p.getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
		OTLPTracesEndpoint: p.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
		Protocol:           cmp.Or(p.getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), p.getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf"),
		ServiceName:        cmp.Or(p.getenv("OTEL_SERVICE_NAME"), "prodapi"),
		Sampler:            cmp.Or(p.getenv("OTEL_TRACES_SAMPLER"), "parentbased_always_on"),
		SamplerRatio:       1,
	}
	names := p.getenv("OTEL_TRACES_EXPORTER")
	if names == "" && (t.OTLPEndpoint != "" || t.OTLPTracesEndpoint != "") {
		names = "otlp"
	}
	for name := range strings.SplitSeq(names, ",") {
		switch name = strings.TrimSpace(name); name {
		case "", "none":
		case "otlp", "console":
			if !slices.Contains(t.Exporters, name) {
				t.Exporters = append(t.Exporters, name)
			}
		default:
			reason := fmt.Sprintf("unknown exporter %q (otlp, console or none)", name)
			p.errorf("OTEL_TRACES_EXPORTER: %s", reason)
			p.mark("OTEL_TRACES_EXPORTER", names, reason)
		}
	}
	if t.Protocol != "http/protobuf" {
		p.errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf is supported", t.Protocol)
		name := "OTEL_EXPORTER_OTLP_PROTOCOL"
		if p.getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") != "" {
			name = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
		}
		p.mark(name, t.Protocol, "only http/protobuf is supported")
	}
	for _, e := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", t.OTLPEndpoint}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", t.OTLPTracesEndpoint},
	} {
		if u, err := url.Parse(e.value); e.value != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			p.invalidURL(e.name, e.value, "must be an http(s) URL")
		}
	}
	if !slices.Contains(Samplers, t.Sampler) {
		reason := fmt.Sprintf("unknown sampler (%s)", strings.Join(Samplers, ", "))
		p.errorf("OTEL_TRACES_SAMPLER: unknown sampler %q (%s)", t.Sampler, strings.Join(Samplers, ", "))
		p.mark("OTEL_TRACES_SAMPLER", t.Sampler, reason)
	}
	if arg := p.getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			p.errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
			p.mark("OTEL_TRACES_SAMPLER_ARG", arg, "want a ratio from 0 to 1")
		} else {
			t.SamplerRatio = r
		}
	}
	return t
}
