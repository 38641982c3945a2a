# taospec's developer entry points. `make test` works on a fresh Debian machine:
# it makes a virtualenv, installs taospec with its test tools, brings up what the
# real-engine tests need (as root: Debian's docker.io, shellcheck, openssh-server),
# then runs lint, type checks and the whole test suite.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: help install env test check lint typecheck pytest bench demo clean stop-services

help:
	@echo "make demo   run a real job (jobs/hello.yaml) and list the ledger"
	@echo "make test   install everything needed and run lint, types and all tests"
	@echo "make bench  run the benchmark suite"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

# Real engines for the integration tests: idempotent, and silent when already up.
env:
	scripts/ensure-test-env.sh

lint: $(STAMP)
	$(BIN)/ruff check taospec tests bench
	$(BIN)/ruff format --check taospec tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

check: lint typecheck

test: $(STAMP) env check pytest

demo: $(STAMP)
	$(BIN)/taospec run -B --follow jobs/hello.yaml
	$(BIN)/taospec ls --limit 5

bench: $(STAMP) env
	$(BIN)/python bench/run.py

stop-services:
	scripts/stop-test-services.sh

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
