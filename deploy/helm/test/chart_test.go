package charttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/prodapi/prodapi/config"
)

const chartDir = "../prodapi"

// A valid secret, the required public URL and the backends' URLs, for the
// renders that do not test them.
var withSecret = map[string]any{
	"auth":          map[string]any{"sharedSecret": "a-chart-test-secret-of-32-bytes-or-more"},
	"publicURL":     publicURL,
	"mongo":         map[string]any{"uri": mongoURI},
	"elasticsearch": map[string]any{"url": elasticURL},
}

const (
	mongoURI   = "mongodb://mongo:27017/superdesk"
	elasticURL = "http://elasticsearch:9200"
)

const publicURL = "https://news.example"

// with returns withSecret's values with extra's on top.
func with(extra map[string]any) map[string]any {
	return merged(withSecret, extra)
}

// merged returns a's keys with b's over them, at the top level.
func merged(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, x := range a {
		out[k] = x
	}
	for k, x := range b {
		out[k] = x
	}
	return out
}

// strict decodes YAML or JSON into the registered Kubernetes,
// prometheus-operator and Gateway API types, refusing unknown and
// duplicate fields.
var strict = func() runtime.Decoder {
	s := runtime.NewScheme()
	if err := clientscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := gatewayv1.Install(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// kubeVersion is the Kubernetes version the tests render for unless they
// name another, as make chart-test's helm template does.
const kubeVersion = "v1.30.0"

// render renders the chart at dir with values over its defaults, as `helm
// template --kube-version 1.30.0` does (values schema included), and
// returns the manifests by template path.
func render(t *testing.T, dir string, values map[string]any) (map[string]string, error) {
	t.Helper()
	out, err := renderAll(t, dir, values, kubeVersion)
	if err != nil {
		return nil, err
	}
	for name := range out {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(out[name]) == "" {
			delete(out, name)
		}
	}
	return out, nil
}

// renderAll renders the chart at dir for Kubernetes kube, NOTES.txt
// included.
func renderAll(t *testing.T, dir string, values map[string]any, kube string) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	kv, err := chartutil.ParseKubeVersion(kube)
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "prodapi", Namespace: "news", IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}

// notes renders the chart's NOTES.txt.
func notes(t *testing.T, values map[string]any) string {
	t.Helper()
	out, err := renderAll(t, chartDir, values, kubeVersion)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out["prodapi/templates/NOTES.txt"]
}

// decode validates every manifest and returns the objects.
func decode(manifests map[string]string) ([]runtime.Object, error) {
	var objs []runtime.Object
	var errs []error
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range manifests {
			if !yield(k) {
				return
			}
		}
	}) {
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests[name])))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, err)
				break
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := strict.Decode(doc, nil, nil)
			if err != nil {
				errs = append(errs, errors.New(name+": "+err.Error()))
				continue
			}
			objs = append(objs, obj)
		}
	}
	return objs, errors.Join(errs...)
}

