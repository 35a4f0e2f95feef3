# The read API's OpenAPI document.  Included by the top-level Makefile.
#
#   make openapi        regenerate metastore/openapi.json from the operation table and structs
#   make openapi-lint   Spectral (spectral:oas) and Redocly (recommended): 0 errors
#   make openapi-tools  the pinned node tools (tools/openapi/package-lock.json, `npm ci`)
VENV ?= .venv
PY   ?= $(VENV)/bin/python

OPENAPI_TOOLS := tools/openapi
OPENAPI_DOC   := ../../metastore/openapi.json
# Redocly's CLI reports usage and checks for updates unless told not to.
REDOCLY_ENV   := REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

.PHONY: openapi openapi-lint openapi-tools

openapi: $(STAMP)
	$(PY) -c "from metastore.api.openapi import main; main()" --write

$(OPENAPI_TOOLS)/node_modules/.installed: $(OPENAPI_TOOLS)/package-lock.json
	cd $(OPENAPI_TOOLS) && npm ci --no-audit --no-fund
	touch $@

openapi-tools: $(OPENAPI_TOOLS)/node_modules/.installed

openapi-lint: $(OPENAPI_TOOLS)/node_modules/.installed
	cd $(OPENAPI_TOOLS) && npx --no-install spectral lint --ruleset .spectral.yaml \
		--fail-severity error $(OPENAPI_DOC)
	cd $(OPENAPI_TOOLS) && $(REDOCLY_ENV) npx --no-install redocly lint --config redocly.yaml \
		$(OPENAPI_DOC)
