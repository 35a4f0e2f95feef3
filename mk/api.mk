# The read API's OpenAPI document.  Included by the top-level Makefile.
#
#   make openapi   regenerate metastore/openapi.json from the operation table and structs
VENV ?= .venv
PY   ?= $(VENV)/bin/python

.PHONY: openapi

openapi: $(STAMP)
	$(PY) -c "from metastore.api.openapi import main; main()" --write