func renderAndDecode(t *testing.T, values map[string]any) []runtime.Object {
	t.Helper()
	m, err := render(t, chartDir, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs, err := decode(m)
	if err != nil {
		t.Fatalf("invalid manifests: %v", err)
	}
	return objs
}

func find[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func one[T runtime.Object](t *testing.T, objs []runtime.Object) T {
	t.Helper()
	found := find[T](objs)
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T, want 1", len(found), zero)
	}
	return found[0]
}

func TestDefaults(t *testing.T) {
	objs := renderAndDecode(t, withSecret)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	slices.Sort(kinds)
	// No Redis by default: one replica, no HPA (TestRedisAndReplicas).
	if want := []string{"Deployment", "NetworkPolicy", "PodDisruptionBudget", "Secret", "Service", "Service", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}

	d := one[*appsv1.Deployment](t, objs)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	// The probes ask the operator listener (PRODAPI_OPS_ADDR, :5502 by
	// default), not the API's port.
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := "/healthz"
		if name == "readiness" {
			want = "/readyz"
		}
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port.String() != "ops" {
			t.Errorf("%s probe %+v, want %s on port ops", name, p, want)
		}
	}
	if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 5500 || c.Ports[1].Name != "ops" || c.Ports[1].ContainerPort != 5502 {
		t.Errorf("ports %+v, want http 5500 and ops 5502", c.Ports)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v", psc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the service account token is mounted: prodapi never calls the Kubernetes API")
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Error("service links on: every Service of the namespace becomes variables in prodapi's environment")
	}
	if got := envVar(t, c, "PRODAPI_URL").Value; got != publicURL {
		t.Errorf("PRODAPI_URL = %q, want publicURL %q", got, publicURL)
	}
	if hasEnv(c, "PRODAPI_TOKEN_URL") {
		t.Error("PRODAPI_TOKEN_URL written while auth.tokenURL is unset")
	}
	// 90% of the 512Mi limit.
	if got := envVar(t, c, "GOMEMLIMIT").Value; got != "483183820" {
		t.Errorf("GOMEMLIMIT = %q, want 483183820 (90%% of 512Mi)", got)
	}
	// The NetworkPolicy lets anyone reach the API's port and the
	// operator port, and nothing else; what goes out is not restricted.
	np := one[*networkingv1.NetworkPolicy](t, objs)
	if !selects(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) ||
		len(np.Spec.Ingress) != 2 {
		t.Errorf("network policy %+v", np.Spec)
	}
	for i, port := range []string{"http", "ops"} {
		if r := np.Spec.Ingress[i]; len(r.From) != 0 || len(r.Ports) != 1 || r.Ports[0].Port.String() != port {
			t.Errorf("network policy rule %d %+v, want port %s from anywhere", i, r, port)
		}
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v without Redis, want 1", d.Spec.Replicas)
	}

	// The secret comes from the Secret the chart made.
	secret := one[*corev1.Secret](t, objs)
	ref := envVar(t, c, "AUTH_SERVER_SHARED_SECRET").ValueFrom
	if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != secret.Name {
		t.Fatalf("AUTH_SERVER_SHARED_SECRET from %+v, secret %s", ref, secret.Name)
	}
	if got := string(secret.Data[ref.SecretKeyRef.Key]); got != "a-chart-test-secret-of-32-bytes-or-more" {
		t.Errorf("the Secret holds %q", got)
	}

	// The Services and the PDB select the Deployment's pods.
	svc := apiService(t, objs)
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service %+v", svc.Spec)
	}
	ops := opsService(t, objs)
	if !selects(ops.Spec.Selector, d.Spec.Template.Labels) || ops.Spec.Type != corev1.ServiceTypeClusterIP || len(ops.Spec.Ports) != 1 || ops.Spec.Ports[0].TargetPort.String() != "ops" {
		t.Errorf("ops service %+v", ops.Spec)
	}
	pdb := one[*policyv1.PodDisruptionBudget](t, objs)
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("pdb %+v", pdb.Spec)
	}
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	// Kubernetes waits for prodapi to drain before it kills it
	// (TestGracefulRollout has the rest).
	if grace := envVar(t, c, "PRODAPI_SHUTDOWN_GRACE").Value; pod.TerminationGracePeriodSeconds == nil || grace != "10s" || *pod.TerminationGracePeriodSeconds <= 10 {
		t.Errorf("PRODAPI_SHUTDOWN_GRACE %s, terminationGracePeriodSeconds %v", grace, pod.TerminationGracePeriodSeconds)
	}
	for name, want := range map[string]string{"MONGO_URI": mongoURI, "ELASTICSEARCH_URL": elasticURL, "GOGC": "400"} {
		if got := envVar(t, c, name).Value; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	loadsInProdapi(t, c, secret)
}

