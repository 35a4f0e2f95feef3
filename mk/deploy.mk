# Deployment artefacts: Helm chart and container image.  Included by the top-level Makefile.
#
#   make helm-lint     helm lint --strict (defaults and ci/all-on-values.yaml)
#   make helm-template render the chart with the default values to stdout
#   make deploy-test   the chart and Containerfile tests (tests/deploy)
#   make hadolint      lint the Containerfile
#   make image-base    a local Debian bookworm base image (mmdebstrap), for offline builds
#   make image         build the image (buildah or podman) and smoke-test it
#   make image-smoke   smoke-test an already built image
VENV ?= .venv
PY   ?= $(VENV)/bin/python

CHART_DIR      := deploy/helm/metastore
HELM_CACHE_DIR := .cache/helm
# Use a helm of your own with `make HELM=/usr/local/bin/helm ...` or METASTORE_HELM.
HELM           ?= $(or $(METASTORE_HELM),$(HELM_CACHE_DIR)/helm)
HADOLINT       ?= $(VENV)/bin/hadolint

APP_VERSION    := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART_DIR)/Chart.yaml)
IMAGE          ?= oci.stackable.tech/sdp/metastore
IMAGE_TAG      ?= $(APP_VERSION)
# Empty: the Containerfile's default (docker.io/library/python:3.11-slim-bookworm).
# Offline: `make image-base` and then `make image BASE_IMAGE=localhost/metastore-base:bookworm`.
BASE_IMAGE     ?=
LOCAL_BASE     ?= localhost/metastore-base:bookworm
BUILDER        ?= $(shell command -v buildah >/dev/null 2>&1 && echo buildah || echo podman)
ISOLATION      ?= chroot
REVISION       ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

.PHONY: helm helm-lint helm-template deploy-test hadolint image image-base image-smoke

# Fetched on demand, cached in .cache/helm (gitignored), never committed.
$(HELM_CACHE_DIR)/helm:
	scripts/fetch-helm.sh $(HELM_CACHE_DIR)

helm: $(HELM)

helm-lint: $(HELM)
	$(HELM) lint --strict $(CHART_DIR)
	$(HELM) lint --strict $(CHART_DIR) -f $(CHART_DIR)/ci/all-on-values.yaml

helm-template: $(HELM)
	@$(HELM) template metastore $(CHART_DIR)

deploy-test: $(HELM) $(STAMP)
	METASTORE_HELM=$(abspath $(HELM)) $(PY) -m pytest tests/deploy -q $(PYTEST_ARGS)

hadolint: $(STAMP)
	$(HADOLINT) Containerfile

image-base:
	scripts/image.sh base $(LOCAL_BASE)

image:
	BUILDER=$(BUILDER) ISOLATION=$(ISOLATION) BASE_IMAGE=$(BASE_IMAGE) VERSION=$(APP_VERSION) REVISION=$(REVISION) \
	    scripts/image.sh build $(IMAGE):$(IMAGE_TAG)
	scripts/image.sh smoke $(IMAGE):$(IMAGE_TAG)

image-smoke:
	scripts/image.sh smoke $(IMAGE):$(IMAGE_TAG)
