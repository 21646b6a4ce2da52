{{/* The chart's name. */}}
{{- define "tjo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects: the release name, unless it lacks the chart name. */}}
{{- define "tjo.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tjo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tjo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tjo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tjo.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trainjob-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "tjo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tjo.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tjo.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repo = printf "%s/%s" .Values.image.registry .Values.image.repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The operator's config file: .Values.config with what the chart owns forced on top. YAML text; read it back with
`include "tjo.config" . | fromYaml` (numbers come back as float64: wrap them in `int`).
*/}}
{{- define "tjo.config" -}}
{{- $forced := dict
      "operator_namespace" .Release.Namespace
      "webhook" (dict "host" "0.0.0.0" "service_name" (include "tjo.fullname" .) "service_port" (int .Values.service.webhookPort))
      "health" (dict "host" "0.0.0.0")
      "status_server" (dict "host" "0.0.0.0")
      "metrics" (dict "host" "0.0.0.0") }}
{{- $cfg := mustMergeOverwrite (deepCopy (dict "webhook" (dict "port" 9443) "health" (dict "port" 8081) "status_server" (dict "enabled" true "port" 10443) "metrics" (dict "port" 8443 "auth" (dict "enabled" false)) "leader_election" (dict "lease_name" "trainer.kubeflow.org" "enabled" true))) (deepCopy .Values.config) $forced }}
{{- toYaml $cfg }}
{{- end }}
