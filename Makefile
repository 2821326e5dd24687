# Two entry points (see README): `make run` installs and starts the app; `make test` installs and tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PORT ?= 8501

.PHONY: install chromium run test lint bench

$(STAMP): requirements.txt requirements-dev.txt
	@$(PY) -c "import venv, ensurepip" 2>/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q python3-venv; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

install: $(STAMP)

# Debian's Chromium drives the browser tests and kaleido's static image export.
chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

run: install
	$(BIN)/streamlit run app.py --server.port $(PORT)

lint: install
	$(BIN)/ruff check .

test: install chromium lint
	$(BIN)/python -m pytest

# Side-by-side ratios (see each script's docstring for its targets); bench_roles reads ../shared/data.
bench: install chromium
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_page.py
	$(BIN)/python benchmarks/bench_roles.py
