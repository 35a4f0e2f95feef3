{{- /* Authorization (values `authorization`): decisions asked of OPA when
`authorization.opa.configMapName` names its discovery ConfigMap, else from the values'
policy file when `authorization.policy` has rules, else none (everything allowed). Each
value has a default here, for `helm upgrade --reuse-values` from a chart without them. */ -}}

{{- define "metastore.authz" -}}
{{- $a := .Values.authorization | default dict -}}
{{- $opa := $a.opa | default dict -}}
{{- toJson (dict
  "policy" ($a.policy | default dict)
  "opa" ($opa.configMapName | default "")
  "package" ($opa.package | default "metastore")
  "tlsSecretClass" ($opa.tlsSecretClass | default "")
  "defaultPolicy" (ternary true $opa.defaultPolicy (kindIs "invalid" $opa.defaultPolicy))
  "userInfoFetcher" ($opa.userInfoFetcher | default false)
  "timeoutSeconds" ($opa.timeoutSeconds | default 2)
  "cacheSeconds" ($opa.cacheSeconds | default 30)
) -}}
{{- end -}}

{{- /* "opa", "policy" or "" */ -}}
{{- define "metastore.authzSource" -}}
{{- $z := include "metastore.authz" . | fromJson -}}
{{- if $z.opa -}}opa{{- else if $z.policy -}}policy{{- end -}}
{{- end -}}

{{- define "metastore.authorizationEnv" -}}
{{- $z := include "metastore.authz" . | fromJson -}}
{{- $source := include "metastore.authzSource" . -}}
{{- if eq $source "opa" }}
- name: METASTORE_OPA_URL
  valueFrom:
    configMapKeyRef:
      name: {{ $z.opa }}
      key: OPA
- name: METASTORE_OPA_PACKAGE
  value: {{ $z.package | quote }}
- name: METASTORE_OPA_TIMEOUT
  value: {{ $z.timeoutSeconds | quote }}
- name: METASTORE_OPA_CACHE_SECONDS
  value: {{ $z.cacheSeconds | quote }}
{{- if $z.tlsSecretClass }}
- name: METASTORE_OPA_CA_FILE
  value: /etc/metastore/opa-ca/ca.crt
{{- end }}
{{- else if eq $source "policy" }}
- name: METASTORE_POLICY_FILE
  value: /etc/metastore/policy/policy.json
{{- end }}
{{- end -}}

{{- define "metastore.authorizationVolumeMounts" -}}
{{- $z := include "metastore.authz" . | fromJson -}}
{{- $source := include "metastore.authzSource" . -}}
{{- if and (eq $source "opa") $z.tlsSecretClass }}
- name: opa-ca
  mountPath: /etc/metastore/opa-ca
  readOnly: true
{{- else if eq $source "policy" }}
- name: policy
  mountPath: /etc/metastore/policy
  readOnly: true
{{- end }}
{{- end -}}

{{- define "metastore.authorizationVolumes" -}}
{{- $z := include "metastore.authz" . | fromJson -}}
{{- $source := include "metastore.authzSource" . -}}
{{- if and (eq $source "opa") $z.tlsSecretClass }}
{{- /* The secret-operator's volume of the SecretClass: its ca.crt is OPA's CA. */}}
- name: opa-ca
  ephemeral:
    volumeClaimTemplate:
      metadata:
        annotations:
          secrets.stackable.tech/class: {{ $z.tlsSecretClass | quote }}
          secrets.stackable.tech/scope: pod
          secrets.stackable.tech/format: tls-pem
      spec:
        storageClassName: secrets.stackable.tech
        accessModes:
          - ReadWriteOnce
        resources:
          requests:
            storage: "1"
{{- else if eq $source "policy" }}
- name: policy
  configMap:
    name: {{ include "metastore.fullname" . }}-policy
{{- end }}
{{- end -}}

{{- /* A Rego file of files/opa/ in the package of the values (the files say `package metastore`). */ -}}
{{- define "metastore.rego" -}}
{{- $z := include "metastore.authz" .ctx | fromJson -}}
{{- .ctx.Files.Get .file | replace "\npackage metastore\n" (printf "\npackage %s\n" $z.package) -}}
{{- end -}}
