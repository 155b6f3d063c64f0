# Quick start: `make run` (the main job) and `make test` (lint + the whole suite).
# Both create .venv and install aipusim with its dev extras on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODEL ?= resnet50

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,distributed]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/aipusim run $(MODEL) -o runs/$(MODEL)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/pytest -q tests/benchmarks --benchmark-only -s
	$(BIN)/aipusim bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