func TestValuesBecomeSettings(t *testing.T) {
	objs := renderAndDecode(t, map[string]any{
		"auth": map[string]any{"existingSecret": "superdesk-auth", "existingSecretKey": "secret", "audience": "prodapi",
			"tokenURL": "https://superdesk.example/api/auth_server/token"},
		"publicURL":     "https://news.example",
		"mongo":         map[string]any{"uri": "mongodb://mongo-0.mongo:27017,mongo-1.mongo:27017/superdesk?replicaSet=rs0"},
		"elasticsearch": map[string]any{"url": "http://es:9200", "index": "sd"},
		"redis":         map[string]any{"url": "redis+cluster://redis-0.redis:6379,redis-1.redis:6379"},
		"cache": map[string]any{"ttl": "30s", "stale": "5m", "assetTTL": "5m",
			"resourceTTL": map[string]any{"items": "3s", "events_history": "1m"}},
		"objstore":            map[string]any{"container": "media", "region": "eu-west-1"},
		"env":                 map[string]any{"PRODAPI_BACKEND_TIMEOUT": "3s", "DEBUG": true},
		"envFrom":             []any{map[string]any{"secretRef": map[string]any{"name": "prodapi-backends"}}},
		"autoscaling":         map[string]any{"enabled": false},
		"replicaCount":        3,
		"preStopSleepSeconds": 5,

		"readyRequiresBackends": true,
	})
	if len(find[*corev1.Secret](objs)) != 0 {
		t.Error("a Secret was created beside the existing one")
	}
	if len(find[*autoscalingv2.HorizontalPodAutoscaler](objs)) != 0 {
		t.Error("an HPA while autoscaling is off")
	}
	d := one[*appsv1.Deployment](t, objs)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if ref := envVar(t, c, "AUTH_SERVER_SHARED_SECRET").ValueFrom.SecretKeyRef; ref.Name != "superdesk-auth" || ref.Key != "secret" {
		t.Errorf("secret from %+v", ref)
	}
	for name, want := range map[string]string{
		"REDIS_URL": "redis+cluster://redis-0.redis:6379,redis-1.redis:6379", "PRODAPI_URL": "https://news.example",
		"PRODAPI_CACHE_TTL_ITEMS": "3s", "PRODAPI_CACHE_TTL_EVENTS_HISTORY": "1m", "PRODAPI_CACHE_TTL": "30s",
		"PRODAPI_CACHE_STALE": "5m", "PRODAPI_CACHE_TTL_ASSETS": "5m", "ELASTICSEARCH_INDEX": "sd", "PRODAPI_AUDIENCE": "prodapi",
		"OBJSTORE_CONTAINER_NAME": "media", "PRODAPI_BACKEND_TIMEOUT": "3s", "DEBUG": "true",
		"PRODAPI_READY_REQUIRES_BACKENDS": "true", "PRODAPI_TOKEN_URL": "https://superdesk.example/api/auth_server/token",
	} {
		if got := envVar(t, c, name).Value; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "prodapi-backends" {
		t.Errorf("envFrom %+v", c.EnvFrom)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 5 {
		t.Errorf("preStop %+v", c.Lifecycle)
	}
	loadsInProdapi(t, c, &corev1.Secret{Data: map[string][]byte{"secret": []byte("a-chart-test-secret-of-32-bytes-or-more")}})
}

func TestServiceMonitor(t *testing.T) {
	objs := renderAndDecode(t, with(map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}},
		"admin": map[string]any{"enabled": true, "secret": "an-admin-secret-of-32-bytes-at-least"}}))
	sm := one[*monitoringv1.ServiceMonitor](t, objs)
	// /metrics is on the operator listener's Service.
	svc := opsService(t, objs)
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name ||
		sm.Spec.Endpoints[0].Port != "ops" || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Labels["release"] != "kube-prometheus" {
		t.Errorf("service monitor %+v (service labels %v)", sm, svc.Labels)
	}
	// The job is "prodapi" (the alerting rules read job="prodapi"), and
	// neither the API's Service nor the admin one is scraped.
	if sm.Spec.JobLabel != "app.kubernetes.io/name" || svc.Labels[sm.Spec.JobLabel] != "prodapi" {
		t.Errorf("jobLabel %q: the job would be %q, want prodapi", sm.Spec.JobLabel, svc.Labels[sm.Spec.JobLabel])
	}
	for _, s := range find[*corev1.Service](objs) {
		if s.Name != svc.Name && matchesSelector(t, sm.Spec.Selector, s.Labels) {
			t.Errorf("the ServiceMonitor selects Service %s too", s.Name)
		}
	}
}

// A refusal is values the chart must not render, and words its error
// must hold.
type refusal struct {
	name   string
	values map[string]any
	want   string
}

// checkRefusals renders each case and wants it refused, in its words.
func checkRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		if _, err := render(t, chartDir, tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q in it", tc.name, err, tc.want)
		}
	}
}

