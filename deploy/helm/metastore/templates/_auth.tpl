{{/*
Identities of the api pods beyond the per-scope token files (values auth.namedTokens and
auth.oidc): the named tokens' file (a ConfigMap) and their Secrets' keys in one projected
volume, and the OIDC issuer's variables and CA volume. Each helper renders nothing when its
values are off, so the api Deployment includes them unconditionally.
*/}}

{{/* "true" when named tokens are configured (and auth is on). */}}
{{- define "metastore.namedTokens" -}}
{{- if and .Values.auth.enabled .Values.auth.namedTokens -}}true{{- end -}}
{{- end -}}

{{/* The METASTORE_TOKENS_FILE JSON: each token's Secret key is a file beside it. */}}
{{- define "metastore.namedTokensJson" -}}
{{- $entries := list -}}
{{- range .Values.auth.namedTokens -}}
{{- $entries = append $entries (dict "name" .name "scopes" .scopes "groups" (.groups | default list) "act_for_users" (.actForUsers | default false) "token_file" (printf "/etc/metastore/named-tokens/%s" .name)) -}}
{{- end -}}
{{- toPrettyJson $entries -}}
{{- end -}}

{{/* "true" when users' OIDC JWTs are accepted (and auth is on). Values of charts before
0.4.0 (helm upgrade --reuse-values) have no auth.oidc: off. */}}
{{- define "metastore.oidc" -}}
{{- if and .Values.auth.enabled (dig "oidc" "enabled" false .Values.auth) -}}
{{- $p := .Values.auth.oidc.provider -}}
{{- if not $p.hostname -}}
{{- fail "auth.oidc.enabled needs auth.oidc.provider.hostname (the AuthenticationClass's hostname)" -}}
{{- end -}}
{{- if not .Values.auth.oidc.audience -}}
{{- fail "auth.oidc.enabled needs auth.oidc.audience (the `aud` of the JWTs meant for metastore)" -}}
{{- end -}}
{{- if hasKey (($p.tls | default dict).verification | default dict) "none" -}}
{{- fail "auth.oidc.provider.tls.verification.none: metastore always checks the issuer's certificate (use caCert.webPki or caCert.secretClass)" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The CA's SecretClass of the provider's TLS, if any. */}}
{{- define "metastore.oidcCaSecretClass" -}}
{{- $tls := dig "oidc" "provider" "tls" nil .Values.auth | default dict -}}
{{- dig "verification" "server" "caCert" "secretClass" "" $tls -}}
{{- end -}}

{{/* The issuer URL, as Stackable builds it from an AuthenticationClass: scheme, hostname, port, rootPath. */}}
{{- define "metastore.oidcIssuer" -}}
{{- $p := .Values.auth.oidc.provider -}}
{{- $scheme := ternary "https" "http" (not (empty $p.tls)) -}}
{{- $port := $p.port | default (ternary 443 80 (eq $scheme "https")) -}}
{{- $root := printf "/%s" (trimPrefix "/" ($p.rootPath | default "/")) -}}
{{- printf "%s://%s:%d%s" $scheme $p.hostname (int $port) (trimSuffix "/" $root) -}}
{{- end -}}

{{- define "metastore.authEnv" -}}
{{- if include "metastore.namedTokens" . }}
- name: METASTORE_TOKENS_FILE
  value: /etc/metastore/named-tokens/tokens.json
{{- end }}
{{- if include "metastore.oidc" . }}
{{- $o := .Values.auth.oidc }}
- name: METASTORE_OIDC_ISSUER
  value: {{ include "metastore.oidcIssuer" . | quote }}
- name: METASTORE_OIDC_AUDIENCE
  value: {{ $o.audience | quote }}
- name: METASTORE_OIDC_PRINCIPAL_CLAIM
  value: {{ $o.provider.principalClaim | default "preferred_username" | quote }}
- name: METASTORE_OIDC_GROUPS_CLAIM
  value: {{ $o.groupsClaim | default "groups" | quote }}
- name: METASTORE_OIDC_SCOPES
  value: {{ join "," ($o.scopes | default (list "read")) | quote }}
{{- if include "metastore.oidcCaSecretClass" . }}
- name: METASTORE_OIDC_CA_FILE
  value: /etc/metastore/oidc-ca/ca.crt
{{- end }}
{{- end }}
{{- end -}}

{{- define "metastore.authVolumeMounts" -}}
{{- if include "metastore.namedTokens" . }}
- name: named-tokens
  mountPath: /etc/metastore/named-tokens
  readOnly: true
{{- end }}
{{- if and (include "metastore.oidc" .) (include "metastore.oidcCaSecretClass" .) }}
- name: oidc-ca
  mountPath: /etc/metastore/oidc-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "metastore.authVolumes" -}}
{{- if include "metastore.namedTokens" . }}
- name: named-tokens
  projected:
    {{- /* Group-readable via fsGroup; world-readable when the platform assigns no fsGroup. */}}
    defaultMode: {{ ternary 0440 0444 (not (empty .Values.securityContext.fsGroup)) }}
    sources:
      - configMap:
          name: {{ include "metastore.fullname" . }}-named-tokens
          items:
            - key: tokens.json
              path: tokens.json
      {{- range .Values.auth.namedTokens }}
      - secret:
          name: {{ .secretName }}
          items:
            - key: {{ .secretKey | default "token" }}
              path: {{ .name }}
      {{- end }}
{{- end }}
{{- with include "metastore.oidcCaSecretClass" . }}
{{- if include "metastore.oidc" $ }}
{{- /* The SecretClass's CA (ca.crt), as Stackable products mount an AuthenticationClass's. */}}
- name: oidc-ca
  ephemeral:
    volumeClaimTemplate:
      metadata:
        annotations:
          secrets.stackable.tech/class: {{ . | quote }}
          secrets.stackable.tech/format: tls-pem
      spec:
        storageClassName: secrets.stackable.tech
        accessModes:
          - ReadWriteOnce
        resources:
          requests:
            storage: "1"
{{- end }}
{{- end }}
{{- end -}}

{{/* Rolls the api pods when the named tokens' file changes. */}}
{{- define "metastore.authChecksum" -}}
{{- if include "metastore.namedTokens" . -}}
checksum/named-tokens: {{ include "metastore.namedTokensJson" . | sha256sum }}
{{- end -}}
{{- end -}}
