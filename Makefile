# The two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test lint bench openapi clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## run: the service on http://127.0.0.1:8080 with an embedded PostgreSQL (unless METASTORE_DATABASE_URL is set)
run: $(STAMP)
	$(VENV)/bin/metastore dev

## test: the whole suite against a real PostgreSQL (a throwaway one unless METASTORE_TEST_DATABASE_URL is set)
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

## lint: ruff, mypy, and the OpenAPI document (Spectral and Redocly, mk/openapi.mk)
lint: $(STAMP)
	$(VENV)/bin/ruff check metastore projections bench tests
	$(VENV)/bin/ruff format --check metastore projections bench tests
	$(VENV)/bin/mypy
	$(MAKE) openapi-lint

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache

-include mk/*.mk
