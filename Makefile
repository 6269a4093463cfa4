# Two entry points: `make demo` (a real tuning run, headless) and `make test` (the whole suite);
# `make test-lightning` adds torch and the Lightning and Transformers integrations' tests, which
# `make test` skips.
# All build a virtual environment in .venv from this repository's own files.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The browser tests (tests/browser) drive Debian's Chromium through Playwright; they are skipped
# when it is missing. Never `playwright install`.
CHROMIUM := /usr/bin/chromium

.PHONY: demo test test-matrix test-lightning lint bench

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
	$(BIN)/ruff check nbtune tests benchmarks examples tools
	$(BIN)/ruff format --check nbtune tests benchmarks examples tools

test: lint $(VENV)/ipykernel6/.installed | $(CHROMIUM)
	$(BIN)/python -m pytest
	$(BIN)/python -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider notebooks/ \
	  --ignore=notebooks/lightning.ipynb --ignore=notebooks/transformers.ipynb

# Every scheduler x checkpoint cadence x executor x user command (90 runs, about 4 minutes);
# `make test` runs a sample of them.
test-matrix: $(VENV)/.installed-test
	$(BIN)/python -m pytest --matrix tests/test_combinations.py

# torch is too big for `make test`'s environment: the Lightning and Transformers tests skip
# themselves without it, and this target installs it (and transformers: 130 MB, 25 s), then
# runs them and the Lightning and Transformers notebooks (3 minutes after `make test` on a busy
# 2-core machine: 1.5 to install, 1.5 to test). torch goes in first and alone, so that pip
# takes the CPU wheel (in CI, from PIP_FIND_LINKS; elsewhere set
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu) rather than let lightning pull the
# multi-GB CUDA build.
TORCH ?= torch==2.13.0

$(VENV)/.installed-lightning: pyproject.toml $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet '$(TORCH)'
	$(BIN)/python -m pip install --quiet --editable '.[lightning,transformers]'
	touch $@

test-lightning: $(VENV)/.installed-lightning
	$(BIN)/python -m pytest tests/integrations/test_lightning.py tests/integrations/test_transformers.py
	$(BIN)/python -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider \
	  notebooks/lightning.ipynb notebooks/transformers.ipynb

# The dashboard is also tested on the latest ipykernel 6 (no subshells), kept apart from the
# environment's ipykernel 7 and put on the test kernel's PYTHONPATH.
$(VENV)/ipykernel6/.installed: $(VENV)/.installed-test
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(VENV)/ipykernel6 'ipykernel>=6.29,<7'
	touch $@

# A file target: nothing to do (and no apt) once Chromium is installed. Without apt-get (not
# Debian) it only warns, and the browser tests skip themselves.
$(CHROMIUM):
	if command -v apt-get >/dev/null; then \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; \
	else \
	  echo "apt-get not found: install Chromium as $@ to run the browser tests"; \
	fi

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/overhead.py
