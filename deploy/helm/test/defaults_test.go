package charttest

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// container is the Deployment's one container.
func container(t *testing.T, objs []runtime.Object) corev1.Container {
	t.Helper()
	return one[*appsv1.Deployment](t, objs).Spec.Template.Spec.Containers[0]
}

// hasEnv reports whether the container is given the variable name.
func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// Without Redis each replica keeps its own cache and change log, so the
// chart runs one replica and no HPA unless told to run more anyway;
// asking for more without Redis is refused, naming both ways to give it.
func TestRedisAndReplicas(t *testing.T) {
	const redisURL = "redis://redis-master:6379/0"
	for _, tc := range []struct {
		name     string
		values   map[string]any
		hpa      bool
		replicas int32 // without the HPA
	}{
		{"the defaults, no Redis", withSecret, false, 1},
		{"redis.url", with(map[string]any{"redis": map[string]any{"url": redisURL}}), true, 0},
		{"redis.existingSecret", with(map[string]any{"redis": map[string]any{"existingSecret": "prodapi-redis"}}), true, 0},
		{"two replicas with redis.existingSecret", with(map[string]any{"redis": map[string]any{"existingSecret": "prodapi-redis"},
			"replicaCount": 2, "autoscaling": map[string]any{"enabled": false}}), false, 2},
		{"Redis from env", with(map[string]any{"env": map[string]any{"REDIS_URL": redisURL}, "replicaCount": 3,
			"autoscaling": map[string]any{"enabled": false}}), false, 3},
		{"one replica asked for", with(map[string]any{"replicaCount": 1}), false, 1},
		{"three replicas without Redis, allowed", with(map[string]any{"replicaCount": 3, "allowReplicasWithoutRedis": true}), false, 3},
		{"the HPA without Redis, allowed", with(map[string]any{"autoscaling": map[string]any{"enabled": true}, "allowReplicasWithoutRedis": true}), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderAndDecode(t, tc.values)
			d := one[*appsv1.Deployment](t, objs)
			hpas := find[*autoscalingv2.HorizontalPodAutoscaler](objs)
			switch {
			case tc.hpa && (len(hpas) != 1 || d.Spec.Replicas != nil):
				t.Errorf("%d HPAs, replicas %v: want the HPA alone to scale", len(hpas), d.Spec.Replicas)
			case !tc.hpa && (len(hpas) != 0 || d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas):
				t.Errorf("%d HPAs, replicas %v: want no HPA and %d replicas", len(hpas), d.Spec.Replicas, tc.replicas)
			}
			loadsInProdapi(t, d.Spec.Template.Spec.Containers[0], &corev1.Secret{Data: map[string][]byte{
				"AUTH_SERVER_SHARED_SECRET": []byte("a-chart-test-secret-of-32-bytes-or-more"), "REDIS_URL": []byte(redisURL)}})
		})
	}

	// redis.existingSecret gives REDIS_URL from the Secret, at its key.
	c := container(t, renderAndDecode(t, with(map[string]any{"redis": map[string]any{"existingSecret": "prodapi-redis", "existingSecretKey": "url"}})))
	if ref := envVar(t, c, "REDIS_URL").ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "prodapi-redis" || ref.SecretKeyRef.Key != "url" {
		t.Errorf("REDIS_URL from %+v, want the Secret prodapi-redis, key url", ref)
	}

	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"two replicas without Redis", with(map[string]any{"replicaCount": 2}),
			[]string{"replicaCount: 2 without Redis", "redis.url", "redis.existingSecret", "allowReplicasWithoutRedis"}},
		{"the HPA without Redis", with(map[string]any{"autoscaling": map[string]any{"enabled": true}}),
			[]string{"autoscaling.enabled: true without Redis", "redis.url", "redis.existingSecret"}},
		{"a URL and a Secret", with(map[string]any{"redis": map[string]any{"url": redisURL, "existingSecret": "prodapi-redis"}}),
			[]string{"redis.existingSecret and redis.url"}},
	} {
		_, err := render(t, chartDir, tc.values)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q in it", tc.name, err, want)
			}
		}
	}

	// NOTES.txt says why there is one replica, and what to do.
	n := notes(t, withSecret)
	for _, want := range []string{"one replica and no HPA", "its own change log", "redis.url", "redis.existingSecret"} {
		if !strings.Contains(n, want) {
			t.Errorf("NOTES.txt without Redis lacks %q:\n%s", want, n)
		}
	}
	if n := notes(t, with(map[string]any{"redis": map[string]any{"url": redisURL}})); strings.Contains(n, "No Redis") {
		t.Errorf("NOTES.txt with Redis says there is none:\n%s", n)
	}
	if n := notes(t, with(map[string]any{"replicaCount": 3, "allowReplicasWithoutRedis": true})); !strings.Contains(n, "resyncs (410)") {
		t.Errorf("NOTES.txt with replicas allowed without Redis does not warn of the resyncs:\n%s", n)
	}
}

