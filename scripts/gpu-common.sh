# Shared by scripts/gpu-check.sh and scripts/gpu-publish.sh (sourced, not run): their common options, the notebook
# stack from wheels, the environment check, and `step`, which runs one command under the call's time budget and
# records it.
#
# The sourcing script sets: name (for messages), dry (0/1), wheels (folder or ""), out (folder, made absolute),
# budget (seconds), PY (the Python); gpu_setup then sets work (a private temporary folder, removed on exit), device
# (cuda, or cpu for a dry run) and start; every step appends to $out/steps.jsonl and $out/$name.log and to failed[].

log() { echo "$*" | tee -a "$out/$name.log"; }

# shared_option ARG NEXT: take one of the options both scripts accept (--dry-run, --wheels DIR, --out DIR, --budget S,
# --help), setting dry, wheels, out or budget; `used` is then the number of words it took (0: not one of them).
shared_option() {
    used=1
    case "$1" in
        --dry-run) dry=1 ;;
        --wheels) wheels=${2:?--wheels needs a folder}; used=2 ;;
        --out) out=${2:?--out needs a folder}; used=2 ;;
        --budget) budget=${2:?--budget needs seconds}; used=2 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) used=0 ;;
    esac
}

# gpu_setup: install the wheels (if any) into a private folder, put lib/ on PYTHONPATH, check what the run needs.
gpu_setup() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/runs" "$work/logs"
    if [[ -n $wheels ]]; then
        compgen -G "$wheels/*.whl" >/dev/null || { echo "$name.sh: no .whl files in $wheels" >&2; exit 2; }
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" \
            "$wheels"/*.whl || { echo "$name.sh: installing the wheels from $wheels failed" >&2; exit 2; }
        export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
        export JUPYTER_PATH="$work/site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
    fi
    export PYTHONPATH="$PWD/lib${PYTHONPATH:+:$PYTHONPATH}"
    export PYTHONUNBUFFERED=1 MPLBACKEND=Agg HF_HUB_OFFLINE=1
    if ((dry)); then device=cpu; else device=cuda; fi
    log "$name: $(date -u +%FT%TZ), device $device, budget ${budget} s, output $out"
    "$PY" - "$device" "$name" <<'PYEOF' 2>&1 | tee -a "$out/$name.log"
import importlib, sys
import torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda available {torch.cuda.is_available()}"
      + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
missing = [m for m in ("corekit", "papermill", "jupytext", "nbclient", "ipykernel", "transformers")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"{sys.argv[2]}.sh: missing Python packages {missing}: pass --wheels DIR (see scripts/gpu-wheelhouse.sh)")
if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit(f"{sys.argv[2]}.sh: no CUDA GPU visible to torch; on a CPU use --dry-run")
PYEOF
    (( PIPESTATUS[0] == 0 )) || exit 2
    start=$SECONDS
    failed=()
}

# step NAME LIMIT_S COMMAND...: run COMMAND with at most LIMIT_S seconds (less if the budget is nearly spent), its
# output in logs/NAME.log; append its record to steps.jsonl.
step() {
    local step_name=$1 limit=$2
    shift 2
    local left=$((budget - (SECONDS - start)))
    ((limit > left)) && limit=$left
    if ((limit < 5)); then
        log "$(printf '%-16s skipped: the budget is spent' "$step_name")"
        echo "{\"step\": \"$step_name\", \"status\": null, \"seconds\": 0, \"limit_s\": 0, \"timed_out\": false, \"skipped\": true}" \
            >>"$out/steps.jsonl"
        failed+=("$step_name")
        return
    fi
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" >"$work/logs/$step_name.log" 2>&1
    local rc=$?
    local took=$((SECONDS - t0)) timed_out=false
    ((rc == 124 || rc == 137)) && timed_out=true
    ((rc == 0)) || failed+=("$step_name")
    echo "{\"step\": \"$step_name\", \"status\": $rc, \"seconds\": $took, \"limit_s\": $limit, \"timed_out\": $timed_out, \"skipped\": false}" \
        >>"$out/steps.jsonl"
    log "$(printf '%-16s status %3d  %4d s (limit %d s)%s' "$step_name" "$rc" "$took" "$limit" \
        "$([[ $timed_out == true ]] && echo ', TIMED OUT')")"
    ((rc == 0)) || tail -n 5 "$work/logs/$step_name.log" | sed 's/^/    /' | tee -a "$out/$name.log"
}

# finish: the summary line; every step's log (and what the steps wrote into the private runs/) as runs.tar.gz in the
# output; exit status 0 when no step failed.
finish() {
    log "$name: $((SECONDS - start)) s for all steps; ${#failed[@]} failed${failed:+: ${failed[*]}}"
    cp "$out/steps.jsonl" "$out/$name.log" "$work/logs/" 2>/dev/null
    tar -czf "$out/runs.tar.gz" -C "$work" runs logs
    ((${#failed[@]} == 0))
}
