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

{{/* The credentials tide reads from files (values auth.*): the Secret volume's name (also the mount
     folder /etc/tide/NAME and the file name in it), the flag that names the file, and the values. */}}
{{- define "tide.credentials" -}}
items:
  - {name: api-key, flag: --api-key-file, values: apiKey}
  - {name: admin-api-key, flag: --admin-api-key-file, values: adminApiKey}
  - {name: api-keys, flag: --api-keys, values: apiKeys}
{{- end -}}

{{/* The Secret holding one credential: auth.X.existingSecret, else the chart's own
     "<fullname>-<name>" when auth.X.value is given, else "" (that credential is off).
     Argument: (list $ NAME VALUES), VALUES one of .Values.auth.apiKey / adminApiKey / apiKeys. */}}
{{- define "tide.credentialSecret" -}}
{{- $root := index . 0 }}{{ $name := index . 1 }}{{ $v := index . 2 -}}
{{- if $v.existingSecret }}{{ $v.existingSecret }}{{ else if $v.value }}{{ include "tide.fullname" $root }}-{{ $name }}{{ end -}}
{{- end -}}