// The chart refuses what cannot work rather than rendering it.
func TestRefusals(t *testing.T) {
	checkRefusals(t, []refusal{
		{"no secret", map[string]any{"publicURL": publicURL, "mongo": withSecret["mongo"], "elasticsearch": withSecret["elasticsearch"]}, "set auth.existingSecret"},
		{"no public URL", map[string]any{"auth": withSecret["auth"], "mongo": withSecret["mongo"], "elasticsearch": withSecret["elasticsearch"]}, "publicURL is required"},
		{"drain longer than the grace period", with(map[string]any{"shutdownGraceSeconds": 30}),
			"terminationGracePeriodSeconds (30) must exceed preStopSleepSeconds + shutdownDelaySeconds + shutdownGraceSeconds (5 + 5 + 30 = 40)"},
		{"a misspelt value", with(map[string]any{"replicaCont": 3}), "replicaCont"},
		{"a misspelt nested value", with(map[string]any{"redis": map[string]any{"uri": "redis://r:6379"}}), "uri"},
		{"a token URL that is no URL", with(map[string]any{"auth": map[string]any{"sharedSecret": "a-chart-test-secret-of-32-bytes-or-more",
			"tokenURL": "superdesk.example/api/auth_server/token"}}), "tokenURL"},
		{"admin without a secret", with(map[string]any{"admin": map[string]any{"enabled": true}}), "set admin.existingSecret"},
		{"an Ingress without hosts", with(map[string]any{"ingress": map[string]any{"enabled": true}}), "ingress.hosts"},
		{"an HTTPRoute without a Gateway", with(map[string]any{"httpRoute": map[string]any{"enabled": true}}), "httpRoute.parentRefs"},
		{"a memory limit GOMEMLIMIT cannot read", with(map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "512MB"}}}), "goMemLimitPercent"},
	})
	// With auth off, no secret is needed, and prodapi is told.
	objs := renderAndDecode(t, with(map[string]any{"auth": map[string]any{"enabled": false}}))
	c := one[*appsv1.Deployment](t, objs).Spec.Template.Spec.Containers[0]
	if envVar(t, c, "PRODAPI_AUTH_ENABLED").Value != "false" {
		t.Error("auth off, PRODAPI_AUTH_ENABLED not false")
	}
	for _, e := range c.Env {
		if e.Name == "AUTH_SERVER_SHARED_SECRET" {
			t.Error("auth off, a secret reference remains")
		}
	}
}

// The validation catches a misspelt field in the manifests, wherever it
// is: here one put into the chart's own Deployment template.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	for _, tc := range []struct{ file, from, to, want string }{
		{"deployment.yaml", "readinessProbe:", "readinesProbe:", `unknown field "spec.template.spec.containers[0].readinesProbe"`},
		{"deployment.yaml", "enableServiceLinks: false", "enableServiceLink: false", "enableServiceLink"},
		{"deployment.yaml", "terminationGracePeriodSeconds: {{", "terminationGracePeriodSeconds: \"{{", "terminationGracePeriodSeconds"},
		{"service.yaml", "targetPort: http", "targetPort: http\n      nodePorts: 3", "nodePorts"},
		{"pdb.yaml", "maxUnavailable:", "maxUnavailble:", "maxUnavailble"},
		{"hpa.yaml", "averageUtilization:", "averageUtilisation:", "averageUtilisation"},
		{"servicemonitor.yaml", "scrapeTimeout:", "scrapeTimout:", "scrapeTimout"},
		{"ingress.yaml", "pathType:", "pathtype:", "pathtype"},
		{"httproute.yaml", "backendRefs:", "backendRef:", "backendRef"},
		{"networkpolicy.yaml", "policyTypes:", "policyType:", "policyType"},
		{"admin-service.yaml", "targetPort: admin", "targetport: admin", "targetport"},
		{"ops-service.yaml", "targetPort: ops", "targetPort: ops\n      appProtocl: http", "appProtocl"},
		{"dashboard.yaml", "data:", "dat:", "dat"},
		{"prometheusrule.yaml", "spec:", "spec:\n  group: []", "group"},
	} {
		dir := copyChart(t)
		path := filepath.Join(dir, "templates", tc.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(tc.from)) {
			t.Fatalf("%s has no %q", tc.file, tc.from)
		}
		if tc.from == "terminationGracePeriodSeconds: {{" {
			b = bytes.Replace(b, []byte("terminationGracePeriodSeconds }}"), []byte("terminationGracePeriodSeconds }}\""), 1)
		}
		if err := os.WriteFile(path, bytes.Replace(b, []byte(tc.from), []byte(tc.to), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := render(t, dir, everything)
		if err != nil {
			t.Fatalf("%s: render: %v", tc.file, err)
		}
		if _, err := decode(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q as %q: %v, want %q", tc.file, tc.from, tc.to, err, tc.want)
		}
	}
}

func TestLint(t *testing.T) {
	l := lint.All(chartDir, withSecret, "news", false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %v", m)
		}
	}
}

