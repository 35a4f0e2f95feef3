{{/* vim: set filetype=mustache: */}}

{{/* Chart name, overridable. */}}
{{- define "metastore.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified app name; truncated so that "-projector-metrics" etc. still fit in 63 characters. */}}
{{- define "metastore.fullname" -}}
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

{{/* Chart label value. */}}
{{- define "metastore.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels. Call with (dict "ctx" $ "component" "api"). */}}
{{- define "metastore.selectorLabels" -}}
app.kubernetes.io/name: {{ include "metastore.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Common labels. Call with (dict "ctx" $ "component" "api"); component may be empty. */}}
{{- define "metastore.labels" -}}
{{ include "metastore.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Values.image.tag | default .ctx.Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: metastore
helm.sh/chart: {{ include "metastore.chart" .ctx }}
stackable.tech/vendor: Stackable
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Image reference: repository:tag or repository@digest. */}}
{{- define "metastore.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "metastore.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "metastore.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Names of the Secrets. */}}
{{- define "metastore.dbSecretName" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "metastore.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "metastore.dbSecretKey" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecretPasswordKey -}}
{{- else -}}
password
{{- end -}}
{{- end -}}

{{/* Whether the pods get a PGPASSWORD at all. */}}
{{- define "metastore.hasDbPassword" -}}
{{- if or .Values.database.existingSecret .Values.database.password -}}true{{- end -}}
{{- end -}}

{{- define "metastore.tokensSecretName" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else -}}
{{- printf "%s-tokens" (include "metastore.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The database role of a component ("api", "projector" or "migrate"): database.<component>.user,
else database.user. Call with (dict "ctx" $ "component" "api").
*/}}
{{- define "metastore.dbUser" -}}
{{- $db := .ctx.Values.database -}}
{{- $own := (index $db (.component | default "-")) | default dict -}}
{{- $own.user | default $db.user -}}
{{- end -}}

{{/* libpq URL of the primary for a component, without the password; call as metastore.dbUser. */}}
{{- define "metastore.databaseUrl" -}}
{{- $db := .ctx.Values.database -}}
{{- include "metastore.databaseUrlOf" (dict "ctx" .ctx "host" $db.host "port" $db.port "user" (include "metastore.dbUser" .)) -}}
{{- end -}}

{{/* libpq URL of the read replica (the API's role, the primary's password and TLS settings). */}}
{{- define "metastore.readDatabaseUrl" -}}
{{- $r := .Values.database.readReplica -}}
{{- include "metastore.databaseUrlOf" (dict "ctx" . "host" $r.host "port" ($r.port | default .Values.database.port) "user" (include "metastore.dbUser" (dict "ctx" . "component" "api"))) -}}
{{- end -}}

{{/* libpq sslmode: database.sslmode, else verify-full with a CA to verify the server by, else prefer. */}}
{{- define "metastore.sslmode" -}}
{{- .Values.database.sslmode | default (ternary "verify-full" "prefer" (not (empty .Values.database.caSecret.name))) -}}
{{- end -}}

{{/* libpq URL of a server of the database; call with (dict "ctx" $ "host" h "port" p "user" u). */}}
{{- define "metastore.databaseUrlOf" -}}
{{- $db := .ctx.Values.database -}}
{{- $params := list (printf "sslmode=%s" (include "metastore.sslmode" .ctx)) -}}
{{- if $db.caSecret.name -}}
{{- $params = append $params "sslrootcert=/etc/metastore/db-ca/ca.crt" -}}
{{- end -}}
{{- range $k, $v := $db.extraParams -}}
{{- $params = append $params (printf "%s=%s" $k (toString $v | urlquery)) -}}
{{- end -}}
{{- printf "postgresql://%s@%s:%d/%s?%s" (.user | urlquery) .host (int .port) ($db.name | urlquery) (join "&" $params) -}}
{{- end -}}

{{/* Pod security context shared by all pods. */}}
{{- define "metastore.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.securityContext.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.securityContext.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
{{- with .Values.securityContext.fsGroup }}
fsGroup: {{ . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container security context shared by all containers. */}}
{{- define "metastore.containerSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.securityContext.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.securityContext.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
Environment shared by every container: database connection and logging. Call with
(dict "ctx" $ "component" "api"); "dbSecretName" reads the chart-managed password from
another Secret (the migration hook's copy).
*/}}
{{- define "metastore.commonEnv" -}}
{{- $ctx := .ctx -}}
{{- $db := $ctx.Values.database -}}
{{- $own := (index $db (.component | default "-")) | default dict -}}
- name: METASTORE_DATABASE_URL
  value: {{ include "metastore.databaseUrl" . | quote }}
{{- if $own.existingSecret }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $own.existingSecret }}
      key: {{ $db.existingSecretPasswordKey }}
{{- else if include "metastore.hasDbPassword" $ctx }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .dbSecretName | default (include "metastore.dbSecretName" $ctx) }}
      key: {{ include "metastore.dbSecretKey" $ctx }}
{{- end }}
- name: METASTORE_LOG_LEVEL
  value: {{ $ctx.Values.config.logLevel | quote }}
- name: METASTORE_LOG_FORMAT
  value: {{ $ctx.Values.config.logFormat | quote }}
- name: PYTHONUNBUFFERED
  value: "1"
{{- end -}}

{{/* Extra environment, last so that it can override the chart's variables. Call with (dict "ctx" $ "extra" <list>). */}}
{{- define "metastore.extraEnv" -}}
{{- $all := concat (.ctx.Values.config.extraEnv | default list) (.extra | default list) -}}
{{- if $all -}}
{{- toYaml $all -}}
{{- end -}}
{{- end -}}

{{/* Volumes shared by every pod: a writable /tmp and the optional database CA. */}}
{{- define "metastore.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if .Values.database.caSecret.name }}
- name: db-ca
  secret:
    secretName: {{ .Values.database.caSecret.name }}
    defaultMode: 0444
    items:
      - key: {{ .Values.database.caSecret.key }}
        path: ca.crt
{{- end }}
{{- end -}}

{{- define "metastore.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.database.caSecret.name }}
- name: db-ca
  mountPath: /etc/metastore/db-ca
  readOnly: true
{{- end }}
{{- end -}}

{{/* Probe timings; call with a probe values dict. */}}
{{- define "metastore.probeTimings" -}}
initialDelaySeconds: {{ .initialDelaySeconds }}
periodSeconds: {{ .periodSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
failureThreshold: {{ .failureThreshold }}
{{- end -}}

{{/* "true" when the pods serve TLS (a secret-operator certificate or an existing Secret). */}}
{{- define "metastore.tls" -}}
{{- if and .Values.tls.secretClass .Values.tls.existingSecret -}}
{{- fail "tls: set either secretClass or existingSecret, not both" -}}
{{- end -}}
{{- if or .Values.tls.secretClass .Values.tls.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* The scheme of the api and projector ports: https with TLS, else http. */}}
{{- define "metastore.scheme" -}}
{{- ternary "https" "http" (eq (include "metastore.tls" .) "true") -}}
{{- end -}}

{{/* Name of the API's port (container, Service, Ingress, ServiceMonitor): its scheme. */}}
{{- define "metastore.apiPortName" -}}
{{- include "metastore.scheme" . -}}
{{- end -}}

{{/* Where the certificate is mounted, and the variables that point the process at it. */}}
{{- define "metastore.tlsEnv" -}}
{{- if include "metastore.tls" . -}}
- name: METASTORE_TLS_CERT_FILE
  value: /etc/metastore/tls/tls.crt
- name: METASTORE_TLS_KEY_FILE
  value: /etc/metastore/tls/tls.key
{{- end }}
{{- end -}}

{{- define "metastore.tlsVolumeMount" -}}
{{- if include "metastore.tls" . -}}
- name: tls
  mountPath: /etc/metastore/tls
  readOnly: true
{{- end }}
{{- end -}}

{{/*
The certificate volume. With tls.secretClass: an ephemeral volume the Stackable
secret-operator fills with a certificate for the pod and its Service (and the listener's
addresses when given a listener volume), in PEM; the secret-operator marks the pod to be
evicted before the certificate expires, and the commons-operator evicts it within the
PodDisruptionBudget. Call with (dict "ctx" $ "service" "<Service name>" "listener" "<volume>").
*/}}
{{- define "metastore.tlsVolume" -}}
{{- $tls := .ctx.Values.tls -}}
{{- if $tls.secretClass -}}
- name: tls
  ephemeral:
    volumeClaimTemplate:
      metadata:
        annotations:
          secrets.stackable.tech/class: {{ $tls.secretClass | quote }}
          {{- $scope := list "pod" (printf "service=%s" .service) }}
          {{- if .listener }}
          {{- $scope = append $scope (printf "listener-volume=%s" .listener) }}
          {{- end }}
          secrets.stackable.tech/scope: {{ join "," $scope | quote }}
          secrets.stackable.tech/format: tls-pem
          {{- with $tls.certLifetime }}
          secrets.stackable.tech/backend.autotls.cert.lifetime: {{ . | quote }}
          {{- end }}
      spec:
        storageClassName: secrets.stackable.tech
        accessModes:
          - ReadWriteOnce
        resources:
          requests:
            storage: "1"
{{- else if $tls.existingSecret -}}
- name: tls
  secret:
    secretName: {{ $tls.existingSecret }}
    {{- /* Group-readable via fsGroup; world-readable when the platform assigns no fsGroup. */}}
    defaultMode: {{ ternary 0440 0444 (not (empty .ctx.Values.securityContext.fsGroup)) }}
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end -}}
