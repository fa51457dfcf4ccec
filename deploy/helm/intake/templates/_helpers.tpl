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

{{/*
"true" when a role runs, else "": (dict "ctx" $ "role" "dispatcher").
dispatcher.enabled is true, false or "auto": on when config.destinations
lists any (a dispatcher without destinations only removes the durables of
destinations no longer configured).
*/}}
{{- define "intake.enabled" -}}
{{- $v := get .ctx.Values .role }}
{{- $e := toString (get $v "enabled") }}
{{- if eq .role "dispatcher" }}
{{- if eq $e "auto" }}
{{- if get (.ctx.Values.config | default dict) "destinations" }}true{{ end }}
{{- else if eq $e "true" }}true
{{- else if ne $e "false" }}
{{- fail (printf "dispatcher.enabled: true, false or auto (on when config.destinations lists any), got %q" $e) }}
{{- end }}
{{- else if eq $e "true" }}true
{{- end }}
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
{{- $pg := dict }}
{{- if hasKey $cfg "postgres" }}{{ $pg = $cfg.postgres | default dict }}{{ end }}
{{- if get $pg "url" }}
{{- fail "config.postgres.url: the Postgres URL holds a password; put it in a Secret (secrets.databaseURL)" }}
{{- end }}
{{- include "intake.secretGuard" (dict "path" "config" "v" $cfg "secret" false) }}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@" (toString .Values.nats.url) }}
{{- fail "nats.url: a password in the URL would be written into every pod's spec (INTAKE_NATS_URL); leave the user information out: each role dials as nats.users.<role> with its password from secrets.natsPassword" }}
{{- end }}
{{- $_ := set $nats "user" "${INTAKE_NATS_USER}" }}
{{- $_ = set $nats "password" "${INTAKE_NATS_PASSWORD}" }}
{{- $_ = set $cfg "nats" $nats }}
{{- $http := dict }}
{{- if hasKey $cfg "http" }}{{ $http = $cfg.http | default dict }}{{ end }}
{{- $_ = set $http "internal_addr" (printf ":%d" (.Values.internalPort | int)) }}
{{- $_ = set $cfg "http" $http }}
{{- $ing := dict }}
{{- if hasKey $cfg "ingress" }}{{ $ing = $cfg.ingress | default dict }}{{ end }}
{{- $_ = set $ing "addr" (printf ":%d" (.Values.ingress.port | int)) }}
{{- with .Values.ingress.trustedProxies }}
{{- if or (get $ing "trusted_proxies") (get $ing "client_ip_header") }}
{{- fail "config.ingress.trusted_proxies / client_ip_header: set ingress.trustedProxies and ingress.clientIPHeader, not both places" }}
{{- end }}
{{- if not $.Values.ingress.clientIPHeader }}
{{- fail "ingress.clientIPHeader: required with ingress.trustedProxies (the header the proxy names the client in)" }}
{{- end }}
{{- $_ = set $ing "trusted_proxies" . }}
{{- $_ = set $ing "client_ip_header" $.Values.ingress.clientIPHeader }}
{{- end }}
{{- $_ = set $cfg "ingress" $ing }}
{{- $proc := dict }}
{{- if hasKey $cfg "processor" }}{{ $proc = $cfg.processor | default dict }}{{ end }}
{{- $_ = set $proc "replicas" (include "intake.processorReplicas" . | int) }}
{{- if .Values.processor.shard }}
{{- $_ = set $proc "shard" .Values.processor.shard }}
{{- end }}
{{- $_ = set $cfg "processor" $proc }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The literal-secret guard: (dict "path" "config" "v" VALUE "secret" false)
walks VALUE's maps and lists and fails, naming the key, where a secret would
be written into the chart's output. Under a secret-shaped key — secret(s),
token(s), password(s), passwd, keys, or one ending in _secret(s), _token,
_password, _passwd, _key (api.tokens[].token, integrations[].secrets[],
envelope.keys[], nats.password …; token_sha256 is a digest, not a secret) — a value must be
${VAR} references and nothing else: no literal, no text beside a ${VAR}, and
no default (${VAR:-…}, or compose's ${VAR-…}), which would sit in the
ConfigMap for whoever reads it. Under any key, the password of a URL
(scheme://user:PASSWORD@…) must be a ${VAR} the same way. The message never
repeats the value.
*/}}
{{- define "intake.secretGuard" -}}
{{- $v := .v }}
{{- $secretKey := "(?i)(^(secrets?|tokens?|passwords?|passwd|keys)$|_(secrets?|token|password|passwd|key)$)" }}
{{- if kindIs "map" $v }}
{{- range $k, $x := $v }}
{{- include "intake.secretGuard" (dict "path" (printf "%s.%s" $.path $k) "v" $x "secret" (regexMatch $secretKey $k)) }}
{{- end }}
{{- else if kindIs "slice" $v }}
{{- range $i, $x := $v }}
{{- include "intake.secretGuard" (dict "path" (printf "%s[%d]" $.path $i) "v" $x "secret" $.secret) }}
{{- end }}
{{- else if not (kindIs "invalid" $v) }}
{{- $s := toString $v }}
{{- $refsOnly := "^(\\$\\{[A-Za-z_][A-Za-z0-9_]*\\})+$" }}
{{- $default := "\\$\\{[A-Za-z_][A-Za-z0-9_]*:?-" }}
{{- $hint := "give ${VAR} alone, its value in a Secret of secrets.env.<role> (no secret in values)" }}
{{- if and .secret (ne $s "") (not (regexMatch $refsOnly $s)) }}
{{- if regexMatch $default $s }}
{{- $ref := regexFind $default $s }}
{{- fail (printf "%s: %s…} has a default, which would be written into the ConfigMap; give %s} alone, its value in a Secret of secrets.env.<role> (no secret in values)" .path $ref (trimSuffix "-" (trimSuffix ":-" $ref))) }}
{{- else if contains "${" $s }}
{{- fail (printf "%s: literal text beside a ${VAR} is a secret in values; %s" .path $hint) }}
{{- else }}
{{- fail (printf "%s: a literal secret; %s%s" .path $hint (ternary ", or token_sha256 (its SHA-256, not a secret)" "" (hasSuffix ".token" .path))) }}
{{- end }}
{{- end }}
{{- $url := "^[A-Za-z][A-Za-z0-9+.-]*://[^/@:]*:([^/@]*)@" }}
{{- if regexMatch $url $s }}
{{- $pass := regexReplaceAll (printf "(?s)%s.*$" $url) $s "${1}" }}
{{- if not (regexMatch $refsOnly $pass) }}
{{- fail (printf "%s: the URL's password is %s; give it as ${VAR} alone, from a Secret (no password in values)" .path (ternary "a ${VAR} with a default, which would be written out with it" "written into values" (regexMatch $default $pass))) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
One role's part of the config: (dict "ctx" $ "role" …). Each role is given
only the secrets it loads (pkg/config LoadFor): ingress no api.tokens, the
processor neither api.tokens nor integrations[].secrets, the replayer no
integrations[].secrets and no envelope.keys, the dispatcher only
destinations[].secrets (no other role has those), migrate none.
*/}}
{{- define "intake.roleConfig" -}}
{{- $cfg := include "intake.config" .ctx | fromYaml }}
{{- if ne .role "replayer" }}
{{- with $cfg.api }}{{ $_ := unset . "tokens" }}{{ end }}
{{- end }}
{{- if ne .role "ingress" }}
{{- range $cfg.integrations | default list }}{{ $_ := unset . "secrets" }}{{ end }}
{{- end }}
{{- if not (has .role (list "ingress" "processor")) }}
{{- if hasKey $cfg "envelope" }}{{ with $cfg.envelope }}{{ $_ := unset . "keys" }}{{ end }}{{ end }}
{{- end }}
{{- if ne .role "dispatcher" }}
{{- range get $cfg "destinations" | default list }}{{ $_ := unset . "secrets" }}{{ end }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The data of the config ConfigMap: one key per role, "<role>.yaml". */}}
{{- define "intake.configFiles" -}}
{{- range $role := list "ingress" "processor" "replayer" "dispatcher" }}
{{ $role }}.yaml: |
  {{- include "intake.roleConfig" (dict "ctx" $ "role" $role) | nindent 2 }}
{{- end }}
{{- end }}

