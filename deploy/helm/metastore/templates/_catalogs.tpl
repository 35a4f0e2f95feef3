{{/* The catalog map in the projector pod: its env variables, volumes and mounts (each empty
when unused), and a checksum so a changed map restarts the projector (which then
re-derives the datasets). `catalogs` is the file; `catalogDiscovery` adds the entries of
the TrinoCatalogs, read with a ServiceAccount token mounted into the projector alone. */}}
{{- define "metastore.catalogDiscoveryNamespaces" -}}
{{- join "," (default (list .Release.Namespace) .Values.catalogDiscovery.namespaces) -}}
{{- end -}}

{{- define "metastore.catalogsEnv" -}}
{{- if .Values.catalogs }}
- name: METASTORE_CATALOGS_FILE
  value: /etc/metastore/catalogs/catalogs.yaml
{{- end }}
{{- if .Values.catalogDiscovery.enabled }}
- name: METASTORE_CATALOGS_FROM_KUBERNETES
  value: {{ include "metastore.catalogDiscoveryNamespaces" . | quote }}
{{- end }}
{{- end -}}

{{- define "metastore.catalogsVolume" -}}
{{- if .Values.catalogs }}
- name: catalogs
  configMap:
    name: {{ include "metastore.fullname" . }}-catalogs
    defaultMode: 0444
{{- end }}
{{- if .Values.catalogDiscovery.enabled }}
- name: kubernetes-api
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3600
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                fieldPath: metadata.namespace
{{- end }}
{{- end -}}

{{- define "metastore.catalogsVolumeMount" -}}
{{- if .Values.catalogs }}
- name: catalogs
  mountPath: /etc/metastore/catalogs
  readOnly: true
{{- end }}
{{- if .Values.catalogDiscovery.enabled }}
- name: kubernetes-api
  mountPath: /var/run/secrets/kubernetes.io/serviceaccount
  readOnly: true
{{- end }}
{{- end -}}

{{- define "metastore.catalogsChecksum" -}}
{{- if .Values.catalogs }}
checksum/catalogs: {{ include (print .Template.BasePath "/configmap-catalogs.yaml") . | sha256sum }}
{{- end }}
{{- end -}}
