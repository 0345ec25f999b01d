{{/* The chart's name, or nameOverride. */}}
{{- define "farm-apiserver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the namespaced objects (Deployment, Service, ServiceAccount, ...)
and the prefix of the cluster-wide ones: the release name when it already
contains the chart's name (`helm install farm-apiserver ...` gives
"farm-apiserver"), else <release>-<name>.
*/}}
{{- define "farm-apiserver.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "farm-apiserver.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "farm-apiserver.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* What selects the Pods: fixed for the life of a release (a Deployment's selector cannot change). */}}
{{- define "farm-apiserver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "farm-apiserver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "farm-apiserver.labels" -}}
helm.sh/chart: {{ include "farm-apiserver.chart" . }}
{{ include "farm-apiserver.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: farm-apiserver
{{- end }}

{{- define "farm-apiserver.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "farm-apiserver.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "farm-apiserver.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Seconds the server serves on after SIGTERM (--shutdown-delay-duration):
     server.shutdownDelaySeconds, else 10 with etcd and 0 with memory. */}}
{{- define "farm-apiserver.shutdownDelay" -}}
{{- if not (kindIs "invalid" .Values.server.shutdownDelaySeconds) }}
{{- .Values.server.shutdownDelaySeconds | int64 }}
{{- else if eq .Values.storage.type "etcd" }}
{{- 10 }}
{{- else }}
{{- 0 }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving pair the Deployment mounts. */}}
{{- define "farm-apiserver.tlsSecretName" -}}
{{- if eq .Values.tls.type "existing-secret" }}
{{- required "tls.existingSecret.name: the Secret with tls.crt and tls.key is required with tls.type existing-secret" .Values.tls.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "farm-apiserver.fullname" .) }}
{{- end }}
{{- end }}

{{/* The host names the serving certificate is for, one per line. */}}
{{- define "farm-apiserver.dnsNames" -}}
{{- $svc := include "farm-apiserver.fullname" . }}
{{- $ns := .Release.Namespace }}
{{ $svc }}
{{ $svc }}.{{ $ns }}
{{ $svc }}.{{ $ns }}.svc
{{ $svc }}.{{ $ns }}.svc.{{ .Values.tls.clusterDomain }}
{{- end }}

{{/* The audit policy, as mounted: the value, else the chart's sample. */}}
{{- define "farm-apiserver.auditPolicy" -}}
{{- if .Values.audit.policy }}
{{- .Values.audit.policy }}
{{- else }}
{{- .Files.Get "files/audit-policy.yaml" }}
{{- end }}
{{- end }}

{{/*
Checks between values that the schema does not express well, with messages
that say what to change. Rendered (as nothing) by the Deployment.
*/}}
{{- define "farm-apiserver.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (ne .Values.storage.type "etcd") }}
{{- fail (printf "replicaCount: %d replicas need storage.type etcd; with storage.type %s every replica would keep its own, diverging store" (int .Values.replicaCount) .Values.storage.type) }}
{{- end }}
{{- if and (eq .Values.storage.type "etcd") (empty .Values.storage.etcd.endpoints) }}
{{- fail "storage.etcd.endpoints: storage.type etcd needs at least one etcd client URL" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.minAvailable .Values.podDisruptionBudget.maxUnavailable }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
{{- if and (eq .Values.tls.type "existing-secret") (not .Values.tls.existingSecret.name) }}
{{- fail "tls.existingSecret.name: the Secret with tls.crt and tls.key is required with tls.type existing-secret" }}
{{- end }}
{{- end }}

{{/*
kube's TracingConfiguration, from the tracing values.
*/}}
{{- define "farm-apiserver.tracingConfig" -}}
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: {{ .Values.tracing.endpoint | quote }}
samplingRatePerMillion: {{ .Values.tracing.samplingRatePerMillion | int64 }}
{{- end }}
