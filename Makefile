# On a fresh machine: `make book` (install + build the published edition from results/, executing nothing),
# `make run` (execute every notebook at PROFILE, quick by default, JOBS at a time, and build that edition) and `make test`
# (`make test-fast`: the library's tests only; `make lint`: ruff). Everything installs into .venv; torch is
# pinned first so pip keeps the CPU build.
VENV    ?= .venv
PROFILE ?= quick
JOBS    ?= 1
PYTEST_ARGS ?= -q
PYTHON  := $(VENV)/bin/python
COREKIT := $(VENV)/bin/corekit
STAMP   := $(VENV)/.installed

.PHONY: install book run lint test test-fast test-portable clean

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e ".[dev]"
	PYTHON=$(PYTHON) bash scripts/install-models.sh
	touch $@

book: install
	$(PYTHON) -m corekit book --published

run: install
	$(PYTHON) -m corekit run all --profile $(PROFILE) --jobs $(JOBS)
	$(PYTHON) -m corekit book --profile $(PROFILE)

lint: install
	$(PYTHON) -m ruff check .

# Everything: lint, library tests, every notebook on its quick profile (tests/test_book.py, through papermill), the
# book; then two chapters once more as a user's own tool runs them, nbmake (output_dir empty: nothing may be written
# into notebooks/). Running all nine a second time would add about 20 minutes to CI for the same kernels.
NBMAKE_NOTEBOOKS ?= notebooks/01_markov_cores.ipynb notebooks/05_entk_mlp_modular.ipynb
test: lint
	$(PYTHON) -m pytest $(PYTEST_ARGS) --durations=25
	$(PYTHON) -m pytest $(PYTEST_ARGS) -p no:cacheprovider --nbmake --nbmake-timeout=900 $(NBMAKE_NOTEBOOKS)
	git diff --exit-code --stat -- notebooks/ && test -z "$$(git status --porcelain --ignored --untracked-files=all -- notebooks/)"

# The library's own tests only (no notebook, book or real language model): about 6 minutes on 2 cores.
test-fast: install
	$(PYTHON) -m pytest $(PYTEST_ARGS) -m "not notebook and not book and not llm"

# The numerical tests again on torch's generic CPU kernels (no AVX2/AVX-512) and one thread: what
# another CPU computes differently shows up here (about a minute).
PORTABLE_TESTS := tests/test_llm.py::test_margin_gradients_match_autograd_and_finite_differences \
                  tests/test_models_train.py::test_batched_forward_matches_per_model_reference \
                  tests/test_models_train.py::test_batched_adamw_matches_torch_adamw_per_model \
                  tests/test_stats.py tests/test_scaling.py tests/test_chapter_two_lenses.py tests/test_chapter_two_lenses_lm.py
test-portable: install
	ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=1 $(PYTHON) -m pytest $(PYTEST_ARGS) $(PORTABLE_TESTS)

clean:
	rm -rf _build
