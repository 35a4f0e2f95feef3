# The two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# The venv holds exactly the lock files (requirements/, with hashes): dev.txt is the app's
# lock (app.txt, what the image installs) plus the development tools; build.txt builds the
# package. `make lock` refreshes them from pyproject.toml.
LOCKS  := requirements/app.txt requirements/dev.txt requirements/build.txt
UV_COMPILE = $(VENV)/bin/uv pip compile --quiet --generate-hashes --universal --python-version 3.11 \
             --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)

.PHONY: install run test lint lock bench openapi clean

$(STAMP): pyproject.toml $(LOCKS)
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements/build.txt -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

## lock: re-resolve the lock files after a change to pyproject.toml (keeping every pin that
## still fits; UPGRADE=1 moves all to the newest versions), reinstall, and run the suite
lock: $(STAMP)
	$(UV_COMPILE) pyproject.toml -o requirements/app.txt
	$(UV_COMPILE) pyproject.toml --extra dev -c requirements/app.txt -o requirements/dev.txt
	$(UV_COMPILE) requirements/build.in -c requirements/dev.txt -o requirements/build.txt
	$(MAKE) test

## run: the service on http://127.0.0.1:8080 with an embedded PostgreSQL (unless METASTORE_DATABASE_URL is set)
run: $(STAMP)
	$(VENV)/bin/metastore dev

## test: the whole suite against a real PostgreSQL (a throwaway one unless METASTORE_TEST_DATABASE_URL is set),
## in PYTEST_WORKERS processes (pytest-xdist, a PostgreSQL each; 0: one process), a test file each at a time
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

## lint: ruff, mypy, and the OpenAPI document (Spectral and Redocly, mk/openapi.mk)
lint: $(STAMP)
	$(VENV)/bin/ruff check metastore projections bench tests
	$(VENV)/bin/ruff format --check metastore projections bench tests
	$(VENV)/bin/mypy
	$(MAKE) openapi-lint

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache

-include mk/*.mk