// loadsInProdapi checks the environment the chart gives the container
// with prodapi's own loader: every variable a setting, every value valid,
// nothing contradicting. It returns the configuration loaded.
func loadsInProdapi(t *testing.T, c corev1.Container, secret *corev1.Secret) config.Config {
	t.Helper()
	vars := map[string]string{}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			vars[e.Name] = string(secret.Data[e.ValueFrom.SecretKeyRef.Key])
		default:
			vars[e.Name] = e.Value
		}
	}
	cfg, err := config.LoadFrom(config.Env{Getenv: func(k string) string { return vars[k] }, Names: names})
	if err != nil {
		t.Errorf("prodapi refuses the chart's environment:\n%v", err)
	}
	return cfg
}

func envVar(t *testing.T, c corev1.Container, name string) corev1.EnvVar {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no %s in the container's environment", name)
	return corev1.EnvVar{}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// copyChart copies the chart to a temporary directory, to break it there.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "prodapi")
	if err := os.CopyFS(dst, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestManifestsFile validates manifests rendered elsewhere, by the helm
// CLI for one (`helm template ... > out.yaml`), when CHART_MANIFESTS names
// the file.
func TestManifestsFile(t *testing.T) {
	path := os.Getenv("CHART_MANIFESTS")
	if path == "" {
		t.Skip("CHART_MANIFESTS names no file of rendered manifests")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(map[string]string{path: string(b)})
	if err != nil {
		t.Fatalf("invalid manifests: %v", err)
	}
	if len(find[*appsv1.Deployment](objs)) != 1 || len(find[*autoscalingv2.HorizontalPodAutoscaler](objs)) != 1 {
		t.Errorf("%d objects, not one Deployment and one HPA among them (make chart-test gives Redis)", len(objs))
	}
}

const adminSecret = "an-admin-secret-of-32-bytes-at-least"

// everything turns on every optional manifest.
var everything = with(map[string]any{
	"redis":          map[string]any{"existingSecret": "prodapi-redis"},
	"serviceMonitor": map[string]any{"enabled": true},
	"admin":          map[string]any{"enabled": true, "secret": adminSecret},
	"ingress": map[string]any{"enabled": true, "className": "nginx", "hosts": []any{"news.example"},
		"tls": []any{map[string]any{"hosts": []any{"news.example"}, "secretName": "news-tls"}}},
	"httpRoute": map[string]any{"enabled": true, "hostnames": []any{"news.example"},
		"parentRefs": []any{map[string]any{"name": "public", "namespace": "gateways", "sectionName": "https"}}},
	"networkPolicy": map[string]any{
		"admin":  map[string]any{"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "newsroom-ops"}}}}},
		"egress": map[string]any{"enabled": true},
	},
	"prometheusRule":   map[string]any{"enabled": true},
	"grafanaDashboard": map[string]any{"enabled": true},
})

// apiService is the Service of the API (not the admin or ops one).
func apiService(t *testing.T, objs []runtime.Object) *corev1.Service {
	t.Helper()
	return service(t, objs, "prodapi")
}

// opsService is the Service of the operator listener.
func opsService(t *testing.T, objs []runtime.Object) *corev1.Service {
	t.Helper()
	return service(t, objs, "prodapi-ops")
}

func service(t *testing.T, objs []runtime.Object, name string) *corev1.Service {
	t.Helper()
	for _, s := range find[*corev1.Service](objs) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

func matchesSelector(t *testing.T, sel metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(set))
}

// The admin listener gets its port, its secret and a Service of its own;
// the Ingress and the HTTPRoute reach the API's Service only, and the
// NetworkPolicy lets the admin port be reached from the selected peers
// alone.
func TestAdminListener(t *testing.T) {
	objs := renderAndDecode(t, everything)
	d := one[*appsv1.Deployment](t, objs)
	c := d.Spec.Template.Spec.Containers[0]
	if got := envVar(t, c, "PRODAPI_ADMIN_ADDR").Value; got != ":5501" {
		t.Errorf("PRODAPI_ADMIN_ADDR = %q, want :5501", got)
	}
	var adminSecretObj *corev1.Secret
	for _, s := range find[*corev1.Secret](objs) {
		if s.Name == "prodapi-admin" {
			adminSecretObj = s
		}
	}
	ref := envVar(t, c, "PRODAPI_ADMIN_SECRET").ValueFrom
	if adminSecretObj == nil || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != adminSecretObj.Name ||
		string(adminSecretObj.Data[ref.SecretKeyRef.Key]) != adminSecret {
		t.Fatalf("PRODAPI_ADMIN_SECRET from %+v, admin secret %+v", ref, adminSecretObj)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "admin" && p.ContainerPort == 5501 }) {
		t.Errorf("no admin port in %+v", c.Ports)
	}
	if d.Spec.Template.Annotations["checksum/admin-secret"] == "" {
		t.Error("pods do not restart when the admin secret changes")
	}

	api := apiService(t, objs)
	for _, p := range api.Spec.Ports {
		if p.TargetPort.String() == "admin" {
			t.Errorf("the API's Service exposes the admin port: %+v", p)
		}
	}
	var admin *corev1.Service
	for _, s := range find[*corev1.Service](objs) {
		if s.Name == "prodapi-admin" {
			admin = s
		}
	}
	if admin == nil || admin.Spec.Type != corev1.ServiceTypeClusterIP || len(admin.Spec.Ports) != 1 || admin.Spec.Ports[0].TargetPort.String() != "admin" ||
		!selects(admin.Spec.Selector, d.Spec.Template.Labels) {
		t.Fatalf("admin service %+v", admin)
	}

	ing := one[*networkingv1.Ingress](t, objs)
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "news.example" || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.TLS) != 1 {
		t.Errorf("ingress %+v", ing.Spec)
	}
	for _, r := range ing.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			if b := p.Backend.Service; b == nil || b.Name != api.Name || b.Port.Name != "http" {
				t.Errorf("the Ingress routes %s to %+v, want the API's Service", p.Path, p.Backend)
			}
		}
	}
	route := one[*gatewayv1.HTTPRoute](t, objs)
	if len(route.Spec.ParentRefs) != 1 || route.Spec.ParentRefs[0].Name != "public" || len(route.Spec.Hostnames) != 1 || route.Spec.Hostnames[0] != "news.example" {
		t.Errorf("httproute %+v", route.Spec)
	}
	for _, r := range route.Spec.Rules {
		for _, b := range r.BackendRefs {
			if string(b.Name) != api.Name || b.Port == nil || int32(*b.Port) != api.Spec.Ports[0].Port {
				t.Errorf("the HTTPRoute routes to %+v, want the API's Service", b.BackendObjectReference)
			}
		}
	}

	np := one[*networkingv1.NetworkPolicy](t, objs)
	var apiRule, opsRule, adminRule bool
	for _, r := range np.Spec.Ingress {
		switch {
		case len(r.Ports) == 1 && r.Ports[0].Port.String() == "http":
			apiRule = len(r.From) == 0
		case len(r.Ports) == 1 && r.Ports[0].Port.String() == "ops":
			opsRule = len(r.From) == 0
		case len(r.Ports) == 1 && r.Ports[0].Port.String() == "admin":
			adminRule = len(r.From) == 1 && r.From[0].NamespaceSelector != nil &&
				r.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "newsroom-ops"
		default:
			t.Errorf("unexpected ingress rule %+v", r)
		}
	}
	if !apiRule || !opsRule || !adminRule {
		t.Errorf("ingress rules %+v: want the API and the operator port from anywhere, the admin port from newsroom-ops only", np.Spec.Ingress)
	}
	loadsInProdapi(t, c, &corev1.Secret{Data: map[string][]byte{
		"AUTH_SERVER_SHARED_SECRET": []byte("a-chart-test-secret-of-32-bytes-or-more"), "PRODAPI_ADMIN_SECRET": []byte(adminSecret),
		"REDIS_URL": []byte("redis://redis-master:6379/0")}})

	// With no peers named, no pod reaches the admin port.
	objs = renderAndDecode(t, with(map[string]any{"admin": map[string]any{"enabled": true, "existingSecret": "ops", "existingSecretKey": "purge"}}))
	np = one[*networkingv1.NetworkPolicy](t, objs)
	if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[0].Ports[0].Port.String() != "http" || np.Spec.Ingress[1].Ports[0].Port.String() != "ops" {
		t.Errorf("ingress rules %+v: want the API's and the operator ports only", np.Spec.Ingress)
	}
	c = one[*appsv1.Deployment](t, objs).Spec.Template.Spec.Containers[0]
	if ref := envVar(t, c, "PRODAPI_ADMIN_SECRET").ValueFrom.SecretKeyRef; ref.Name != "ops" || ref.Key != "purge" {
		t.Errorf("admin secret from %+v, want ops/purge", ref)
	}
	for _, s := range find[*corev1.Secret](objs) {
		if s.Name == "prodapi-admin" {
			t.Error("an admin Secret beside the existing one")
		}
	}
}

