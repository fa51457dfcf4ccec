{{/* Names, labels and the pieces every role's pod shares. */}}

{{- define "intake.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "intake.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "intake.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "intake.labels" -}}
helm.sh/chart: {{ include "intake.chart" . }}
{{ include "intake.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: intake
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "intake.selectorLabels" -}}
app.kubernetes.io/name: {{ include "intake.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one role's objects: (dict "ctx" $ "role" "ingress"). */}}
{{- define "intake.roleLabels" -}}
{{ include "intake.labels" .ctx }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "intake.roleSelectorLabels" -}}
{{ include "intake.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "intake.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "intake.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "intake.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "intake.secretName" -}}
{{- default (include "intake.fullname" .) .Values.secrets.name }}
{{- end }}

{{/* The durable consumer the processors share (pkg/config processor.shard). */}}
{{- define "intake.processorConsumer" -}}
{{- if .Values.processor.shard }}
{{- printf "processor-%s" .Values.processor.shard }}
{{- else -}}
processor
{{- end }}
{{- end }}

{{/* processor.replicas of the config: the most processor pods that run. */}}
{{- define "intake.processorReplicas" -}}
{{- if .Values.processor.keda.enabled }}
{{- .Values.processor.keda.maxReplicaCount | int }}
{{- else }}
{{- .Values.processor.replicaCount | int }}
{{- end }}
{{- end }}

{{/*
The config file: .Values.config with the keys the chart owns set, after
checks that no secret sits in it literally.
*/}}
{{- define "intake.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $nats := dict }}
{{- if hasKey $cfg "nats" }}{{ $nats = $cfg.nats | default dict }}{{ end }}
{{- if and (get $nats "password") (not (hasPrefix "${" (toString (get $nats "password")))) }}
{{- fail "config.nats.password: the chart sets it to ${INTAKE_NATS_PASSWORD}, from secrets.natsPassword; no password in values" }}
{{- end }}
{{- if get $nats "url" }}
{{- fail "config.nats.url: set nats.url (it becomes INTAKE_NATS_URL)" }}
{{- end }}
{{- $_ := set $nats "user" "${INTAKE_NATS_USER}" }}
{{- $_ = set $nats "password" "${INTAKE_NATS_PASSWORD}" }}
{{- $_ = set $cfg "nats" $nats }}
{{- $pg := dict }}
{{- if hasKey $cfg "postgres" }}{{ $pg = $cfg.postgres | default dict }}{{ end }}
{{- if get $pg "url" }}
{{- fail "config.postgres.url: the Postgres URL holds a password; put it in a Secret (secrets.databaseURL)" }}
{{- end }}
{{- $http := dict }}
{{- if hasKey $cfg "http" }}{{ $http = $cfg.http | default dict }}{{ end }}
{{- $_ = set $http "internal_addr" (printf ":%d" (.Values.internalPort | int)) }}
{{- $_ = set $cfg "http" $http }}
{{- $ing := dict }}
{{- if hasKey $cfg "ingress" }}{{ $ing = $cfg.ingress | default dict }}{{ end }}
{{- $_ = set $ing "addr" (printf ":%d" (.Values.ingress.port | int)) }}
{{- $_ = set $cfg "ingress" $ing }}
{{- $proc := dict }}
{{- if hasKey $cfg "processor" }}{{ $proc = $cfg.processor | default dict }}{{ end }}
{{- $_ = set $proc "replicas" (include "intake.processorReplicas" . | int) }}
{{- if .Values.processor.shard }}
{{- $_ = set $proc "shard" .Values.processor.shard }}
{{- end }}
{{- $_ = set $cfg "processor" $proc }}
{{- $api := dict }}
{{- if hasKey $cfg "api" }}{{ $api = $cfg.api | default dict }}{{ end }}
{{- range $i, $t := (get $api "tokens" | default list) }}
{{- if and (get $t "token") (not (contains "${" (toString (get $t "token")))) }}
{{- fail (printf "config.api.tokens[%d].token: give a ${VAR} from secrets.env, or token_sha256; no token in values" $i) }}
{{- end }}
{{- end }}
{{- range $i, $in := (get $cfg "integrations" | default list) }}
{{- range $j, $s := (get $in "secrets" | default list) }}
{{- if not (contains "${" (toString $s)) }}
{{- fail (printf "config.integrations[%d].secrets[%d]: give a ${VAR} from secrets.env; no secret in values" $i $j) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The config ConfigMap's name: "<fullname>-config-<first 10 of the config's sha256>". */}}
{{- define "intake.configMapName" -}}
{{- printf "%s-config-%s" (include "intake.fullname" .) (include "intake.config" . | sha256sum | trunc 10) }}
{{- end }}

{{/*
The pod spec parts of a role: (dict "ctx" $ "role" "ingress" "natsUser" "ingress"
"database" true "values" .Values.ingress "args" (list …) "ports" (list …)).
*/}}
{{- define "intake.podSpec" -}}
{{- $ := .ctx }}
{{- $v := .values -}}
serviceAccountName: {{ get . "serviceAccount" | default (include "intake.serviceAccountName" $) }}
automountServiceAccountToken: false
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
{{- $drain := 0 }}
{{- if get . "drain" }}{{ $drain = $.Values.terminationDrain.seconds | int }}{{ end }}
{{- with $v.terminationGracePeriodSeconds }}
terminationGracePeriodSeconds: {{ add . $drain }}
{{- end }}
containers:
  - name: {{ .role }}
    image: {{ include "intake.image" $ }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    args:
      {{- toYaml .args | nindent 6 }}
      - --config
      - /etc/intake/intake.yaml
      - --log-format
      - {{ $.Values.logFormat }}
      - --log-level
      - {{ $.Values.logLevel }}
    {{- include "intake.env" . | nindent 4 }}
    {{- if gt $drain 0 }}
    # Endpoints drop a terminating pod a moment after it is told to stop:
    # serve on meanwhile, then SIGTERM (the grace period above includes this).
    lifecycle:
      preStop:
        sleep:
          seconds: {{ $drain }}
    {{- end }}
    {{- with .ports }}
    ports:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- if .probes }}
    startupProbe:
      httpGet: {path: /healthz, port: metrics}
      periodSeconds: 2
      failureThreshold: 30
    livenessProbe:
      httpGet: {path: /healthz, port: metrics}
      periodSeconds: 10
      timeoutSeconds: 2
      failureThreshold: 3
    readinessProbe:
      httpGet: {path: /readyz, port: metrics}
      periodSeconds: 5
      timeoutSeconds: 3
      failureThreshold: 2
    {{- end }}
    resources:
      {{- toYaml $v.resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.securityContext | nindent 6 }}
    volumeMounts:
      - name: config
        mountPath: /etc/intake
        readOnly: true
      - name: tmp
        mountPath: /tmp
volumes:
  - name: config
    configMap:
      name: {{ .configMap }}
  - name: tmp
    emptyDir:
      medium: Memory
      sizeLimit: 16Mi
{{- with $.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if and .spread $.Values.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: {{ $.Values.topologySpread.zone }}
    labelSelector:
      matchLabels:
        {{- include "intake.roleSelectorLabels" . | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: {{ $.Values.topologySpread.hostname }}
    labelSelector:
      matchLabels:
        {{- include "intake.roleSelectorLabels" . | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
{{- end }}
{{- end }}

{{/* A role's environment: its NATS identity, the DSN where it uses Postgres, the config's ${VAR}s. */}}
{{- define "intake.env" -}}
{{- $ := .ctx -}}
env:
  - name: INTAKE_NATS_URL
    value: {{ $.Values.nats.url | quote }}
  - name: INTAKE_NATS_USER
    value: {{ get $.Values.nats.users .natsUser | required (printf "nats.users.%s is required" .natsUser) | quote }}
  - name: INTAKE_NATS_PASSWORD
    valueFrom:
      secretKeyRef:
        name: {{ include "intake.secretName" $ }}
        key: {{ get $.Values.secrets.natsPassword .natsUser | required (printf "secrets.natsPassword.%s is required" .natsUser) }}
  {{- if .database }}
  - name: DATABASE_URL
    valueFrom:
      secretKeyRef:
        name: {{ default (include "intake.secretName" $) $.Values.secrets.databaseURL.name }}
        key: {{ $.Values.secrets.databaseURL.key }}
  {{- end }}
  # The Go runtime's soft memory limit, the container's: the GC works harder
  # near it instead of the kernel killing the pod (extraEnv may override it).
  - name: GOMEMLIMIT
    valueFrom:
      resourceFieldRef:
        resource: limits.memory
  {{- with .values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $.Values.secrets.env }}
envFrom:
  {{- range . }}
  - secretRef:
      name: {{ . }}
  {{- end }}
{{- end }}
{{- end }}