// The backends' URLs are written only when set, so that a Secret in
// envFrom gives them (Kubernetes ranks an explicit env entry above
// envFrom); with neither, the chart does not render.
func TestBackendsFromEnvFrom(t *testing.T) {
	envFrom := []any{map[string]any{"secretRef": map[string]any{"name": "prodapi-backends"}}}
	v := with(map[string]any{"envFrom": envFrom})
	delete(v, "mongo")
	delete(v, "elasticsearch")
	c := container(t, renderAndDecode(t, v))
	for _, name := range []string{"MONGO_URI", "ELASTICSEARCH_URL"} {
		if hasEnv(c, name) {
			t.Errorf("%s written beside envFrom: it would win over the Secret's", name)
		}
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "prodapi-backends" {
		t.Errorf("envFrom %+v", c.EnvFrom)
	}
	// ELASTICSEARCH_INDEX is no URL: its default stays.
	if got := envVar(t, c, "ELASTICSEARCH_INDEX").Value; got != "superdesk" {
		t.Errorf("ELASTICSEARCH_INDEX = %q", got)
	}
	n := notes(t, v)
	for _, want := range []string{"Secret prodapi-backends", "MONGO_URI and ELASTICSEARCH_URL must be among them",
		"A REDIS_URL that comes from envFrom is one the chart cannot see", "redis.existingSecret"} {
		if !strings.Contains(n, want) {
			t.Errorf("NOTES.txt with envFrom lacks %q:\n%s", want, n)
		}
	}
	// With Redis from the Secret the chart knows of, NOTES.txt says no
	// more about REDIS_URL.
	v["redis"] = map[string]any{"existingSecret": "prodapi-backends"}
	if n := notes(t, v); strings.Contains(n, "REDIS_URL") {
		t.Errorf("NOTES.txt with redis.existingSecret still speaks of REDIS_URL:\n%s", n)
	}

	// One from a value, the other from envFrom.
	v = with(map[string]any{"envFrom": envFrom, "elasticsearch": map[string]any{"url": ""}})
	c = container(t, renderAndDecode(t, v))
	if !hasEnv(c, "MONGO_URI") || hasEnv(c, "ELASTICSEARCH_URL") {
		t.Errorf("env %+v: want MONGO_URI from its value, ELASTICSEARCH_URL left to envFrom", c.Env)
	}
	if n := notes(t, v); !strings.Contains(n, "ELASTICSEARCH_URL must be among them") || strings.Contains(n, "MONGO_URI") {
		t.Errorf("NOTES.txt, Elasticsearch from envFrom:\n%s", n)
	}

	// Neither a value nor envFrom: refused, naming the values.
	v = with(nil)
	delete(v, "mongo")
	delete(v, "elasticsearch")
	_, err := render(t, chartDir, v)
	for _, want := range []string{"mongo.uri and elasticsearch.url", "envFrom", "MONGO_URI and ELASTICSEARCH_URL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no backends: %v, want %q in it", err, want)
		}
	}
	v["mongo"] = map[string]any{"uri": mongoURI}
	if _, err := render(t, chartDir, v); err == nil || !strings.Contains(err.Error(), "set elasticsearch.url, or") {
		t.Errorf("no Elasticsearch: %v", err)
	}
	// The sandbox needs neither.
	v = with(map[string]any{"env": map[string]any{"PRODAPI_SANDBOX": "sample"}})
	delete(v, "mongo")
	delete(v, "elasticsearch")
	loadsInProdapi(t, container(t, renderAndDecode(t, v)), one[*corev1.Secret](t, renderAndDecode(t, v)))
}

