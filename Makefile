# trex: the README's commands are these targets. `make test` and `make demo` set up .venv first when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.trex-setup
RECIPE ?= recipes/tiny-cpu.toml
PYTEST_ARGS ?=

.PHONY: setup test test-quick demo bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU wheel of torch 2.13.0 lies on this machine's disk; pinning it first keeps pip from
	# downloading a multi-GB CUDA build for the range in pyproject.toml.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	# bubblewrap makes the eval sandbox stronger; trex falls back to process limits without it.
	-command -v bwrap >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get install -y -qq bubblewrap >/dev/null 2>&1 || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1)) || \
	  echo "bubblewrap not installed: the eval sandbox will use process limits only")
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-quick: setup
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

demo: setup
	$(BIN)/trex run $(RECIPE)

bench: setup
	$(BIN)/python benchmarks/run_all.py

lint: setup
	$(BIN)/ruff check trex_cli data_synth trex_sandbox ascend_kernels tests benchmarks

clean:
	rm -rf runs .pytest_cache
