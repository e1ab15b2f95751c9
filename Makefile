# evidex: the two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.evidex-installed

# Everything runs offline: models come from installed packages, never a hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export GX_ANALYTICS_ENABLED := false

DEMO_QUERIES := "How do I read a gzip-compressed file?" \
                "What does the with statement do?" \
                "How do I parse command-line arguments?"

.PHONY: install demo test lint clean

install: $(STAMP)

# PyTorch first, pinned to the CPU build; constraints.txt pins everything else.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/evidex build
	$(BIN)/evidex validate
	$(BIN)/evidex activate
	$(BIN)/evidex query --k 3 $(DEMO_QUERIES)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy schemas query validation store

# Test modules run in parallel, one worker per core (at most 4), each module on one worker
# so its fixtures are built once, in the order tests/conftest.py gives them (the longest
# modules first; xdist's own reorder, by test count, would start them last).
test: lint
	$(BIN)/pytest --numprocesses auto --maxprocesses 4 --dist loadscope --no-loadscope-reorder

clean:
	rm -rf $(VENV) .evidex .pytest_cache .ruff_cache .mypy_cache
