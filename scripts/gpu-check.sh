#!/usr/bin/env bash
# One prepared GPU check, ≤ 10 min on one H200: benchmarks B1–B4 and B6 at their GPU sizes, the paper
# profiles of notebooks 01 and 05, and slices of 06's and 02's paper profiles (their first 400 and 1,000 epochs).
#
#   bash scripts/gpu-check.sh [--wheels DIR] [--out DIR] [--budget SECONDS] [--dry-run]
#
# --wheels DIR  install the notebook stack (papermill, jupytext, nbclient, ipykernel, gguf, spaCy, ...) from the
#               wheels in DIR, offline, into a private folder first (DIR filled by scripts/gpu-wheelhouse.sh
#               on a machine with a package index); for a GPU machine that has torch, transformers, scipy,
#               scikit-learn, matplotlib, tqdm and pytest but no package index. corekit itself runs from
#               lib/ (PYTHONPATH), nothing is installed.
# --out DIR     output folder (default: $OUT, else _build/gpu-check). It receives
#                 results.jsonl   one JSON line per benchmark (the benchmarks' own records)
#                 steps.jsonl     one JSON line per step: name, exit status, seconds, budget, timed out
#                 gpu-check.log   the steps' summary and the environment
#                 runs.tar.gz     every step's log, and the executed notebooks with metrics and figures
# --budget S    wall-clock seconds for all steps together (default 540; 1200 with --dry-run); each step
#               also has its own limit (timeout), so one slow step cannot eat the rest, and B2 takes what
#               is left. A step the budget no longer covers is skipped and counts as failed.
# --dry-run     the same steps on the CPU at tiny sizes (about a minute and a half on 2 idle cores; each
#               step may take 300 s on a busy machine): tests/test_publish.py runs it so that the script
#               cannot rot between GPU sessions.
#
# Exit status 0 when every step finished with status 0; 1 otherwise (the summary names the steps).
set -uo pipefail
cd "$(dirname "$0")/.."

source scripts/gpu-common.sh
dry=0 wheels="" out="${OUT:-}" budget=""
while (($#)); do
    shared_option "$1" "${2-}"
    ((used)) || { echo "gpu-check.sh: unknown option $1 (accepted: --wheels DIR, --out DIR, --budget S, --dry-run)" >&2
                  exit 2; }
    shift "$used"
done
budget=${budget:-$((dry ? 1200 : 540))}
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-check.sh: --budget must be whole seconds, got $budget" >&2; exit 2; }
out=${out:-_build/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/results.jsonl "$out"/steps.jsonl "$out"/gpu-check.log "$out"/runs.tar.gz
PY=${PYTHON:-python3}
name=gpu-check
gpu_setup

bench=(--device "$device" --out "$out/results.jsonl")   # after every benchmark's own options
run=("$PY" -m corekit run)
runs=(--out "$work/runs")

if ((dry)); then
    # Tiny sizes: every code path of the GPU run, on one CPU thread, in seconds per step.
    step B1 300 "$PY" benchmarks/b1_batched_training.py --threads 1 --models 2 --steps 2 --p 11 "${bench[@]}"
    step B3 300 "$PY" benchmarks/b3_entk_kernel.py --threads 1 --small --p 7 --repeat 1 "${bench[@]}"
    step B4 300 "$PY" benchmarks/b4_lanczos.py --threads 1 --small --p 7 --k 4 --repeat 1 "${bench[@]}"
    step B6 300 "$PY" benchmarks/b6_ace_jacobian.py --threads 1 --parts grokking --p 7 --inputs 16 --top 2 \
        --models 1 "${bench[@]}"
    step 01_paper 300 "${run[@]}" 01_markov_cores "${runs[@]}" -p epochs 1 -p n_train 64 -p n_test 64 \
        -p seq_len 8 -p d_model 16 -p d_mlp 32 -p seeds '[0, 100]'
    step 05_paper 300 "${run[@]}" 05_entk_mlp_modular "${runs[@]}" -p p 5 -p width 16 -p epochs 10 \
        -p n_log_snapshots 2 -p n_dense_snapshots 2 -p top_k 25 -p eval_every 5
    step 06_paper 300 "${run[@]}" 06_entk_transformer_modular "${runs[@]}" -p p 5 -p d_model 16 -p d_mlp 32 \
        -p epochs 10 -p log_every_epochs 5 -p dynamics_every_epochs 5 -p top_k 8 -p extra_seeds '[]'
    step 02_slice 300 "${run[@]}" 02_grokking_cores "${runs[@]}" -p p 5 -p d_model 16 -p d_mlp 32 -p epochs 20 \
        -p fork_epoch 5 -p checkpoint_every 5 -p dense_until 10 -p checkpoint_every_after 10 -p seeds '[0]'
    step B2 300 "$PY" benchmarks/b2_tau_sweep.py --threads 1 --profile quick -p p_values '[5, 7]' \
        -p weight_decays '[1.0, 2.0]' -p omega_p 7 -p seeds '[0, 1, 2, 3]' -p p_max_epochs 20 -p omega_max_epochs 20 \
        -p eval_every 10 -p margin 5 \
        --loop-steps 2 "${bench[@]}"
else
    # GPU sizes (the benchmarks' CUDA defaults), the paper profiles, then B2 with what is left. Limits from the run
    # of 2026-12-04 on one H200: B1 58 s, B3 26 s, B4 19 s, B6 (grokking) over 60 s, 01 54 s; 06's 4,000 epochs and
    # 02's 3,000 did not finish training in 100 s and 90 s, so both now run shortened.
    step B1 60 "$PY" benchmarks/b1_batched_training.py "${bench[@]}"
    step B3 75 "$PY" benchmarks/b3_entk_kernel.py --full --subset 512 "${bench[@]}"
    step B4 60 "$PY" benchmarks/b4_lanczos.py --full "${bench[@]}"
    # B6's language-model part needs the offline GGUF (~95 MB, more than one device transfer carries):
    # the grokking part alone unless the model is installed.
    if "$PY" -c "from corekit.lm import OFFLINE; raise SystemExit(not OFFLINE['smollm2-135m'].installed())"; then
        step B6 75 "$PY" benchmarks/b6_ace_jacobian.py "${bench[@]}"
    else
        step B6 90 "$PY" benchmarks/b6_ace_jacobian.py --parts grokking "${bench[@]}"
    fi
    step 01_paper 75 "${run[@]}" 01_markov_cores --profile paper "${runs[@]}"
    step 05_paper 60 "${run[@]}" 05_entk_mlp_modular --profile paper "${runs[@]}"
    # The slices: the paper's models, batches and optimisers for the first 400 of 06's 4,000 epochs and 1,000 of 02's
    # 20,000 (02's fork comes at epoch 901).
    step 06_paper 100 "${run[@]}" 06_entk_transformer_modular --profile paper -p epochs 400 "${runs[@]}"
    step 02_slice 90 "${run[@]}" 02_grokking_cores --profile paper -p epochs 1000 "${runs[@]}"
    step B2 600 "$PY" benchmarks/b2_tau_sweep.py --profile paper -p seeds '[0, 1, 2, 3]' "${bench[@]}"
fi

finish
