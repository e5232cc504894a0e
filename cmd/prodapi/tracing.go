package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracing builds the tracer provider the standard OTEL_ variables ask
// for. Tracing is off (nil provider: no spans, no cost) unless
// OTEL_TRACES_EXPORTER names an exporter, or an OTLP endpoint is set:
//
//	OTEL_TRACES_EXPORTER        otlp, console (stdout), none; a comma-separated list
//	OTEL_EXPORTER_OTLP_ENDPOINT  or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (http/protobuf)
//	OTEL_EXPORTER_OTLP_PROTOCOL  http/protobuf (the only one supported)
//	OTEL_SERVICE_NAME           default prodapi
//	OTEL_TRACES_SAMPLER         always_on, always_off, traceidratio, parentbased_always_on (default),
//	                            parentbased_always_off, parentbased_traceidratio
//	OTEL_TRACES_SAMPLER_ARG     the ratio of the traceidratio samplers (default 1)
//	OTEL_SDK_DISABLED           true: off
//
// The console exporter writes each span to stdout as it ends.
func tracing(ctx context.Context, getenv func(string) string, stdout io.Writer, version string) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	traces := endpoint != ""
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	names := getenv("OTEL_TRACES_EXPORTER")
	if names == "" && (traces || endpoint != "") {
		names = "otlp"
	}
	var opts []sdktrace.TracerProviderOption
	for name := range strings.SplitSeq(names, ",") {
		switch name = strings.TrimSpace(name); name {
		case "", "none":
		case "console":
			exp, err := stdouttrace.New(stdouttrace.WithWriter(stdout))
			if err != nil {
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=console: %w", err)
			}
			// Synchronous: a span shows the moment it ends.
			opts = append(opts, sdktrace.WithSyncer(exp))
		case "otlp":
			proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
			if proto == "" {
				proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
			}
			if proto != "" && proto != "http/protobuf" {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: only http/protobuf is supported", proto)
			}
			var eo []otlptracehttp.Option
			if endpoint != "" {
				if traces {
					eo = append(eo, otlptracehttp.WithEndpointURL(endpoint))
				} else {
					// The generic endpoint is a base URL: traces go to /v1/traces under it.
					eo = append(eo, otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/")+"/v1/traces"))
				}
			}
			exp, err := otlptracehttp.New(ctx, eo...)
			if err != nil {
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: %w", err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: unknown exporter %q (otlp, console or none)", name)
		}
	}
	if len(opts) == 0 {
		return nil, nil
	}
	sampler, err := sampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	service := getenv("OTEL_SERVICE_NAME")
	if service == "" {
		service = "prodapi"
	}
	res := resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.version", version))
	opts = append(opts, sdktrace.WithSampler(sampler), sdktrace.WithResource(res))
	return sdktrace.NewTracerProvider(opts...), nil
}

func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, errors.New("OTEL_TRACES_SAMPLER=" + name + ": unknown sampler (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)")
}
