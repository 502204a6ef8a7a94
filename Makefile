# Two commands on a fresh machine: `make book` (install + execute every notebook + build the book)
# and `make test`. Everything installs into .venv; torch is pinned first so pip keeps the CPU build.
VENV    ?= .venv
PROFILE ?= quick
PYTEST_ARGS ?= -q
PYTHON  := $(VENV)/bin/python
COREKIT := $(VENV)/bin/corekit
STAMP   := $(VENV)/.installed

.PHONY: install book test clean

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e ".[dev]"
	PYTHON=$(PYTHON) bash scripts/install-models.sh
	touch $@

book: install
	$(COREKIT) run all --profile $(PROFILE)
	$(COREKIT) book --profile $(PROFILE)

test: install
	$(PYTHON) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf _build
