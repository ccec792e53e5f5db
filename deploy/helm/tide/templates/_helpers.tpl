{{- define "tide.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "tide.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tide.labels" -}}
{{ include "tide.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* CPUs per pod: instances x intra-op threads (the inference threads). */}}
{{- define "tide.cpus" -}}
{{- mul (int .Values.model.instances) (int .Values.model.intraOpThreads) -}}
{{- end -}}

{{/* Seconds the kubelet waits after SIGTERM: preStop + the drain grace + 15 s for model shutdown. */}}
{{- define "tide.terminationGracePeriodSeconds" -}}
{{- add (int .Values.preStopSleepSeconds) (div (int .Values.server.shutdownGraceMs) 1000) 15 -}}
{{- end -}}
