# taospec's developer entry points. `make test` works on a fresh Debian machine:
# it makes a virtualenv, installs taospec with its test tools, brings up what the
# real-engine tests need (as root: Debian's docker.io, shellcheck, openssh-server),
# then runs lint, type checks and the whole test suite; then the suite again, without
# the real-engine tests, on the oldest Python taospec supports (3.10, from pyenv).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

# The oldest supported Python: pyenv's newest 3.10, or `pyenv which python3.10`.
PYTHON310 ?= $(or $(lastword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python)),$(shell pyenv which python3.10 2>/dev/null))
VENV310   := .venv310
STAMP310  := $(VENV310)/.installed-stamp
# One Python runs the real-engine tests; the second run leaves them (and slow ones) out.
PYTEST310_MARKERS := not engine and not slow

.PHONY: help install env test check lint typecheck pytest pytest310 bench demo clean stop-services

help:
	@echo "make demo   run a real job (jobs/hello.yaml) and list the ledger"
	@echo "make test   install everything needed and run lint, types and all tests"
	@echo "make bench  run the benchmark suite"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(STAMP310): pyproject.toml
	@if [ -z "$(PYTHON310)" ] || ! "$(PYTHON310)" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))'; then \
	    echo "make test needs Python 3.10 and found none: PYTHON310='$(PYTHON310)' (default: the" \
	         "newest $(HOME)/.pyenv/versions/3.10.*/bin/python, else \`pyenv which python3.10\`)." \
	         "Install it with \`pyenv install 3.10\`, or pass PYTHON310=/path/to/python3.10." >&2; \
	    exit 2; \
	fi
	$(PYTHON310) -m venv $(VENV310)
	$(VENV310)/bin/python -m pip install --quiet --upgrade pip
	$(VENV310)/bin/python -m pip install --quiet -e '.[test]'
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
	MYPYPATH=bench $(BIN)/mypy bench/*.py

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

pytest310: $(STAMP310)
	$(VENV310)/bin/pytest -m '$(PYTEST310_MARKERS)' $(PYTEST310_ARGS)

check: lint typecheck

test: $(STAMP) $(STAMP310) env check pytest pytest310

demo: $(STAMP)
	$(BIN)/taospec run -B --follow jobs/hello.yaml
	$(BIN)/taospec ls --limit 5

bench: $(STAMP) env
	$(BIN)/python bench/run.py

stop-services:
	scripts/stop-test-services.sh

clean:
	rm -rf $(VENV) $(VENV310) build dist .pytest_cache .mypy_cache .ruff_cache