// With egress restricted, the pods reach DNS and each backend's ports,
// to the peers given or anywhere.
func TestNetworkPolicyEgress(t *testing.T) {
	objs := renderAndDecode(t, with(map[string]any{"networkPolicy": map[string]any{"egress": map[string]any{
		"enabled": true,
		"mongo":   map[string]any{"ports": []any{27017}, "to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "mongo"}}}}},
		"otlp":    map[string]any{"ports": []any{}},
		"extra":   []any{map[string]any{"ports": []any{map[string]any{"port": 8443}}}},
	}}}))
	np := one[*networkingv1.NetworkPolicy](t, objs)
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Fatalf("policy types %v: egress not restricted", np.Spec.PolicyTypes)
	}
	ports := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			ports[p.Port.String()] = r.To
		}
	}
	for _, p := range []string{"53", "27017", "9200", "6379", "26379", "443", "8443"} {
		if _, ok := ports[p]; !ok {
			t.Errorf("no egress to port %s: %+v", p, np.Spec.Egress)
		}
	}
	if _, ok := ports["4318"]; ok {
		t.Error("egress to the OTLP port although its ports are empty")
	}
	if to := ports["27017"]; len(to) != 1 || to[0].PodSelector == nil || to[0].PodSelector.MatchLabels["app"] != "mongo" {
		t.Errorf("MongoDB egress to %+v, want the mongo pods", to)
	}
	if to := ports["9200"]; len(to) != 0 {
		t.Errorf("Elasticsearch egress to %+v, want anywhere", to)
	}

	// Off, there is none.
	objs = renderAndDecode(t, with(map[string]any{"networkPolicy": map[string]any{"enabled": false}}))
	if n := len(find[*networkingv1.NetworkPolicy](objs)); n != 0 {
		t.Errorf("%d NetworkPolicies with networkPolicy.enabled false", n)
	}
}

