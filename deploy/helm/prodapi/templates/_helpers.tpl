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