{{/* The config ConfigMap's name: "<fullname>-config-<first 10 of its data's sha256>". */}}
{{- define "intake.configMapName" -}}
{{- printf "%s-config-%s" (include "intake.fullname" .) (include "intake.configFiles" . | sha256sum | trunc 10) }}
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
      # The role's own part only: no other role's secrets, no other file.
      items:
        - {key: {{ .role }}.yaml, path: intake.yaml}
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

{{/*
secrets.env as a map of role to Secret names; the list of earlier charts
(every Secret to every pod) is refused with how to split it.
*/}}
{{- define "intake.secretEnv" -}}
{{- $env := .Values.secrets.env | default dict }}
{{- if not (kindIs "map" $env) }}
{{- fail "secrets.env: a list gave every Secret to every pod; since Intake 0.17 it is a map of role to Secrets: secrets.env.ingress (the integrations' signing secrets), secrets.env.replayer (the operator tokens), secrets.env.processor and secrets.env.migrate (neither, usually []). Split your Secret in two (docs/operations.md, \"Secrets per role\")" }}
{{- end }}
{{- range $role, $_ := $env }}
{{- if not (has $role (list "ingress" "processor" "replayer" "dispatcher" "migrate")) }}
{{- fail (printf "secrets.env.%s: not a role (ingress, processor, replayer, dispatcher, migrate)" $role) }}
{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/* A role's environment: its NATS identity, the DSN where it uses Postgres, its part of the config's ${VAR}s. */}}
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
{{- with get (include "intake.secretEnv" $ | fromYaml) .role }}
envFrom:
  {{- range . }}
  - secretRef:
      name: {{ . }}
  {{- end }}
{{- end }}
{{- end }}