// The securityContexts are values: what is given is merged over the
// hardened defaults.
func TestSecurityContextOverride(t *testing.T) {
	objs := renderAndDecode(t, with(map[string]any{
		"podSecurityContext": map[string]any{"runAsUser": 10001, "fsGroup": nil},
		"securityContext":    map[string]any{"seLinuxOptions": map[string]any{"level": "s0:c123,c456"}},
	}))
	pod := one[*appsv1.Deployment](t, objs).Spec.Template.Spec
	if psc := pod.SecurityContext; psc == nil || *psc.RunAsUser != 10001 || psc.FSGroup != nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v: want runAsUser 10001, no fsGroup, still non-root", psc)
	}
	sc := pod.Containers[0].SecurityContext
	if sc == nil || sc.SELinuxOptions == nil || sc.SELinuxOptions.Level != "s0:c123,c456" || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want the SELinux level over the defaults", sc)
	}
}

// GOMEMLIMIT is goMemLimitPercent of the memory limit, in bytes.
func TestGoMemLimit(t *testing.T) {
	for _, tc := range []struct {
		memory  any
		percent int
		env     string
		want    string // "": not set
	}{
		{"1Gi", 90, "", "966367641"},
		{"1.5Gi", 80, "", "1288490188"},
		{"500M", 90, "", "450000000"},
		{"536870912", 90, "", "483183820"},
		{"1Gi", 0, "", ""},
		{nil, 90, "", ""},
		{"1Gi", 90, "700MiB", "700MiB"},
	} {
		limits := map[string]any{"cpu": "1", "memory": tc.memory} // nil drops the default limit
		v := with(map[string]any{"resources": map[string]any{"limits": limits}, "goMemLimitPercent": tc.percent})
		if tc.env != "" {
			v["env"] = map[string]any{"GOMEMLIMIT": tc.env}
		}
		c := one[*appsv1.Deployment](t, renderAndDecode(t, v)).Spec.Template.Spec.Containers[0]
		var got string
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				got = e.Value
			}
		}
		if got != tc.want {
			t.Errorf("memory %v at %d%% (env %q): GOMEMLIMIT %q, want %q", tc.memory, tc.percent, tc.env, got, tc.want)
		}
	}
}

