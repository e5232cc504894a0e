package charttest

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)

var update = flag.Bool("update", false, "write deploy/monitoring/prometheus/rules.yaml: the chart's rules at the default values")

const (
	rulesFile       = "../../monitoring/prometheus/rules.yaml"
	dashboardFile   = "../../monitoring/grafana/prodapi.json"
	defaultRunbooks = "https://github.com/prodapi/prodapi/blob/main/deploy/monitoring/runbooks/"
)

// renderedRules renders the chart's PrometheusRule with values and returns
// its spec as the text of a rules file.
func renderedRules(t *testing.T, values map[string]any) string {
	t.Helper()
	rule, _ := values["prometheusRule"].(map[string]any)
	v := merged(values, map[string]any{"prometheusRule": merged(rule, map[string]any{"enabled": true})})
	m, err := render(t, chartDir, v)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	text := m["prodapi/templates/prometheusrule.yaml"]
	_, spec, ok := strings.Cut(text, "\nspec:\n")
	if !ok {
		t.Fatalf("the PrometheusRule has no spec:\n%s", text)
	}
	lines := strings.Split(strings.TrimRight(spec, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// splitComment splits a YAML file into its leading comment lines and the
// rest.
func splitComment(s string) (comment, rest string) {
	rest = s
	for strings.HasPrefix(rest, "#") {
		_, after, ok := strings.Cut(rest, "\n")
		if !ok {
			return s, ""
		}
		rest = after
	}
	return s[:len(s)-len(rest)], rest
}

// firstDifference names the first line where a and b differ.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d of the rules: %q, rendered %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines, rendered %d", len(al), len(bl))
}

// The thresholds and the runbooks' base URL are values.
func TestRulesFromValues(t *testing.T) {
	objs := renderAndDecode(t, with(map[string]any{"prometheusRule": map[string]any{
		"enabled":        true,
		"runbookBaseURL": "https://runbooks.news.example/prodapi",
		"thresholds": map[string]any{
			"errorPercent": 2, "latencySeconds": 2.5, "backendErrorPercent": 10, "redisErrorsPerSecond": 0.5,
			"changeFeedLagSeconds": 120, "rateLimitedPerSecond": 5, "clientCapRefusalsPerSecond": 0.2,
			"changeLogUnavailableMinutes": 15, "changeLogAppendErrorsPerSecond": 0.5, "changeLogApplyErrorsPerSecond": 0.25,
		},
	}}))
	rules := map[string]monitoringv1.Rule{}
	for _, g := range one[*monitoringv1.PrometheusRule](t, objs).Spec.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r
			if want := "https://runbooks.news.example/prodapi/" + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	}
	for _, tc := range []struct{ alert, exprEnd, summary string }{
		{"ProdapiHighErrorRatio", "> 0.02", "More than 2% "},
		{"ProdapiHighLatency", "> 2.5", "above 2.5 s"},
		{"ProdapiBackendErrors", "> 0.1", "More than 10% "},
		{"ProdapiRedisErrors", "> 0.5", ""},
		{"ProdapiChangeFeedLag", "> 120", ""},
		{"ProdapiClientRateLimited", "> 5", ""},
		{"ProdapiClientCapHit", "> 0.2", ""},
		{"ProdapiChangeLogAppendErrors", "> 0.5", ""},
		{"ProdapiChangeLogApplyErrors", "> 0.25", ""},
	} {
		r, ok := rules[tc.alert]
		if !ok {
			t.Errorf("no %s", tc.alert)
			continue
		}
		if expr := strings.TrimSpace(r.Expr.String()); !strings.HasSuffix(expr, tc.exprEnd) {
			t.Errorf("%s: expr %q, want it to end %q", tc.alert, expr, tc.exprEnd)
		}
		if !strings.Contains(r.Annotations["summary"], tc.summary) {
			t.Errorf("%s: summary %q, want %q in it", tc.alert, r.Annotations["summary"], tc.summary)
		}
	}
	// A replica that does not follow the log fires after the minutes asked.
	if r := rules["ProdapiChangeLogUnavailable"]; r.For == nil || *r.For != "15m" || !strings.Contains(r.Annotations["description"], "for 15 minutes") {
		t.Errorf("ProdapiChangeLogUnavailable: for %v, description %q: want 15m", r.For, r.Annotations["description"])
	}
	// Prometheus's own templates reach Prometheus as written.
	if d := rules["ProdapiTargetDown"].Annotations["description"]; !strings.HasPrefix(d, "{{ $labels.instance }} ") {
		t.Errorf("ProdapiTargetDown: description %q", d)
	}
}
