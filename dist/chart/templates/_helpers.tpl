{{/* The prefix of every object's name: placement-guard unless overridden. */}}
{{- define "placement-guard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* The manager's ServiceAccount. */}}
{{- define "placement-guard.serviceAccount" -}}
{{- include "placement-guard.name" . }}-controller-manager
{{- end -}}

{{/* Labels of every object. */}}
{{- define "placement-guard.labels" -}}
app.kubernetes.io/name: {{ include "placement-guard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The manager's pods, as config/default selects them. */}}
{{- define "placement-guard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "placement-guard.name" . }}
control-plane: controller-manager
{{- end -}}

{{- define "placement-guard.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The Service the API server calls the admission check at. */}}
{{- define "placement-guard.webhookService" -}}
{{- include "placement-guard.name" . }}-webhook-service
{{- end -}}

{{/*
Namespaces the admission check is never sent, besides kube-system and the
release's: admission.excludeNamespaces, and with failurePolicy Fail
cert-manager's, which must be able to roll out while the check waits for
the certificate it issues.
*/}}
{{- define "placement-guard.excludedNamespaces" -}}
{{- $names := .Values.admission.excludeNamespaces -}}
{{- if eq .Values.admission.failurePolicy "Fail" -}}
{{- $names = append $names .Values.admission.certManager.namespace -}}
{{- end -}}
{{- range $names | uniq }}
- {{ . }}
{{- end -}}
{{- end -}}