// The OpenTelemetry values become the standard variables, which prodapi
// accepts.
func TestOpenTelemetry(t *testing.T) {
	objs := renderAndDecode(t, with(map[string]any{"otel": map[string]any{
		"tracesExporter": "otlp", "endpoint": "http://otel-collector.observability:4318", "serviceName": "prodapi-news",
		"sampler": "parentbased_traceidratio", "samplerArg": 0.25,
	}}))
	c := one[*appsv1.Deployment](t, objs).Spec.Template.Spec.Containers[0]
	for name, want := range map[string]string{
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318",
		"OTEL_SERVICE_NAME": "prodapi-news", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
	} {
		if got := envVar(t, c, name).Value; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	loadsInProdapi(t, c, one[*corev1.Secret](t, objs))
}

// The chart ships deploy/monitoring's rules and dashboard: its rules,
// rendered at the default values, are deploy/monitoring/prometheus/rules.yaml
// byte for byte (under the file's leading comment), and its dashboard is a
// copy of deploy/monitoring/grafana/prodapi.json this test keeps
// identical. With -update, the test writes rules.yaml instead.
func TestMonitoringShipped(t *testing.T) {
	a, err := os.ReadFile(filepath.Join(chartDir, "files/grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("deploy/helm/prodapi/files/grafana-dashboard.json differs from deploy/monitoring/grafana/prodapi.json: cp deploy/monitoring/grafana/prodapi.json deploy/helm/prodapi/files/grafana-dashboard.json")
	}

	objs := renderAndDecode(t, with(map[string]any{"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}},
		"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "News"}}}))
	b, err = os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	header, body := splitComment(string(b))
	rendered := renderedRules(t, withSecret)
	switch {
	case *update:
		b = []byte(header + rendered)
		if err := os.WriteFile(rulesFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	case body != rendered:
		t.Errorf("deploy/monitoring/prometheus/rules.yaml is not the chart's rules at the default values (%s); "+
			"edit templates/_prometheus-rules.tpl, then cd deploy/helm/test && go test -run TestMonitoringShipped -update", firstDifference(body, rendered))
	}
	rule := one[*monitoringv1.PrometheusRule](t, objs)
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(rule.Spec.Groups) != len(file.Groups) || len(rule.Spec.Groups[0].Rules) != len(file.Groups[0].Rules) || rule.Labels["release"] != "kube-prometheus" {
		t.Fatalf("PrometheusRule of %d groups, the first of %d rules, labels %v: want the %d groups of rules.yaml", len(rule.Spec.Groups), len(rule.Spec.Groups[0].Rules), rule.Labels, len(file.Groups))
	}
	for i, r := range rule.Spec.Groups[0].Rules {
		if r.Alert != file.Groups[0].Rules[i].Alert || r.Annotations["runbook_url"] != defaultRunbooks+r.Alert+".md" {
			t.Errorf("rule %d: %q (runbook %q), want %q", i, r.Alert, r.Annotations["runbook_url"], file.Groups[0].Rules[i].Alert)
		}
	}
	var dashboard *corev1.ConfigMap
	for _, cm := range find[*corev1.ConfigMap](objs) {
		if cm.Labels["grafana_dashboard"] == "1" {
			dashboard = cm
		}
	}
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if dashboard == nil || strings.TrimSpace(dashboard.Data["prodapi.json"]) != strings.TrimSpace(string(want)) || dashboard.Annotations["grafana_folder"] != "News" {
		t.Fatalf("no ConfigMap labelled grafana_dashboard: \"1\" holding the dashboard: %+v", dashboard)
	}

	// The sidecar's label is a value; both are off by default.
	objs = renderAndDecode(t, with(map[string]any{"grafanaDashboard": map[string]any{"enabled": true, "label": "dashboards", "labelValue": "prodapi"}}))
	if cms := find[*corev1.ConfigMap](objs); len(cms) != 1 || cms[0].Labels["dashboards"] != "prodapi" {
		t.Errorf("dashboard ConfigMaps %+v, want one labelled dashboards: prodapi", cms)
	}
	objs = renderAndDecode(t, withSecret)
	if len(find[*corev1.ConfigMap](objs))+len(find[*monitoringv1.PrometheusRule](objs)) != 0 {
		t.Error("a dashboard or rules by default")
	}
}
