package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/prodapi/prodapi/config"
)

// tracing builds the tracer provider the OTEL_ settings ask for (see
// config.Tracing), or nil when tracing is off: then nothing traces and
// nothing costs. The console exporter writes each span to stdout, as a
// JSON line, the moment it ends; OTLP exports in batches.
func tracing(ctx context.Context, t config.Tracing, stdout io.Writer, version string) (*sdktrace.TracerProvider, error) {
	if !t.Enabled() {
		return nil, nil
	}
	var opts []sdktrace.TracerProviderOption
	for _, name := range t.Exporters {
		switch name {
		case "console":
			exp, err := stdouttrace.New(stdouttrace.WithWriter(stdout))
			if err != nil {
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=console: %w", err)
			}
			opts = append(opts, sdktrace.WithSyncer(exp))
		case "otlp":
			var eo []otlptracehttp.Option
			if u := t.TracesURL(); u != "" {
				eo = append(eo, otlptracehttp.WithEndpointURL(u))
			}
			exp, err := otlptracehttp.New(ctx, eo...)
			if err != nil {
				return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=otlp: %w", err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		}
	}
	res := resource.NewSchemaless(attribute.String("service.name", t.ServiceName), attribute.String("service.version", version))
	opts = append(opts, sdktrace.WithSampler(sampler(t.Sampler, t.SamplerRatio)), sdktrace.WithResource(res))
	return sdktrace.NewTracerProvider(opts...), nil
}

// sampler is the sampler named by OTEL_TRACES_SAMPLER (config checked
// the name).
func sampler(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}
