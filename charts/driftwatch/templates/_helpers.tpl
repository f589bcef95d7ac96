{{/* The release's name for driftwatch's objects. */}}
{{- define "driftwatch.fullname" -}}
{{- if contains "driftwatch" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-driftwatch" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "driftwatch.labels" -}}
app.kubernetes.io/name: driftwatch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "driftwatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "driftwatch.configMap" -}}
{{ .Values.existingConfigMap | default (include "driftwatch.fullname" .) }}
{{- end -}}

{{- define "driftwatch.tokenSecret" -}}
{{ .Values.admin.token.existingSecret | default (printf "%s-admin-token" (include "driftwatch.fullname" .)) }}
{{- end -}}

{{/* Pod Security "restricted", for the pod. */}}
{{- define "driftwatch.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
seccompProfile: { type: RuntimeDefault }
{{- end -}}

{{/* Pod Security "restricted", for driftwatch's container. */}}
{{- define "driftwatch.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
seccompProfile: { type: RuntimeDefault }
capabilities: { drop: [ALL] }
{{- end -}}

{{/* The probes: a large spec takes seconds to compile, up to 60 s before liveness counts. */}}
{{- define "driftwatch.probes" -}}
startupProbe:
  httpGet: { path: /readyz, port: admin }
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet: { path: /healthz, port: admin }
  periodSeconds: 10
readinessProbe:
  httpGet: { path: /readyz, port: admin }
  periodSeconds: 5
{{- end -}}

{{/* Environment both ways share: the admin port and token, traces, the operator's own. */}}
{{- define "driftwatch.env" -}}
- name: DRIFTWATCH_ADMIN_LISTEN
  value: {{ printf "0.0.0.0:%v" .Values.admin.port | quote }}
- name: DRIFTWATCH_ADMIN_TOKEN_FILE
  value: /etc/driftwatch-admin/token
{{- with .Values.traces }}
{{- if .endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
{{- end }}
{{- if .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .sampler | quote }}
{{- end }}
{{- if .samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .samplerArg | quote }}
{{- end }}
{{- if .resourceAttributes }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ .resourceAttributes | quote }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/*
driftwatch beside an MCP server: a native sidecar (an init container with restartPolicy:
Always, Kubernetes 1.29 and later), started and ready before the MCP server starts, stopped
after it. Include it under your pod's `initContainers:`:
  initContainers:
    {{- include "driftwatch.sidecar" .Subcharts.driftwatch | nindent 4 }}
and `driftwatch.volumes` under `volumes:`. The MCP server's API base URL is
http://<sidecar.listen>.
*/}}
{{- define "driftwatch.sidecar" -}}
- name: driftwatch
  image: {{ include "driftwatch.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  restartPolicy: Always
  args: ["serve", "--config", "/etc/driftwatch/driftwatch.toml"]
  env:
    {{- with .Values.sidecar.upstream }}
    - name: DRIFTWATCH_PROXY_UPSTREAM
      value: {{ . | quote }}
    {{- end }}
    - name: DRIFTWATCH_PROXY_LISTEN
      value: {{ .Values.sidecar.listen | quote }}
    {{- include "driftwatch.env" . | nindent 4 }}
  ports:
    - { name: admin, containerPort: {{ .Values.admin.port }} }
  volumeMounts:
    - { name: driftwatch, mountPath: /etc/driftwatch, readOnly: true }
    - { name: driftwatch-admin-token, mountPath: /etc/driftwatch-admin, readOnly: true }
  {{- include "driftwatch.probes" . | nindent 2 }}
  resources:
    {{- toYaml .Values.sidecar.resources | nindent 4 }}
  securityContext:
    {{- include "driftwatch.securityContext" . | nindent 4 }}
{{- end -}}

{{/* The volumes `driftwatch.sidecar` mounts: the config and spec, the admin token. */}}
{{- define "driftwatch.volumes" -}}
- name: driftwatch
  configMap:
    name: {{ include "driftwatch.configMap" . }}
- name: driftwatch-admin-token
  secret:
    secretName: {{ include "driftwatch.tokenSecret" . }}
    defaultMode: 0400
{{- end -}}

{{- define "driftwatch.forwardSelector" -}}
app.kubernetes.io/name: driftwatch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: forward-proxy
{{- end -}}
