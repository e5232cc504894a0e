package monitoring

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const (
	rulesFile     = "prometheus/rules.yaml"
	rulesTestFile = "prometheus/rules_test.yaml"
	dashboardFile = "grafana/prodapi.json"
	runbookURL    = "https://github.com/prodapi/prodapi/blob/main/deploy/monitoring/runbooks/"
)

var promql = parser.NewParser(parser.Options{})

func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errors.Join(errs...))
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
	return rules
}

// Every alert links its runbook in the repository, and every runbook
// says what the alert means, how to confirm it and what to do.
func TestRunbooks(t *testing.T) {
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		if got, want := r.Annotations["runbook_url"], runbookURL+r.Alert+".md"; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
			t.Errorf("%s: needs a summary, a description and a severity", r.Alert)
		}
		b, err := os.ReadFile(filepath.Join("runbooks", r.Alert+".md"))
		if err != nil {
			t.Errorf("%s: %v", r.Alert, err)
			continue
		}
		for _, section := range []string{"# " + r.Alert + "\n", "\n## What it means\n", "\n## How to confirm\n", "\n## What to do\n"} {
			if !strings.Contains(string(b), section) {
				t.Errorf("runbooks/%s.md lacks %q", r.Alert, strings.TrimSpace(section))
			}
		}
	}
	runbooks, err := filepath.Glob("runbooks/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range runbooks {
		if name := strings.TrimSuffix(filepath.Base(p), ".md"); !alerts[name] {
			t.Errorf("%s is the runbook of no alert", p)
		}
	}
}

// ruleTests is the part of promtool's test file this test reads.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			Alert     string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// Every alert has a unit test where it fires and one where it does not
// (promtool test rules runs them).
func TestEveryAlertUnitTested(t *testing.T) {
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rt.RuleFiles, []string{filepath.Base(rulesFile)}) {
		t.Errorf("%s tests %v, want [%s]", rulesTestFile, rt.RuleFiles, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alert] = true
			} else {
				quiet[c.Alert] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if !fires[r.Alert] {
			t.Errorf("%s: no test where it fires", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no test where it does not fire", r.Alert)
		}
	}
}

// dashboard is the part of the Grafana dashboard model this test reads.
type dashboard struct {
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string      `json:"name"`
			Type       string      `json:"type"`
			Query      any         `json:"query"`
			AllValue   string      `json:"allValue"`
			Datasource *datasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    gridPos
	Targets    []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// gridPos is a panel's place: columns x to x+w of the 24, rows y to y+h.
type gridPos struct{ H, W, X, Y int }

// overlaps reports whether two places share a cell.
func (g gridPos) overlaps(o gridPos) bool {
	return g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// Grafana's variables, replaced by values of the same kind before
// parsing: PromQL does not know them.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$cluster", ".*", "$namespace", ".*", "$job", "prodapi", "$instance", ".+")

// grafanaRanges replaces only the range variables, leaving the label ones
// in the regular expressions where they stand.
var grafanaRanges = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// dashboardFilters are the dashboard's label variables, in their order: every
// series a panel reads is selected by each, so that clusters, namespaces
// (staging beside production), jobs and replicas do not mix.
var dashboardFilters = []string{"cluster", "namespace", "job", "instance"}

// metricsOf returns the metric names expr selects, or the parse error.
func metricsOf(expr string) ([]string, error) {
	e, err := promql.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				err = fmt.Errorf("%s selects by labels alone", vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, err
}

// The dashboard's datasource is a variable, every panel uses it, every
// expression parses as PromQL, and no two panels overlap.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.SchemaVersion < 39 {
		t.Errorf("uid %q, schemaVersion %d: want a uid and a current Grafana's schema (39 or later)", d.UID, d.SchemaVersion)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && v.Query == "prometheus" {
			dsVar = true
		}
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s does not query the datasource variable", v.Name)
		}
	}
	if !dsVar {
		t.Fatal("no datasource variable of type prometheus")
	}
	ids := map[int]bool{}
	var exprs int
	for _, p := range allPanels(d.Panels) {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the variable ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query on datasource %+v", p.Title, tg.Datasource)
			}
			if _, err := metricsOf(tg.Expr); err != nil {
				t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
			}
		}
	}
	if exprs == 0 {
		t.Fatal("no expressions in the dashboard")
	}
	// Two panels on the same cells cannot both be shown where the file
	// puts them. (A collapsed row's panels are placed when it opens, and
	// are not compared.)
	for i, a := range d.Panels {
		for _, b := range d.Panels[i+1:] {
			if a.GridPos.overlaps(b.GridPos) {
				t.Errorf("panels %q %+v and %q %+v overlap", a.Title, a.GridPos, b.Title, b.GridPos)
			}
		}
	}
}

