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
