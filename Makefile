# Two entry points for a fresh machine: `make demo` and `make test`. Both create .venv and install into it:
# the demo the package with triton and torch (CPU), the tests also their tools (pytest, pytest-lsp, Neovim).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint test-vscode bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The demo compiles and checks the examples: triton and torch (pinned: a loose torch pulls a multi-GB CUDA build).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[check]' 'torch==2.13.0'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/kernel-lsp check examples/ --target sm_90 --run-checks --exit-zero

# Lint (ruff: pyflakes, pycodestyle errors, bugbear, blind except) and type-check analyzers/ and
# the engine (mypy); the configuration of both is in pyproject.toml.
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

# The suite on TEST_WORKERS pytest-xdist workers: most tests drive a subprocess (a server, a CLI run, a checker) and
# wait on it, so one worker keeps about one core busy. A module runs whole on one worker, and so does tests/scale,
# whose tests share Ray clusters (tests/conftest.py). The package is compiled to bytecode first: the suite starts
# hundreds of Python processes, and where PYTHONDONTWRITEBYTECODE is set each would compile it again.
TEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m compileall -q -x '/fixtures/' analyzers kernel_lsp tests
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope
	$(MAKE) test-vscode

# The VS Code extension, built and tested against the server in .venv (editors/vscode/README.md).
test-vscode: $(VENV)/.installed
	@if command -v npm >/dev/null 2>&1; then \
		cd editors/vscode && npm ci --no-audit --no-fund && npx tsc -p . && npx vitest run; \
	else \
		echo "npm is not installed: skipping the VS Code extension's build and tests (editors/vscode)"; \
	fi

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run_all.py

docs: $(VENV)/.installed
	$(BIN)/python -m kernel_lsp.docs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
