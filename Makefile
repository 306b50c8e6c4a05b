# Two commands do all the set-up: `make run` and `make test`. Both build .venv on their own.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck unit

run: $(STAMP)
	$(BIN)/python -m localstack.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/ingest_latency.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