// A rolling update drops no request by default: prodapi turns unready and
// keeps serving for PRODAPI_SHUTDOWN_DELAY, the pod sleeps before SIGTERM
// where Kubernetes has the sleep action (1.30), and the grace period
// covers the sleep, the delay and the drain.
func TestGracefulRollout(t *testing.T) {
	for _, tc := range []struct {
		kube    string
		preStop int64 // 0: none
	}{
		{"v1.30.0", 5},
		{"v1.33.2-gke.1000", 5},
		{"v1.29.4", 0},
		{"v1.25.0", 0},
	} {
		out, err := renderAll(t, chartDir, withSecret, tc.kube)
		if err != nil {
			t.Fatalf("Kubernetes %s: %v", tc.kube, err)
		}
		delete(out, "prodapi/templates/NOTES.txt")
		objs, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		pod := one[*appsv1.Deployment](t, objs).Spec.Template.Spec
		c := pod.Containers[0]
		if got := envVar(t, c, "PRODAPI_SHUTDOWN_DELAY").Value; got != "5s" {
			t.Errorf("Kubernetes %s: PRODAPI_SHUTDOWN_DELAY = %q, want 5s", tc.kube, got)
		}
		var sleep int64
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			sleep = c.Lifecycle.PreStop.Sleep.Seconds
		}
		if sleep != tc.preStop {
			t.Errorf("Kubernetes %s: preStop %+v, want a sleep of %ds", tc.kube, c.Lifecycle, tc.preStop)
		}
		// 5s of sleep, 5s unready and serving, 10s of drain.
		if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 5+5+10 {
			t.Errorf("Kubernetes %s: terminationGracePeriodSeconds %v, want more than 20", tc.kube, g)
		}
		loadsInProdapi(t, c, one[*corev1.Secret](t, objs))
	}

	// The check counts the delay: 30s is not above 5 + 5 + 20.
	_, err := render(t, chartDir, with(map[string]any{"shutdownGraceSeconds": 20}))
	if err == nil || !strings.Contains(err.Error(), "shutdownDelaySeconds") || !strings.Contains(err.Error(), "(5 + 5 + 20 = 30)") {
		t.Errorf("a drain that fills the grace period: %v", err)
	}
	// No delay, no sleep: neither is written, and the grace period needs
	// only cover the drain.
	objs := renderAndDecode(t, with(map[string]any{"shutdownDelaySeconds": 0, "preStopSleepSeconds": 0, "terminationGracePeriodSeconds": 11}))
	c := container(t, objs)
	if hasEnv(c, "PRODAPI_SHUTDOWN_DELAY") || c.Lifecycle != nil {
		t.Errorf("delay and sleep 0: env %+v, lifecycle %+v", c.Env, c.Lifecycle)
	}
}

