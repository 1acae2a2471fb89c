# loopwatch: two commands on a fresh machine — `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/loopwatch demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --numprocesses=auto --maxprocesses=4

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

screenshots: $(STAMP)
	$(BIN)/python screenshots/generate.py

clean:
	rm -rf $(VENV) build *.egg-info
