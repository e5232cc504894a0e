// Package charttest renders deploy/helm/prodapi with Helm's own engine and
// validates every manifest against the Kubernetes API types by strict
// decoding: an unknown or misspelt field, a wrong type or a duplicate key
// fails, as the API server would refuse it. The ServiceMonitor decodes
// into prometheus-operator's types. The environment the Deployment gives
// prodapi is checked with prodapi's own configuration loader. The chart's
// alerting rules, rendered at the default values, are
// deploy/monitoring/prometheus/rules.yaml (TestMonitoringShipped; -update
// writes the file).
//
// It is a module of its own so that Helm and the Kubernetes client
// libraries stay out of the service's go.mod; every schema comes from a Go
// module, nothing is downloaded at run time.
//
//	cd deploy/helm/test && go test ./...
package charttest
