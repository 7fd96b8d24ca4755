{{/* Labels on every object: the kustomize manifests' two, plus Helm's. */}}
{{- define "quartermaster.labels" -}}
app.kubernetes.io/name: quartermaster
app.kubernetes.io/part-of: quartermaster
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "quartermaster.image" -}}
{{- if .Values.image.digest -}}
{{ printf "%s:%s@%s" .Values.image.repository .Values.image.tag .Values.image.digest | quote }}
{{- else -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- end }}
{{- end }}

{{/* The policy's ConfigMap: named by a hash of its content, as kustomize's configMapGenerator does. */}}
{{- define "quartermaster.policyYaml" -}}
{{ toYaml .Values.policy }}
{{- end }}
{{- define "quartermaster.policyConfigMap" -}}
quartermaster-policy-{{ include "quartermaster.policyYaml" . | sha256sum | trunc 10 }}
{{- end }}

{{/* Annotations of both webhook configurations (YAML lines, or nothing). */}}
{{- define "quartermaster.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/quartermaster-webhook
{{- end }}
{{- end }}

{{/* The pod security context every Quartermaster pod runs with. */}}
{{- define "quartermaster.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end }}
{{- define "quartermaster.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: ["ALL"]}
{{- end }}

{{/*
A NetworkPolicy rule's `from` (YAML lines) from a values list: a string is a CIDR and becomes an ipBlock, a map
is a NetworkPolicyPeer and is kept as it is. values.schema.json refuses an empty list (it would admit every source).
*/}}
{{- define "quartermaster.networkPeers" -}}
{{- range . }}
{{- if kindIs "string" . }}
- ipBlock: {cidr: {{ . | quote }}}
{{- else }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end }}
