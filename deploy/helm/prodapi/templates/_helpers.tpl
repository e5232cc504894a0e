{{- define "prodapi.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "prodapi.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "prodapi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "prodapi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "prodapi.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "prodapi.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "prodapi.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "prodapi.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding AUTH_SERVER_SHARED_SECRET: the existing one, or ours. */}}
{{- define "prodapi.secretName" -}}
{{- default (include "prodapi.fullname" .) .Values.auth.existingSecret }}
{{- end }}

{{/* The Secret holding PRODAPI_ADMIN_SECRET: the existing one, or ours. */}}
{{- define "prodapi.adminSecretName" -}}
{{- default (printf "%s-admin" (include "prodapi.fullname" .)) .Values.admin.existingSecret }}
{{- end }}

{{/*
prodapi.bytes: a Kubernetes memory quantity (512Mi, 1.5Gi, 500M, 1e9,
536870912) in bytes, as an integer; the template fails on anything else.
*/}}
{{- define "prodapi.bytes" -}}
{{- $q := toString . }}
{{- $m := regexFind "^[0-9]+(\\.[0-9]+)?" $q }}
{{- $suffix := trimPrefix $m $q }}
{{- $units := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 }}
{{- if or (not $m) (not (hasKey $units $suffix)) }}
{{- fail (printf "resources.limits.memory %q: goMemLimitPercent needs a quantity such as 512Mi or 1Gi; set goMemLimitPercent: 0 and env.GOMEMLIMIT instead" $q) }}
{{- end }}
{{- mulf (float64 $m) (index $units $suffix) | floor | int64 }}
{{- end }}

{{/* prodapi.redis: "true" when the chart knows Redis is there (redis.url, redis.existingSecret or env.REDIS_URL), else "". */}}
{{- define "prodapi.redis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret (dig "REDIS_URL" "" (.Values.env | default dict)) }}true{{ end }}
{{- end }}

{{/* The message of a render refused for replicas without Redis; the argument is what was asked. */}}
{{- define "prodapi.replicasNeedRedis" -}}
{{- printf "%s without Redis: each replica would keep its own cache and its own change log, so a /changes token one replica gave out would be refused (410, resync) by the next. Set redis.url or redis.existingSecret (a Secret holding REDIS_URL), or allowReplicasWithoutRedis: true to run them apart anyway" . }}
{{- end }}

{{/*
prodapi.autoscaling: "true" when the HPA renders. autoscaling.enabled unset:
on with Redis, off without; true without Redis fails unless
allowReplicasWithoutRedis.
*/}}
{{- define "prodapi.autoscaling" -}}
{{- $asked := .Values.autoscaling.enabled }}
{{- if kindIs "invalid" $asked }}
{{- include "prodapi.redis" . }}
{{- else if $asked }}
{{- if not (or (include "prodapi.redis" .) .Values.allowReplicasWithoutRedis) }}
{{- fail (include "prodapi.replicasNeedRedis" "autoscaling.enabled: true") }}
{{- end }}true
{{- end }}
{{- end }}

{{/*
prodapi.replicas: the Deployment's replicas while the HPA is off. replicaCount
unset: 2 with Redis, 1 without; more than 1 without Redis fails unless
allowReplicasWithoutRedis.
*/}}
{{- define "prodapi.replicas" -}}
{{- $n := .Values.replicaCount }}
{{- if kindIs "invalid" $n }}
{{- ternary 2 1 (eq (include "prodapi.redis" .) "true") }}
{{- else }}
{{- if and (gt (int $n) 1) (not (or (include "prodapi.redis" .) .Values.allowReplicasWithoutRedis)) }}
{{- fail (include "prodapi.replicasNeedRedis" (printf "replicaCount: %d" (int $n))) }}
{{- end }}
{{- int $n }}
{{- end }}
{{- end }}

{{/* prodapi.preStopSleep: the preStop sleep's seconds, 0 where Kubernetes is older than 1.30 (no sleep action). */}}
{{- define "prodapi.preStopSleep" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}{{ int .Values.preStopSleepSeconds }}{{ else }}0{{ end }}
{{- end }}

{{/* prodapi.rate: a rate value as the setting writes it; YAML's bare off (false) is off. */}}
{{- define "prodapi.rate" -}}
{{- if kindIs "bool" . }}off{{ else }}{{ . }}{{ end }}
{{- end }}
