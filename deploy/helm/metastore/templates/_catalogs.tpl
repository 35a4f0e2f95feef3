{{/* The catalog map in the projector pod: its env variable, volume and mount (each empty
without entries), and a checksum so a changed map restarts the projector (which then
re-derives the datasets). */}}
{{- define "metastore.catalogsEnv" -}}
{{- if .Values.catalogs }}
- name: METASTORE_CATALOGS_FILE
  value: /etc/metastore/catalogs/catalogs.yaml
{{- end }}
{{- end -}}

{{- define "metastore.catalogsVolume" -}}
{{- if .Values.catalogs }}
- name: catalogs
  configMap:
    name: {{ include "metastore.fullname" . }}-catalogs
    defaultMode: 0444
{{- end }}
{{- end -}}

{{- define "metastore.catalogsVolumeMount" -}}
{{- if .Values.catalogs }}
- name: catalogs
  mountPath: /etc/metastore/catalogs
  readOnly: true
{{- end }}
{{- end -}}

{{- define "metastore.catalogsChecksum" -}}
{{- if .Values.catalogs }}
checksum/catalogs: {{ include (print .Template.BasePath "/configmap-catalogs.yaml") . | sha256sum }}
{{- end }}
{{- end -}}
