# Two commands for a fresh machine: `make run` (start the inspector) and `make test` (run every test).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export GRADIO_ANALYTICS_ENABLED := False
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test bench clean

$(VENV)/.runtime: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(VENV)/.runtime
	$(PY) app.py

test: $(VENV)/.dev
	$(PY) -m pytest -q

bench: $(VENV)/.runtime
	$(PY) -m retrieval bench

clean:
	rm -rf $(VENV) .chroma .pytest_cache
