# Developer entry points. `make test` works on a fresh clone: it creates the venv and installs everything.
#   make install        venv + `pip install -e '.[train,dev]'` (training, tests, linters)
#   make install-serve  venv + `pip install -e .` (serving only: no torch; same spec as the Docker image)
#   make install-train  venv + `pip install -e '.[train]'` (training and serving, no test or lint tools)
#   make serve          run the HTTP service (MT_* environment variables pass through, e.g. MT_PORT=9000)
#   make lint           ruff, ruff format --check, mypy, hadolint, compose schema, promtool
#   make test           lint + pytest
#   make format         ruff format + ruff check --fix
#   make clean          caches and build outputs (make distclean also removes the venv)

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY = $(VENV)/bin/python
PIP = $(PY) -m pip
HADOLINT = $(VENV)/bin/hadolint
CHECK_JSONSCHEMA = $(VENV)/bin/check-jsonschema
PYTEST_ARGS ?= -q
SERVE_ARGS ?=

# Stamps are named after pyproject.toml's content, so editing the dependencies re-runs pip and
# anything else is a no-op.
PYPROJECT_HASH := $(shell (sha256sum pyproject.toml 2>/dev/null || shasum -a 256 pyproject.toml) | cut -c1-12)
STAMP = $(VENV)/.installed-full-$(PYPROJECT_HASH)
SERVE_STAMP = $(VENV)/.installed-serve-$(PYPROJECT_HASH)
TRAIN_STAMP = $(VENV)/.installed-train-$(PYPROJECT_HASH)

.PHONY: help venv install install-serve install-train serve lint test format clean distclean

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

venv: $(PY)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -e '.[train,dev]'
	@# Microsoft's newer client (2.x, API version 2026-06-06) beside the 1.x one the tests import: its own folder,
	@# put on the path of a subprocess by tests/service/test_microsoft.py
	$(PIP) install --no-deps --upgrade --target $(VENV)/azure-text-2 'azure-ai-translation-text>=2,<3'
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

# The full install is a superset of the serving one: don't run pip again after it.
$(SERVE_STAMP): pyproject.toml | $(PY)
ifeq ($(wildcard $(STAMP)),)
	$(PIP) install -e .
endif
	@touch $@

install-serve: $(SERVE_STAMP)

# Training needs torch and the corpus tools, not pytest, ruff, mypy, selenium or transformers.
$(TRAIN_STAMP): pyproject.toml | $(PY)
ifeq ($(wildcard $(STAMP)),)
	$(PIP) install -e '.[train]'
endif
	@touch $@

install-train: $(TRAIN_STAMP)

serve: install-serve
	$(PY) -m service $(SERVE_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy core inference service training
	$(HADOLINT) Dockerfile
	$(CHECK_JSONSCHEMA) --schemafile deploy/compose-spec.json docker-compose.yml
	@if command -v promtool >/dev/null 2>&1; then \
	  echo "promtool check config deploy/prometheus.yml"; promtool check config deploy/prometheus.yml; \
	elif [ -n "$${CI:-}" ]; then \
	  echo "promtool is required in CI (apt-get install prometheus)" >&2; exit 1; \
	else \
	  echo "promtool not on PATH: skipping the Prometheus config check (apt-get install prometheus)"; \
	fi

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

format: install
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
