// Package monitoring holds prodapi's monitoring as code and its tests:
//
//	grafana/prodapi.json       the Grafana dashboard (datasource, cluster, namespace, job and instance variables)
//	prometheus/rules.yaml      the alerting rules; prometheus/rules_test.yaml their unit tests
//	runbooks/<alert>.md        what each alert means, how to confirm it, what to do
//
// The chart (deploy/helm/prodapi) ships the rules as a PrometheusRule, their
// thresholds and runbooks' base URL from its values: rules.yaml is the
// chart's rendering at the default values, which the chart's tests hold
// equal (and write with -update). It ships the dashboard as a ConfigMap for
// Grafana's sidecar, from a copy its tests keep identical to this one.
//
// It is a module of its own, for tests only, so that Prometheus (promtool and
// its PromQL parser) stays out of the service's go.mod. make monitoring-test
// runs promtool check rules and promtool test rules (promtool built from this
// module's tool directive, at the version go.mod pins) and this package's
// tests: every rule links an existing runbook, every alert has a unit test
// that fires and one that does not, every expression of the dashboard parses
// as PromQL and selects by the cluster, namespace, job and instance variables,
// no two of its panels overlap, and every metric the dashboard and the rules
// name is one a running prodapi exposes.
//
//	cd deploy/monitoring && go tool promtool test rules prometheus/rules_test.yaml && go test ./...
package monitoring
