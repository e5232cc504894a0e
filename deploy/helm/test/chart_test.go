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
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/prodapi/prodapi/config"
)

const chartDir = "../prodapi"

// A valid secret for the renders that do not test the secret.
var withSecret = map[string]any{"auth": map[string]any{"sharedSecret": "a-chart-test-secret-of-32-bytes-or-more"}}

// strict decodes YAML or JSON into the registered Kubernetes and
// prometheus-operator types, refusing unknown and duplicate fields.
var strict = func() runtime.Decoder {
	s := runtime.NewScheme()
	if err := clientscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}()

// render renders the chart at dir with values over its defaults, as `helm
// template` does (values schema included), and returns the manifests by
// template path.
func render(t *testing.T, dir string, values map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "prodapi", Namespace: "news", IsInstall: true}, nil)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, vals)
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
	if want := []string{"Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}

	d := one[*appsv1.Deployment](t, objs)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port.String() != "http" {
		t.Errorf("liveness probe %+v", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.String() != "http" {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 5500 {
		t.Errorf("ports %+v", c.Ports)
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
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d set while the HPA scales", *d.Spec.Replicas)
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

	// The Service, the HPA and the PDB select and name the Deployment.
	svc := one[*corev1.Service](t, objs)
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service %+v", svc.Spec)
	}
	hpa := one[*autoscalingv2.HorizontalPodAutoscaler](t, objs)
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
		t.Errorf("hpa %+v", hpa.Spec)
	}
	pdb := one[*policyv1.PodDisruptionBudget](t, objs)
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("pdb %+v", pdb.Spec)
	}
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	// Kubernetes waits for prodapi to drain before it kills it.
	if grace := envVar(t, c, "PRODAPI_SHUTDOWN_GRACE").Value; pod.TerminationGracePeriodSeconds == nil || grace != "10s" || *pod.TerminationGracePeriodSeconds <= 10 {
		t.Errorf("PRODAPI_SHUTDOWN_GRACE %s, terminationGracePeriodSeconds %v", grace, pod.TerminationGracePeriodSeconds)
	}
	loadsInProdapi(t, c, secret)
}

func TestValuesBecomeSettings(t *testing.T) {
	objs := renderAndDecode(t, map[string]any{
		"auth":          map[string]any{"existingSecret": "superdesk-auth", "existingSecretKey": "secret", "audience": "prodapi"},
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
	objs := renderAndDecode(t, map[string]any{"auth": withSecret["auth"], "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}}})
	sm := one[*monitoringv1.ServiceMonitor](t, objs)
	svc := one[*corev1.Service](t, objs)
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name ||
		sm.Spec.Endpoints[0].Path != "/metrics" || sm.Labels["release"] != "kube-prometheus" {
		t.Errorf("service monitor %+v (service labels %v)", sm, svc.Labels)
	}
}

// The chart refuses what cannot work rather than rendering it.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no secret", nil, "set auth.existingSecret"},
		{"drain longer than the grace period", map[string]any{"auth": withSecret["auth"], "shutdownGraceSeconds": 30},
			"terminationGracePeriodSeconds must exceed"},
		{"a misspelt value", map[string]any{"auth": withSecret["auth"], "replicaCont": 3}, "replicaCont"},
		{"a misspelt nested value", map[string]any{"auth": withSecret["auth"], "redis": map[string]any{"uri": "redis://r:6379"}}, "uri"},
	} {
		_, err := render(t, chartDir, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// With auth off, no secret is needed, and prodapi is told.
	objs := renderAndDecode(t, map[string]any{"auth": map[string]any{"enabled": false}})
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
		{"deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "readOnlyRootFileSystem"},
		{"deployment.yaml", "terminationGracePeriodSeconds: {{", "terminationGracePeriodSeconds: \"{{", "terminationGracePeriodSeconds"},
		{"service.yaml", "targetPort: http", "targetPort: http\n      nodePorts: 3", "nodePorts"},
		{"pdb.yaml", "maxUnavailable:", "maxUnavailble:", "maxUnavailble"},
		{"hpa.yaml", "averageUtilization:", "averageUtilisation:", "averageUtilisation"},
		{"servicemonitor.yaml", "scrapeTimeout:", "scrapeTimout:", "scrapeTimout"},
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
		m, err := render(t, dir, map[string]any{"auth": withSecret["auth"], "serviceMonitor": map[string]any{"enabled": true}})
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
// nothing contradicting.
func loadsInProdapi(t *testing.T, c corev1.Container, secret *corev1.Secret) {
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
	_, err := config.LoadFrom(config.Env{Getenv: func(k string) string { return vars[k] }, Names: names})
	if err != nil {
		t.Errorf("prodapi refuses the chart's environment:\n%v", err)
	}
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
	if len(find[*appsv1.Deployment](objs)) != 1 {
		t.Errorf("%d objects, no Deployment among them", len(objs))
	}
}
