# The project's one interface. Every target creates what it needs on a fresh machine.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.stamp-run
STAMP_DEV := $(VENV)/.stamp-dev
STAMP_NPM := node_modules/.stamp
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export AWS_DEFAULT_REGION ?= us-east-1

.PHONY: demo test lint typecheck unit synth bench clean help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP_RUN): requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(STAMP_DEV): requirements-dev.txt $(STAMP_RUN)
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

$(STAMP_NPM): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

demo: $(STAMP_RUN)  ## run the live pipeline on the local emulator and report convergence
	$(BIN)/s3ingest local demo

lint: $(STAMP_DEV)  ## ruff
	$(BIN)/ruff check .

typecheck: $(STAMP_DEV)  ## mypy
	$(BIN)/mypy

unit: $(STAMP_DEV)  ## pytest only
	$(BIN)/pytest

test: lint typecheck unit  ## everything CI checks: lint, types, tests (synth included)

synth: $(STAMP_RUN) $(STAMP_NPM)  ## npx cdk synth (no AWS credentials needed)
	PATH="$(CURDIR)/$(BIN):$$PATH" npx cdk synth --quiet

bench: $(STAMP_DEV)  ## benchmarks: figures and ratios, not pass/fail
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) node_modules cdk.out .build .pytest_cache .mypy_cache
