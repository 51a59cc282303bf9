{{/* Names shared by every template of the plnt chart. */}}

{{- define "plnt.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "plnt.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "plnt.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "plnt.labels" -}}
helm.sh/chart: {{ include "plnt.chart" . }}
app.kubernetes.io/name: {{ include "plnt.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: pass (dict "ctx" $ "component" "apiserver"). */}}
{{- define "plnt.selectorLabels" -}}
app.kubernetes.io/name: {{ include "plnt.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "plnt.componentLabels" -}}
{{ include "plnt.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "plnt.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "plnt.apiserver.name" -}}{{ include "plnt.fullname" . }}-apiserver{{- end -}}
{{- define "plnt.worker.name" -}}{{ include "plnt.fullname" . }}-worker{{- end -}}
{{- define "plnt.etcd.name" -}}{{ include "plnt.fullname" . }}-etcd{{- end -}}
{{- define "plnt.etcd.headless" -}}{{ include "plnt.fullname" . }}-etcd-headless{{- end -}}
{{- define "plnt.temporal.name" -}}{{ include "plnt.fullname" . }}-temporal{{- end -}}

{{/* Secret with the API server's serving certificate (ca.crt, tls.crt, tls.key). */}}
{{- define "plnt.servingSecret" -}}{{ include "plnt.fullname" . }}-apiserver-tls{{- end -}}
{{/* Secret with etcd's server/peer certificate, and the one with plnt's etcd client certificate. */}}
{{- define "plnt.etcd.serverSecret" -}}{{ include "plnt.fullname" . }}-etcd-server-tls{{- end -}}
{{- define "plnt.etcd.clientSecret" -}}
{{- if eq .Values.etcd.mode "external" -}}
{{- .Values.etcd.external.secretName -}}
{{- else -}}
{{- include "plnt.fullname" . }}-etcd-client-tls
{{- end -}}
{{- end -}}

{{- define "plnt.apiserver.serviceAccountName" -}}
{{- if .Values.apiserver.serviceAccount.create -}}
{{- default (include "plnt.apiserver.name" .) .Values.apiserver.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.apiserver.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "plnt.worker.serviceAccountName" -}}
{{- if .Values.worker.serviceAccount.create -}}
{{- default (include "plnt.worker.name" .) .Values.worker.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.worker.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* DNS name kube-apiserver dials: <service>.<namespace>.svc */}}
{{- define "plnt.apiserver.serviceDNS" -}}
{{- printf "%s.%s.svc" (include "plnt.apiserver.name" .) .Release.Namespace -}}
{{- end -}}

{{/* Comma-separated etcd client URLs for --etcd-servers. */}}
{{- define "plnt.etcd.servers" -}}
{{- if eq .Values.etcd.mode "external" -}}
{{- join "," .Values.etcd.external.servers -}}
{{- else -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $urls = append $urls (printf "https://%s-%d.%s.%s.svc:2379" (include "plnt.etcd.name" $) $i (include "plnt.etcd.headless" $) $.Release.Namespace) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}
{{- end -}}

{{/* The Temporal frontend address: the dev server's Service, or temporal.address. */}}
{{- define "plnt.temporal.address" -}}
{{- if .Values.temporal.devServer.enabled -}}
{{- printf "%s.%s.svc:7233" (include "plnt.temporal.name" .) .Release.Namespace -}}
{{- else -}}
{{- required "temporal.address is required (HOST:PORT of a Temporal frontend) unless temporal.devServer.enabled=true" .Values.temporal.address -}}
{{- end -}}
{{- end -}}

{{/* Restricted-profile security context of every plnt container. */}}
{{- define "plnt.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "plnt.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
How to reach Temporal, the same for the API server and the worker: the flags, and the
Secrets they name mounted read-only (none with the in-chart dev server).
*/}}
{{- define "plnt.temporal.args" -}}
{{- $t := .Values.temporal -}}
- --temporal-address={{ include "plnt.temporal.address" . }}
- --temporal-namespace={{ $t.namespace }}
{{- if and $t.tls.secretName (not $t.devServer.enabled) }}
{{- if $t.tls.caKey }}
- --temporal-tls-ca-file=/etc/plnt/temporal-tls/{{ $t.tls.caKey }}
{{- end }}
{{- if and $t.tls.certKey $t.tls.keyKey }}
- --temporal-tls-cert-file=/etc/plnt/temporal-tls/{{ $t.tls.certKey }}
- --temporal-tls-key-file=/etc/plnt/temporal-tls/{{ $t.tls.keyKey }}
{{- end }}
{{- end }}
{{- if and $t.apiKey.secretName (not $t.devServer.enabled) }}
- --temporal-api-key-file=/etc/plnt/temporal-api-key/{{ $t.apiKey.key }}
{{- end }}
{{- end }}

{{- define "plnt.temporal.volumeMounts" -}}
{{- $t := .Values.temporal -}}
{{- if and $t.tls.secretName (not $t.devServer.enabled) }}
- name: temporal-tls
  mountPath: /etc/plnt/temporal-tls
  readOnly: true
{{- end }}
{{- if and $t.apiKey.secretName (not $t.devServer.enabled) }}
- name: temporal-api-key
  mountPath: /etc/plnt/temporal-api-key
  readOnly: true
{{- end }}
{{- end }}

{{- define "plnt.temporal.volumes" -}}
{{- $t := .Values.temporal -}}
{{- if and $t.tls.secretName (not $t.devServer.enabled) }}
- name: temporal-tls
  secret:
    secretName: {{ $t.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- if and $t.apiKey.secretName (not $t.devServer.enabled) }}
- name: temporal-api-key
  secret:
    secretName: {{ $t.apiKey.secretName }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{- /* Signed specs and datasets (docs/security.md): each trusted signer's PEM (a public key
       or a CA, from the ConfigMap or Secret it names) mounted into the API server and the
       worker, and the same policy flags on both, so admission and the pull agree. */}}
{{- define "plnt.signing.args" -}}
{{- range .Values.signing.signers }}
- {{ printf "--trusted-signer=%s=/etc/plnt/signers/%s/%s" .name .name .key | quote }}
{{- if .identity }}
- {{ printf "--signer-identity=%s=%s" .name .identity | quote }}
{{- end }}
{{- end }}
{{- range .Values.signing.requireIn }}
- {{ printf "--require-signatures=%s" . | quote }}
{{- end }}
{{- end }}

{{- define "plnt.signing.volumeMounts" -}}
{{- range .Values.signing.signers }}
- name: signer-{{ .name }}
  mountPath: /etc/plnt/signers/{{ .name }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "plnt.signing.volumes" -}}
{{- range .Values.signing.signers }}
- name: signer-{{ .name }}
  {{- if .secret }}
  secret:
    secretName: {{ .secret }}
  {{- else }}
  configMap:
    name: {{ .configMap }}
  {{- end }}
{{- end }}
{{- end }}
