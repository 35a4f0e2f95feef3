# Real OpenLineage emitters against the real service.  Included by the top-level Makefile.
#
#   make emitter-venvs   the pinned Airflow and dbt venvs (cached in .cache/emitters/, keyed
#                        by their requirements file's hash; about 2 minutes from PyPI)
#   make test-emitters   airflow dags test and dbt-ol run against `metastore api` and
#                        `metastore projector`, with the endpoint set and left at its default
#                        (tests/emitters; not part of `make test`, run by .ci/run after it)
VENV ?= .venv
PY   ?= $(VENV)/bin/python

EMITTERS_CACHE := .cache/emitters
AIRFLOW_REQS   := tests/emitters/requirements-airflow.txt
DBT_REQS       := tests/emitters/requirements-dbt.txt
AIRFLOW_VENV   := $(EMITTERS_CACHE)/airflow-$(shell sha256sum $(AIRFLOW_REQS) | cut -c1-16)
DBT_VENV       := $(EMITTERS_CACHE)/dbt-$(shell sha256sum $(DBT_REQS) | cut -c1-16)

.PHONY: emitter-venvs test-emitters

# The stamp is written last: an interrupted install is built again from scratch. Old venvs
# of other requirements hashes stay until `make clean`.
$(EMITTERS_CACHE)/%/.installed:
	rm -rf $(EMITTERS_CACHE)/$*
	$(PYTHON) -m venv $(EMITTERS_CACHE)/$*
	$(EMITTERS_CACHE)/$*/bin/python -m pip install --quiet --upgrade pip
	$(EMITTERS_CACHE)/$*/bin/python -m pip install --quiet \
	    -r tests/emitters/requirements-$(firstword $(subst -, ,$*)).txt
	touch $@

emitter-venvs: $(AIRFLOW_VENV)/.installed $(DBT_VENV)/.installed

test-emitters: $(STAMP) emitter-venvs
	METASTORE_TEST_AIRFLOW_BIN=$(abspath $(AIRFLOW_VENV))/bin \
	METASTORE_TEST_DBT_BIN=$(abspath $(DBT_VENV))/bin \
	METASTORE_TEST_EMITTERS_REPORT=$(abspath $(EMITTERS_CACHE))/report.json \
	    $(PY) -m pytest tests/emitters $(PYTEST_ARGS)
