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

{{/*
"true" when values carry policyRenders made for the policy in values (the webhook configurations and the
reconciler's confinement are then rendered from them), "" when the policy leaves what they match as the built-in
policy has it (gpu, jobKinds and webhook other than podMutation unset: the generated templates apply). Otherwise
the render fails, saying what to pass: these objects' CEL comes from the policy's GPU patterns and job kinds
(src/manifests/webhooks.ts), which `quartermaster manifests chart-values` renders and the chart cannot.
*/}}
{{- define "quartermaster.policyRenders" -}}
{{- $policy := .Values.policy | default dict -}}
{{- $renders := .Values.policyRenders -}}
{{- $webhook := omit ($policy.webhook | default dict) "podMutation" -}}
{{- $how := printf "quartermaster manifests chart-values --policy my-policy.yaml --namespace %s > qm-values.yaml, then pass -f qm-values.yaml (docs/install.md, \"A policy of your own\")" .Release.Namespace -}}
{{- if $renders -}}
{{- if ne (toJson ($renders.forPolicy | default dict)) (toJson (pick $policy "gpu" "jobKinds" "webhook")) -}}
{{- fail (printf "policyRenders were rendered for another policy than the one in values (its gpu, jobKinds or webhook differ): the webhook configurations would disagree with the policy. Render them again: %s" $how) -}}
{{- end -}}
{{- if ne $renders.namespace .Release.Namespace -}}
{{- fail (printf "policyRenders were rendered for namespace %s, the release is in %s: render them again: %s" $renders.namespace .Release.Namespace $how) -}}
{{- end -}}
true
{{- else if or (hasKey $policy "gpu") (hasKey $policy "jobKinds") $webhook -}}
{{- fail (printf "the policy in values sets gpu, jobKinds or webhook.timeoutSeconds, which change what the webhook configurations and the reconciler's confinement match, and values carry no policyRenders for it: %s" $how) -}}
{{- end -}}
{{- end }}

{{/* An object of policyRenders (.object) with the chart's labels (of .root) and .annotations (YAML lines, or none). */}}
{{- define "quartermaster.renderedObject" -}}
{{- $o := .object -}}
apiVersion: {{ $o.apiVersion }}
kind: {{ $o.kind }}
metadata:
  name: {{ $o.metadata.name }}
  labels:
    {{- include "quartermaster.labels" .root | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
{{ toYaml (omit $o "apiVersion" "kind" "metadata") }}
{{- end }}
