# Two entry points: `make demo` (a real tuning run, headless) and `make test` (the whole suite).
# Both build a virtual environment in .venv from this repository's own files.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test lint bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || { $(SUDO) apt-get update && $(SUDO) apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV); }

$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --editable .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --editable '.[test]'
	touch $@

demo: $(VENV)/.installed-demo
	$(BIN)/python examples/demo.py

lint: $(VENV)/.installed-test
	$(BIN)/ruff check nbtune tests benchmarks examples
	$(BIN)/ruff format --check nbtune tests benchmarks examples

test: lint
	$(BIN)/python -m pytest

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/overhead.py
