{{/*
One role's Deployment: (dict "ctx" $ "role" … "natsUser" … "database" bool
"values" … "args" … "ports" … "autoscaled" bool "drain" bool); drain: a
preStop sleep of terminationDrain.seconds for the roles behind a Service.
*/}}
{{- define "intake.deployment" -}}
{{- $ := .ctx }}
{{- $v := .values }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "intake.fullname" $ }}-{{ .role }}
  labels:
    {{- include "intake.roleLabels" . | nindent 4 }}
spec:
  {{- if not .autoscaled }}
  replicas: {{ $v.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  selector:
    matchLabels:
      {{- include "intake.roleSelectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "intake.roleSelectorLabels" . | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # A changed config rolls the pods: every role reads it at start only.
        checksum/config: {{ include "intake.roleConfig" (dict "ctx" $ "role" .role) | sha256sum }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      {{- include "intake.podSpec" (merge (dict "probes" true "spread" true "configMap" (include "intake.configMapName" $)) .) | nindent 6 }}
{{- end }}
