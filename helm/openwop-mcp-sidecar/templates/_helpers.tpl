{{/*
Every helper takes this chart's own root context. From a host chart that has this chart as a
dependency, that is `.Subcharts.<name or alias>` (Helm >= 3.7), so names, values and the image
tag come out exactly as they do in this chart's own ConfigMap and Secret.
*/}}

{{/*
The base name is spelled out rather than taken from .Chart.Name: a host chart that depends on
this chart under an alias (mcpSidecar) would otherwise turn it into object names with capitals,
which Kubernetes refuses.
*/}}
{{- define "openwop-mcp-sidecar.name" -}}
{{- default "openwop-mcp-sidecar" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "openwop-mcp-sidecar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "openwop-mcp-sidecar.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "openwop-mcp-sidecar.chart" -}}
{{- printf "%s-%s" (include "openwop-mcp-sidecar.name" .) .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "openwop-mcp-sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "openwop-mcp-sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "openwop-mcp-sidecar.labels" -}}
helm.sh/chart: {{ include "openwop-mcp-sidecar.chart" . }}
{{ include "openwop-mcp-sidecar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: mcp-gateway
app.kubernetes.io/part-of: openwop
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "openwop-mcp-sidecar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "openwop-mcp-sidecar.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "openwop-mcp-sidecar.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the requestState key, and the key inside it. */}}
{{- define "openwop-mcp-sidecar.stateKeySecretName" -}}
{{- if .Values.stateKey.existingSecret -}}
{{- .Values.stateKey.existingSecret -}}
{{- else -}}
{{- printf "%s-state-key" (include "openwop-mcp-sidecar.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "openwop-mcp-sidecar.stateKeySecretKey" -}}
{{- if .Values.stateKey.existingSecret -}}
{{- .Values.stateKey.existingSecretKey -}}
{{- else -}}
state-key
{{- end -}}
{{- end -}}

{{- define "openwop-mcp-sidecar.configMapName" -}}
{{- printf "%s-config" (include "openwop-mcp-sidecar.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Where the ConfigMap is mounted; the image's CMD reads the same path. */}}
{{- define "openwop-mcp-sidecar.configDir" -}}/etc/openwop-mcp-sidecar{{- end -}}

{{- define "openwop-mcp-sidecar.scheme" -}}
{{- if .Values.tls.enabled -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* Port name: "https" with TLS so that meshes and the ServiceMonitor see the protocol. */}}
{{- define "openwop-mcp-sidecar.portName" -}}
{{- if .Values.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/*
The sidecar's configuration file: what the chart derives (listen, upstream.url, tls) with the
`config` value merged over it. Rendered once here so that the ConfigMap and the checksum
annotation can never disagree.
*/}}
{{- define "openwop-mcp-sidecar.config" -}}
{{- $cfg := dict "listen" (printf "0.0.0.0:%d" (int .Values.containerPort)) "upstream" (dict "url" .Values.upstream.url) -}}
{{- $cfg = mergeOverwrite $cfg (deepCopy (default (dict) .Values.config)) -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $cfg "tls" (dict "certFile" (printf "%s/%s" (trimSuffix "/" .Values.tls.mountPath) .Values.tls.certKey) "keyFile" (printf "%s/%s" (trimSuffix "/" .Values.tls.mountPath) .Values.tls.keyKey)) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Pod annotations a host chart copies onto its pod template in sidecar mode. */}}
{{- define "openwop-mcp-sidecar.podAnnotations" -}}
checksum/openwop-mcp-sidecar-config: {{ include "openwop-mcp-sidecar.config" . | sha256sum }}
{{- if and .Values.stateKey.value (not .Values.stateKey.existingSecret) }}
checksum/openwop-mcp-sidecar-state-key: {{ .Values.stateKey.value | sha256sum }}
{{- end }}
{{- end -}}

{{/*
Checks that no schema can express; each stops the render with a message naming the value.
*/}}
{{- define "openwop-mcp-sidecar.validate" -}}
{{- if not (has .Values.mode (list "standalone" "sidecar")) -}}
{{- fail (printf "mode must be standalone or sidecar, not %q" .Values.mode) -}}
{{- end -}}
{{- $cfg := default (dict) .Values.config -}}
{{- if hasKey $cfg "listen" -}}
{{- fail "config.listen is set by the chart from containerPort (probes, Service and NetworkPolicy follow it): set containerPort instead" -}}
{{- end -}}
{{- if hasKey $cfg "tls" -}}
{{- fail "config.tls is set by the chart from the tls values (it mounts the Secret): use tls.enabled and tls.secretName" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName (the Secret with the certificate and key)" -}}
{{- end -}}
{{- if hasPrefix (printf "%s/" (include "openwop-mcp-sidecar.configDir" .)) (printf "%s/" (trimSuffix "/" .Values.tls.mountPath)) -}}
{{- fail (printf "tls.mountPath must not be inside %s, where the ConfigMap is mounted" (include "openwop-mcp-sidecar.configDir" .)) -}}
{{- end -}}
{{- if and .Values.stateKey.value (lt (len .Values.stateKey.value) 16) -}}
{{- fail "stateKey.value must be at least 16 bytes (the sidecar refuses shorter requestState keys)" -}}
{{- end -}}
{{- if and (eq .Values.mode "standalone") (not .Values.upstream.url) (not (dig "upstream" "url" "" $cfg)) -}}
{{- fail "upstream.url is required: the host's Service URL, e.g. http://my-host.my-namespace.svc:8787" -}}
{{- end -}}
{{- $drainMs := int (dig "shutdown" "drainTimeoutMs" 30000 $cfg) -}}
{{- $lameDuckMs := int (dig "shutdown" "lameDuckMs" 6000 $cfg) -}}
{{- $graceMs := mul (int .Values.terminationGracePeriodSeconds) 1000 -}}
{{- $preStopMs := mul (int .Values.preStopSleepSeconds) 1000 -}}
{{- if and (eq .Values.mode "standalone") (le $graceMs (add $drainMs $preStopMs $lameDuckMs)) -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + shutdown.lameDuckMs + shutdown.drainTimeoutMs (%d ms), or the kubelet kills requests still draining" (int .Values.terminationGracePeriodSeconds) (add $drainMs $preStopMs $lameDuckMs)) -}}
{{- end -}}
{{- end -}}

{{/*
The sidecar's container. Standalone mode puts it in its own Deployment; in sidecar mode a host
chart includes it in its pod spec:

  initContainers:            # sidecar.native: true (Kubernetes >= 1.29)
    {{- include "openwop-mcp-sidecar.container" .Subcharts.mcpSidecar | nindent 8 }}
  # or, with sidecar.native: false, under containers:

It renders one list item. As a native sidecar it carries restartPolicy: Always, which is what
makes an initContainers entry run alongside the pod's containers rather than before them.
*/}}
{{- define "openwop-mcp-sidecar.container" -}}
{{- include "openwop-mcp-sidecar.validate" . -}}
{{- $scheme := include "openwop-mcp-sidecar.scheme" . -}}
{{- $port := include "openwop-mcp-sidecar.portName" . -}}
- name: openwop-mcp-sidecar
  image: {{ include "openwop-mcp-sidecar.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if and (eq .Values.mode "sidecar") .Values.sidecar.native }}
  restartPolicy: Always
  {{- end }}
  {{- /* The image's CMD, minus --listen: the configuration carries listen from containerPort. */}}
  args:
    - serve
    - --config
    - {{ include "openwop-mcp-sidecar.configDir" . }}/sidecar.yaml
  ports:
    - name: {{ $port }}
      containerPort: {{ .Values.containerPort }}
      protocol: TCP
  env:
    - name: OPENWOP_SIDECAR_STATE_KEY
      valueFrom:
        secretKeyRef:
          name: {{ include "openwop-mcp-sidecar.stateKeySecretName" . }}
          key: {{ include "openwop-mcp-sidecar.stateKeySecretKey" . }}
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: {{ $port }}
      scheme: {{ $scheme }}
    {{- toYaml .Values.livenessProbe | nindent 4 }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: {{ $port }}
      scheme: {{ $scheme }}
    {{- toYaml .Values.readinessProbe | nindent 4 }}
  {{- if gt (int .Values.preStopSleepSeconds) 0 }}
  lifecycle:
    preStop:
      sleep:
        seconds: {{ .Values.preStopSleepSeconds }}
  {{- end }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    {{- /* The directory, not a subPath: only a directory mount sees ConfigMap updates (the
    kubelet swaps a symlink), which the sidecar's config file watch relies on. */}}
    - name: openwop-mcp-sidecar-config
      mountPath: {{ include "openwop-mcp-sidecar.configDir" . }}
      readOnly: true
    {{- /* The root filesystem is read-only; a small writable /tmp for anything that wants one. */}}
    - name: openwop-mcp-sidecar-tmp
      mountPath: /tmp
    {{- if .Values.tls.enabled }}
    - name: openwop-mcp-sidecar-tls
      mountPath: {{ .Values.tls.mountPath }}
      readOnly: true
    {{- end }}
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
The volumes the container mounts, as list items for the pod's volumes. Names are prefixed so
they cannot collide with the host's own volumes.
*/}}
{{- define "openwop-mcp-sidecar.volumes" -}}
- name: openwop-mcp-sidecar-config
  configMap:
    name: {{ include "openwop-mcp-sidecar.configMapName" . }}
- name: openwop-mcp-sidecar-tmp
  emptyDir:
    medium: Memory
    sizeLimit: 16Mi
{{- if .Values.tls.enabled }}
- name: openwop-mcp-sidecar-tls
  secret:
    secretName: {{ .Values.tls.secretName }}
    defaultMode: 0444
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}
