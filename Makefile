# Two commands for a fresh machine: `make run` (start the inspector) and `make test` (run every test).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export GRADIO_ANALYTICS_ENABLED := False
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export ORT_DISABLE_TELEMETRY := 1

.PHONY: run test bench check-network clean

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

# No network at run time: the app under strace (start-up, one turn, 30 s) makes no DNS query and no outside connect.
check-network: $(VENV)/.runtime
	$(PY) scripts/check_no_network.py

bench: $(VENV)/.runtime
	$(PY) -m retrieval bench

clean:
	rm -rf $(VENV) .chroma .pytest_cache
