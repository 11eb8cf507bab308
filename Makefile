# Two commands for a fresh machine: `make run` (start the inspector) and `make test` (run every test).
# `make test-fast` runs every test but the browser and load tests (the quick loop while developing).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export GRADIO_ANALYTICS_ENABLED := False
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export ORT_DISABLE_TELEMETRY := 1

.PHONY: run test test-fast lint bench check-network screenshots clean

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

# --durations=20: every run (CI's too, .ci/run calls this target) ends with the 20 slowest tests, so the cost of
# a test stays visible; the whole suite must stay under 8 minutes on a quiet 2-core machine.
# -n 3 (pytest-xdist): three worker processes, each taking whole test files (the long ones first) and starting its
# own shared app for the browser files it gets (the scheduler: tests/conftest.py, which pytest reads before the
# workers start because `tests` is named). Three on two cores: a worker spends much of its time waiting on a launched
# app, Chromium or a subprocess, and two left ~40% of the machine idle (docs/measurements/log.md). TEST_WORKERS=0:
# one process.
TEST_WORKERS ?= 3

test: $(VENV)/.dev
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=20 tests

# The house's habits (configured in pyproject.toml): ruff's lint rules and formatting over the whole tree, mypy on the
# code (every definition typed in retrieval/, the core; bodies checked in inspector/ and app.py). .ci/run runs this first.
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy retrieval inspector app.py

# Markers set in tests/conftest.py: `browser` (a real Chromium against a launched app), `load` (20 concurrent sessions).
test-fast: $(VENV)/.dev
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not browser and not load" --durations=10 tests

# No network at run time: the app under strace (start-up, one turn, 30 s) makes no DNS query and no outside connect.
check-network: $(VENV)/.runtime
	$(PY) scripts/check_no_network.py

# The documentation's pictures (docs/*.png): the real app and a headless Chromium; the tests never write them.
# `make screenshots ONLY="presenter inspector"` re-takes some of them.
screenshots: $(VENV)/.dev
	$(PY) scripts/screenshots.py $(if $(ONLY),--only $(ONLY))

bench: $(VENV)/.runtime
	$(PY) -m retrieval bench

clean:
	rm -rf $(VENV) .chroma .pytest_cache

# The documentation site (mkdocs.yml, docs/): built offline with --strict (a broken link or a page missing from the
# navigation fails) into site/ (git-ignored); `make docs-serve` previews it on http://127.0.0.1:8001.
.PHONY: docs docs-serve reference

$(VENV)/.docs: $(VENV)/.runtime requirements-docs.txt
	$(PY) -m pip install --quiet -r requirements-docs.txt
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site
	$(PY) scripts/check_docs_offline.py site

docs-serve: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve --strict --dev-addr 127.0.0.1:8001

# docs/reference/*.md from the code (Settings, the CLI's parsers, run_turn, the export, the span): re-run after
# changing any of them; tests/test_docs_reference.py fails while the committed pages differ.
reference: $(VENV)/.runtime
	$(PY) scripts/gen_reference.py
