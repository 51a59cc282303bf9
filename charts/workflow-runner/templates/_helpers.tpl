{{/* Names and labels shared by every template of the workflow-runner chart. */}}

{{/* Every object is named after the release, `<run>-r<revision>`. */}}
{{- define "runner.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The run's name as a label value: a run name is a DNS subdomain of up to 253
characters, a label value at most 63; a longer name keeps a hash of itself.
Select a run's objects by plnt.work/run-uid, which is exact.
*/}}
{{- define "runner.runLabel" -}}
{{- $name := .Values.run.name -}}
{{- if le (len $name) 63 -}}
{{- $name -}}
{{- else -}}
{{- printf "%s-%s" (regexReplaceAll "[-.]+$" (trunc 52 $name) "") (sha256sum $name | trunc 10) -}}
{{- end -}}
{{- end -}}

{{- define "runner.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runner.labels" -}}
{{ include "runner.selectorLabels" . }}
app.kubernetes.io/component: runner
app.kubernetes.io/part-of: plnt
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
plnt.work/run: {{ include "runner.runLabel" . }}
plnt.work/run-uid: {{ .Values.run.uid | quote }}
plnt.work/revision: {{ .Values.revision | int | quote }}
{{- end -}}

{{- define "runner.annotations" -}}
plnt.work/run-namespace: {{ .Values.run.namespace | quote }}
plnt.work/run-name: {{ .Values.run.name | quote }}
plnt.work/workflow-ref: {{ .Values.workflow.ref | quote }}
plnt.work/workflow-digest: {{ .Values.workflow.digest | quote }}
{{- end -}}

{{- define "runner.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The chosen GPU class (an empty dict when none); an unknown name fails the render. */}}
{{- define "runner.gpuClass" -}}
{{- if .Values.gpuClass -}}
{{- if not (hasKey .Values.gpuClasses .Values.gpuClass) -}}
{{- fail (printf "gpuClass %q is not one of gpuClasses (%s)" .Values.gpuClass (keys .Values.gpuClasses | sortAlpha | join ", ")) -}}
{{- end -}}
{{- toJson (get .Values.gpuClasses .Values.gpuClass) -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* The file the runner serves: the ConfigMap's one key, mounted read-only. */}}
{{- define "runner.specDir" -}}/etc/plnt/workflow{{- end -}}
{{- define "runner.specFile" -}}spec.yaml{{- end -}}

{{- /*
The runner's backend config file (--backend-config): the backend's name, its limit and its
fallback, which have no flags. Empty when none is set, and then no file is written.
*/ -}}
{{- define "runner.backendFile" -}}backend.json{{- end -}}
{{- define "runner.backendConfig" -}}
{{- $backend := .Values.backend -}}
{{- $config := dict -}}
{{- with $backend.name }}{{- $_ := set $config "name" . -}}{{- end -}}
{{- if gt ($backend.maxConcurrency | int) 0 }}{{- $_ := set $config "maxConcurrency" ($backend.maxConcurrency | int) -}}{{- end -}}
{{- $fallback := $backend.fallback -}}
{{- if $fallback.type -}}
{{- $spare := dict "type" $fallback.type -}}
{{- with $fallback.name }}{{- $_ := set $spare "name" . -}}{{- end -}}
{{- with $fallback.endpoint }}{{- $_ := set $spare "endpoint" . -}}{{- end -}}
{{- with $fallback.model }}{{- $_ := set $spare "model" . -}}{{- end -}}
{{- if gt ($fallback.maxConcurrency | int) 0 }}{{- $_ := set $spare "maxConcurrency" ($fallback.maxConcurrency | int) -}}{{- end -}}
{{- if $fallback.credentials.secretName }}{{- $_ := set $spare "apiKeyEnv" "PLNT_FALLBACK_API_KEY" -}}{{- end -}}
{{- $_ := set $config "fallback" $spare -}}
{{- end -}}
{{- if $config }}{{ toJson $config }}{{ end -}}
{{- end -}}