// Every series a panel reads is selected by the cluster, namespace, job
// and instance variables, which are chosen in that order, each from the
// series of the ones before; cluster and namespace match a series without
// the label too (a Prometheus that adds no cluster label).
func TestDashboardFiltersByVariables(t *testing.T) {
	d := loadDashboard(t)
	var names []string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		names = append(names, v.Name)
		q, _ := v.Query.(map[string]any)
		query := fmt.Sprint(q["query"])
		for _, before := range dashboardFilters[:max(slices.Index(dashboardFilters, v.Name), 0)] {
			if !strings.Contains(query, before+`=~"$`+before+`"`) {
				t.Errorf("variable %s: %q does not follow %s", v.Name, query, before)
			}
		}
		if (v.Name == "cluster" || v.Name == "namespace") && v.AllValue != ".*" {
			t.Errorf("variable %s: allValue %q, want .* (a series without the label matches)", v.Name, v.AllValue)
		}
	}
	if !slices.Equal(names, dashboardFilters) {
		t.Errorf("query variables %v, want %v", names, dashboardFilters)
	}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			e, err := promql.ParseExpr(grafanaRanges.Replace(tg.Expr))
			if err != nil {
				t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
				continue
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				for _, label := range dashboardFilters {
					if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
						return m.Name == label && m.Type == labels.MatchRegexp && m.Value == "$"+label
					}) {
						t.Errorf("panel %q: %s is not selected by %s=~\"$%[3]s\"", p.Title, vs, label)
					}
				}
				return nil
			})
		}
	}
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// namedMetrics returns every metric the dashboard and the rules select,
// with where each is read.
func namedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	named := map[string][]string{}
	add := func(where, expr string) {
		names, err := metricsOf(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
		}
		for _, n := range names {
			named[n] = append(named[n], where)
		}
	}
	for _, p := range allPanels(loadDashboard(t).Panels) {
		for _, tg := range p.Targets {
			add("panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range loadDashboard(t).Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			// label_values(<selector>, label)
			if m := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`).FindStringSubmatch(fmt.Sprint(q["query"])); m != nil {
				add("variable "+v.Name, m[1])
			}
		}
	}
	for _, r := range loadRules(t) {
		add("rule "+r.Alert, r.Expr)
	}
	return named
}

// Every metric the dashboard and the rules read is one prodapi exposes
// from the start (Prometheus's own up aside): a series that appeared
// only after its first event would leave a panel or an alert with no
// data.
func TestNamedMetricsExist(t *testing.T) {
	exposed := exposedNames(t)
	for name, where := range namedMetrics(t) {
		if name != "up" && !exposed[name] {
			t.Errorf("%s, read by %s, is not a metric prodapi exposes", name, strings.Join(slices.Compact(where), ", "))
		}
	}
}

// exposedNames builds prodapi, starts it against a MongoDB and an
// Elasticsearch that do not answer (so the backend, change-feed and error
// series are made), with the admin listener, makes a few requests and a
// purge, and returns the sample names of its /metrics, which its operator
// listener serves.
func exposedNames(t *testing.T) map[string]bool {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "prodapi")
	build := exec.Command("go", "build", "-o", bin, "./cmd/prodapi")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building prodapi: %v\n%s", err, out)
	}
	closed := closedPort(t)
	const adminSecret = "a-monitoring-test-admin-secret-of-32-bytes"
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(),
		"MONGO_URI=mongodb://"+closed+"/superdesk",
		"ELASTICSEARCH_URL=http://"+closed,
		"PRODAPI_AUTH_ENABLED=false",
		"PRODAPI_ADMIN_ADDR=127.0.0.1:0",
		"PRODAPI_ADMIN_SECRET="+adminSecret,
		"PRODAPI_OPS_ADDR=127.0.0.1:0",
		"PRODAPI_BACKEND_TIMEOUT=2s",
	)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	api, admin, ops := listenAddrs(t, stderr)

	client := &http.Client{Timeout: time.Minute}
	for _, url := range []string{"http://" + api + "/prodapi/v1/items", "http://" + api + "/prodapi/v1/desks",
		"http://" + api + "/prodapi/v1/desks/5d76113ab3af37dea3a2eb9e", "http://" + ops + "/readyz"} {
		res, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	req, _ := http.NewRequest("POST", "http://"+admin+"/purge?resource=items", nil)
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	if res, err := client.Do(req); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
	}

	res, err := client.Get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !names["prodapi_build_info"] {
		t.Fatalf("/metrics of prodapi has no prodapi_build_info: %v", names)
	}
	return names
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// listenAddrs reads prodapi's JSON log until it has named all three of its
// listeners, then drains the rest in the background.
func listenAddrs(t *testing.T, stderr io.Reader) (api, admin, ops string) {
	t.Helper()
	type line struct{ Msg, Addr string }
	found := make(chan [3]string, 1)
	go func() { // ends when prodapi exits and its stderr closes
		var a [3]string
		sent := false
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch l.Msg {
			case "admin listener":
				a[1] = l.Addr
			case "operator listener":
				a[2] = l.Addr
			case "listening":
				a[0] = l.Addr
			}
			if a[0] != "" && a[1] != "" && a[2] != "" && !sent {
				found <- a
				sent = true
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	select {
	case a := <-found:
		return a[0], a[1], a[2]
	case <-ctx.Done():
		t.Fatal("prodapi did not log its listeners within 5 minutes")
	}
	return "", "", ""
}
