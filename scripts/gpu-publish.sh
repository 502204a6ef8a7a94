#!/usr/bin/env bash
# The paper profiles on a GPU, in one call of at most 10 min: chapter 02's paper profile (p 53, d_model 128, the
# paper's learning rate and its fork at epoch 901), then, with what is left of the budget, chapter 03's. The runs
# are written as `corekit run --out` writes them, for `corekit adopt` to publish on the machine that has git:
#
#   bash scripts/gpu-publish.sh [--wheels DIR] [--out DIR] [--budget SECONDS] [--dry-run] [NOTEBOOK...]
#   corekit adopt OUT/runs          # back on the development machine, from the commit the GPU ran
#
# NOTEBOOK...   the chapters to run, in order (default: 02_grokking_cores 03_grokking_scaling_law)
# --wheels DIR  install the notebook stack from the wheels in DIR first (scripts/gpu-wheelhouse.sh), as gpu-check.sh
# --out DIR     output folder (default: $OUT, else _build/gpu-publish). It receives
#                 runs/            NAME.ipynb, NAME.metrics.json and figures/NAME/ of each finished run
#                 steps.jsonl      one JSON line per run: name, exit status, seconds, budget, timed out
#                 gpu-publish.log  the runs' summary and the environment
#                 runs.tar.gz      every run's log
# --budget S    wall-clock seconds for all runs together (default 560; 1200 with --dry-run); a run the budget no
#               longer covers is skipped and counts as failed.
# --dry-run     the same runs on the CPU at tiny sizes (-p overrides, so `corekit adopt` refuses them: they are not
#               profile runs); tests/test_publish.py runs it so that the script cannot rot between GPU sessions.
#
# Exit status 0 when every run finished with status 0; 1 otherwise (the summary names them).
set -uo pipefail
cd "$(dirname "$0")/.."

source scripts/gpu-common.sh
dry=0 wheels="" out="${OUT:-}" budget="" chapters=()
while (($#)); do
    shared_option "$1" "${2-}"
    if ((used == 0)); then
        [[ $1 == [0-9][0-9]_* ]] || { echo "gpu-publish.sh: unknown option $1 (accepted: --wheels DIR, --out DIR," \
                                           "--budget S, --dry-run, NN_name)" >&2; exit 2; }
        chapters+=("$1") used=1
    fi
    shift "$used"
done
((${#chapters[@]})) || chapters=(02_grokking_cores 03_grokking_scaling_law)
budget=${budget:-$((dry ? 1200 : 560))}
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-publish.sh: --budget must be whole seconds, got $budget" >&2; exit 2; }
out=${out:-_build/gpu-publish}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/steps.jsonl "$out"/gpu-publish.log "$out"/runs.tar.gz
PY=${PYTHON:-python3}
name=gpu-publish
gpu_setup

# Tiny sizes for the dry run: every code path of a chapter's run, in seconds on one CPU thread.
declare -A tiny=(
    [02_grokking_cores]="-p p 5 -p d_model 16 -p d_mlp 32 -p epochs 20 -p fork_epoch 5 -p checkpoint_every 5
                         -p dense_until 10 -p checkpoint_every_after 10 -p seeds [0]"
    [03_grokking_scaling_law]="-p p_values [5,7] -p weight_decays [1.0,2.0] -p omega_p 7 -p seeds [0,1,2,3]
                               -p p_max_epochs 20 -p omega_max_epochs 20 -p eval_every 10 -p margin 5
                               -p probe_p_values [5,7] -p probe_seeds [0,1] -p d_model 16 -p d_mlp 32"
)
for chapter in "${chapters[@]}"; do
    if ((dry)); then
        # shellcheck disable=SC2086  # the overrides split on white space, as written above
        step "$chapter" 600 "$PY" -m corekit run "$chapter" --out "$out/runs" ${tiny[$chapter]:-}
    else
        step "$chapter" 600 "$PY" -m corekit run "$chapter" --profile paper --out "$out/runs"
    fi
done
finish