// The probes and /metrics are on the operator listener: its own port, a
// ClusterIP Service the ServiceMonitor scrapes (TestServiceMonitor), a
// NetworkPolicy rule; the Ingress and the HTTPRoute route only the API's
// prefix, to the API's Service.
func TestOperatorListener(t *testing.T) {
	objs := renderAndDecode(t, with(map[string]any{
		"redis":         map[string]any{"url": "redis://redis-master:6379/0"},
		"ops":           map[string]any{"port": 6000, "service": map[string]any{"port": 9100}},
		"networkPolicy": map[string]any{"ops": map[string]any{"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}}}},
		"ingress":       map[string]any{"enabled": true, "hosts": []any{"news.example"}},
		"httpRoute":     map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public"}}},
	}))
	c := container(t, objs)
	if got := envVar(t, c, "PRODAPI_OPS_ADDR").Value; got != ":6000" {
		t.Errorf("PRODAPI_OPS_ADDR = %q, want :6000", got)
	}
	loadsInProdapi(t, c, one[*corev1.Secret](t, objs))
	var opsPort int32
	for _, p := range c.Ports {
		if p.Name == "ops" {
			opsPort = p.ContainerPort
		}
	}
	if opsPort != 6000 || c.ReadinessProbe.HTTPGet.Port.String() != "ops" || c.LivenessProbe.HTTPGet.Port.String() != "ops" {
		t.Errorf("ops port %d, probes on %s and %s", opsPort, c.ReadinessProbe.HTTPGet.Port.String(), c.LivenessProbe.HTTPGet.Port.String())
	}
	ops := opsService(t, objs)
	if p := ops.Spec.Ports; len(p) != 1 || p[0].Port != 9100 || p[0].TargetPort.String() != "ops" || ops.Labels["app.kubernetes.io/component"] != "ops" {
		t.Errorf("ops Service %+v", ops)
	}
	for _, p := range apiService(t, objs).Spec.Ports {
		if p.TargetPort.String() != "http" {
			t.Errorf("the API's Service exposes %+v", p)
		}
	}
	var opsFrom []networkingv1.NetworkPolicyPeer
	for _, r := range one[*networkingv1.NetworkPolicy](t, objs).Spec.Ingress {
		if len(r.Ports) == 1 && r.Ports[0].Port.String() == "ops" {
			opsFrom = r.From
		}
	}
	if len(opsFrom) != 1 || opsFrom[0].NamespaceSelector == nil || opsFrom[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("the operator port from %+v, want the monitoring namespace", opsFrom)
	}

	// The API's prefix, not /, so that nothing else on the API's port is
	// exposed; ingress-nginx neither buffers /changes nor cuts it at 60 s,
	// nor does the Gateway.
	ing := one[*networkingv1.Ingress](t, objs)
	for _, r := range ing.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			if p.Path != "/prodapi" || p.Backend.Service == nil || p.Backend.Service.Name != "prodapi" {
				t.Errorf("the Ingress routes %s to %+v, want /prodapi to the API's Service", p.Path, p.Backend)
			}
		}
	}
	if a := ing.Annotations; a["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "90" || a["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
		t.Errorf("Ingress annotations %v", a)
	}
	route := one[*gatewayv1.HTTPRoute](t, objs)
	if len(route.Spec.Rules) != 1 {
		t.Fatalf("HTTPRoute rules %+v", route.Spec.Rules)
	}
	r := route.Spec.Rules[0]
	if len(r.Matches) != 1 || r.Matches[0].Path == nil || *r.Matches[0].Path.Value != "/prodapi" || *r.Matches[0].Path.Type != gatewayv1.PathMatchPathPrefix {
		t.Errorf("HTTPRoute matches %+v, want the prefix /prodapi", r.Matches)
	}
	if r.Timeouts == nil || r.Timeouts.Request == nil || *r.Timeouts.Request != "0s" {
		t.Errorf("HTTPRoute timeouts %+v, want the request timeout off", r.Timeouts)
	}

	// Written at the default port too, as PORT is: the listener follows
	// ops.port whatever prodapi's own default.
	if got := envVar(t, container(t, renderAndDecode(t, withSecret)), "PRODAPI_OPS_ADDR").Value; got != ":5502" {
		t.Errorf("PRODAPI_OPS_ADDR = %q at the default ops.port, want :5502", got)
	}
	// The ports are values, never env: the probes and the Services follow
	// them. And no two listeners share one.
	checkRefusals(t, []refusal{
		{"env.PRODAPI_OPS_ADDR", with(map[string]any{"env": map[string]any{"PRODAPI_OPS_ADDR": ":6000"}}), "env.PRODAPI_OPS_ADDR is written from ops.port"},
		{"env.PORT", with(map[string]any{"env": map[string]any{"PORT": "8080"}}), "env.PORT is written from port"},
		{"the API's port twice", with(map[string]any{"ops": map[string]any{"port": 5500}}), "port (5500), ops.port (5500) must differ"},
		{"the admin port twice", with(map[string]any{"admin": map[string]any{"enabled": true, "secret": adminSecret, "port": 5502}}),
			"port (5500), ops.port (5502) and admin.port (5502) must differ"},
	})
}

// GOGC is 400 by default, beside GOMEMLIMIT; 0 leaves Go's default, and
// env.GOGC wins.
func TestGOGC(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string // "": not set
	}{
		{withSecret, "400"},
		{with(map[string]any{"goGC": 200}), "200"},
		{with(map[string]any{"goGC": 0}), ""},
		{with(map[string]any{"env": map[string]any{"GOGC": "off"}}), "off"},
	} {
		c := container(t, renderAndDecode(t, tc.values))
		var got string
		for _, e := range c.Env {
			if e.Name == "GOGC" {
				got = e.Value
			}
		}
		if got != tc.want {
			t.Errorf("goGC %v, env %v: GOGC %q, want %q", tc.values["goGC"], tc.values["env"], got, tc.want)
		}
	}
}
