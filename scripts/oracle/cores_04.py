"""Oracle for chapter 04: the ACE authors' subject-verb agreement pipeline (``SVA_uni.py``) on the offline models.

Given a local clone of ``joshseth/cores`` (``--authors-repo``), this script imports ``cores.SVA_uni``
from that clone at run time (none of their code lives in this project) and runs its experiment as
their ``run_experiment`` does with ``run_layer_sweep=True`` and ``layer_idx=-1``, on each model that
corekit loads offline (the same GGUF weights, float32, on this machine's CPU):
their sentence generator (``build_sva_dataset``) and split, a rank-1 core at every layer
(``extract_all_cores``), keep-only / remove / flip at the last position at every layer
(``layer_sweep``), the layer of the lowest flip AUROC, the affine fit of the margin on the core
coordinate (``collect_z_and_margin``, ``fit_affine``), the cross-model Spearman of the coordinates,
and their steered generation (``generate_clean`` / ``generate_surgical``: the newest position only,
a per-step strength s* = clip((∓1 − m0)/g, −50, 50)) on held-out prompts, each continuation's first
verb scored with corekit's spaCy rule (:func:`corekit.tasks.agreement.first_verb_number`).

It writes ``results/oracle/04.json`` (command, the authors' commit, runtimes, every number) and
``results/oracle/04_sentences.json`` (their sentences, labels, head nouns and split), which chapter 04
reads to run corekit's pipeline on the same sentences.

Departures from ``run_experiment``, each stated in the record: the model is the offline GGUF file in
float32 (their code picks bfloat16 for names holding "gemma" or "llama", and loads from the Hub);
the tokenizer pads on the right (their code uses the tokenizer's default; with left padding and no
position ids, HF models shift every position); the generation demo runs on held-out agreement prompts
(``--n-generate``, ``--max-new-tokens``) instead of their three open prompts, with their seed for each.

    python scripts/oracle/cores_04.py --authors-repo ../cores
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("gemma-3-270m", "smollm2-135m")


def wilson(k: int, n: int) -> list[float]:
    """Return the Wilson 95 % interval of k successes in n trials ([0, 1] when n = 0)."""
    from corekit import stats  # noqa: PLC0415
    return [round(v, 4) for v in stats.wilson_interval(k, n)] if n else [0.0, 1.0]


def style_of(text: str) -> str:
    """Return the template of one of the authors' sentences (base, front, back, there, rel)."""
    body = text.removeprefix("In the past, ")
    if body.startswith("There "):
        return "there"
    if " that " in body:
        return "rel"
    if not body.startswith("The "):
        return "front"
    return "back" if any(body.endswith(pad) for pad in ("in the old kingdom", "in this strange world",
                                                         "in the present tense", "on most days")) else "base"


def run_model(sva, name: str, args, nlp) -> tuple[dict, dict, np.ndarray]:
    """Return the authors' pipeline's numbers on ``name``, the sentences it drew, and its held-out coordinates."""
    from corekit import lm as language_models  # noqa: PLC0415
    from corekit.tasks.agreement import first_verb_number  # noqa: PLC0415

    t0 = time.perf_counter()
    lm = language_models.load(name, device="cpu", dtype="float32")
    model, tok = lm.model, lm.tokenizer
    model.requires_grad_(True)  # as from_pretrained leaves it: their gradients flow through the parameters' graph
    default_padding = tok.padding_side
    tok.padding_side = "right"
    device = torch.device("cpu")
    quiet = io.StringIO()
    sva.seed_all(args.seed)
    with contextlib.redirect_stdout(quiet):
        ids = {w: sva.get_token_id(tok, f" {w}") for w in ("is", "are", "was", "were")}
    verbs = (ids["is"], ids["are"], ids["was"], ids["were"])
    rng = np.random.default_rng(args.seed)
    texts, y, heads = sva.build_sva_dataset(args.n_samples, rng)
    enc = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=64)
    input_ids, attn_mask = enc["input_ids"], enc["attention_mask"]
    perm = rng.permutation(len(texts))
    tr, te = perm[: len(texts) // 2], perm[len(texts) // 2:]
    _, last_pos = sva.find_head_positions(tok, input_ids, attn_mask, heads)
    n_layers = sva.get_num_layers(model)
    with contextlib.redirect_stdout(quiet):
        q_cores, mus = sva.extract_all_cores(model, input_ids, attn_mask, tr, last_pos, n_layers, *verbs,
                                             args.batch_size, device)
        rows = sva.layer_sweep(model, input_ids, attn_mask, y, te, last_pos, n_layers, q_cores, mus, *verbs,
                               args.batch_size, device)
    best = min((r for r in rows if np.isfinite(r["behavior_auc_flip"])), key=lambda r: r["behavior_auc_flip"])
    layer = int(best["layer_idx"])
    z_te, m_te = sva.collect_z_and_margin(model, input_ids, attn_mask, te, last_pos, layer, q_cores[layer],
                                          mus[layer], *verbs, args.batch_size, device)
    a, b, r2 = sva.fit_affine(z_te, m_te)
    t_core = time.perf_counter() - t0

    t1 = time.perf_counter()
    gen_idx = te[: args.n_generate]
    scored = []
    for i in gen_idx.tolist():
        prompt = texts[i]
        clean = sva.generate_clean(prompt, model, tok, device, args.seed, max_new_tokens=args.max_new_tokens)
        steered = sva.generate_surgical(prompt, model, tok, device, args.seed, layer, q_cores[layer], mus[layer],
                                        *verbs, max_new_tokens=args.max_new_tokens)
        n_clean = first_verb_number(prompt, clean[len(prompt):] if clean.startswith(prompt) else clean, nlp)
        n_steered = first_verb_number(prompt, steered[len(prompt):] if steered.startswith(prompt) else steered, nlp)
        scored.append({"index": i, "label": int(y[i]), "clean": clean, "steered": steered,
                       "number_clean": n_clean, "number_steered": n_steered})
    right = [s for s in scored if s["number_clean"] == s["label"]]
    switched = sum(s["number_steered"] == 1 - s["label"] for s in right)
    t_gen = time.perf_counter() - t1
    sweep = [{"layer": int(r["layer_idx"]), "keep_only": round(r["behavior_auc_keep"], 4),
              "remove": round(r["behavior_auc_remove"], 4), "flip": round(r["behavior_auc_flip"], 4)}
             for r in rows]
    result = {"weights": lm.weights, "n_layers": n_layers, "tokenizer_default_padding": default_padding,
              "base_auroc": round(float(rows[0]["behavior_auc_base"]), 4), "chosen_layer": layer,
              "keep_only_auroc": round(best["behavior_auc_keep"], 4),
              "remove_auroc": round(best["behavior_auc_remove"], 4), "flip_auroc": round(best["behavior_auc_flip"], 4),
              "margin_fit": {"a": round(a, 4), "b": round(b, 4), "r2": round(r2, 4)},
              "layer_sweep": sweep,
              "generation": {"prompts": len(gen_idx), "max_new_tokens": args.max_new_tokens, "right": len(right),
                             "switched": switched, "rate": round(switched / len(right), 4) if right else None,
                             "wilson95": wilson(switched, len(right)), "examples": scored[:8]},
              "runtime_s": {"core": round(t_core, 1), "generation": round(t_gen, 1)}}
    sentences = {"texts": texts, "labels": y.tolist(), "heads": heads, "styles": [style_of(t) for t in texts],
                 "train": tr.tolist(), "test": te.tolist()}
    model.requires_grad_(False)
    language_models.clear_loaded()
    return result, sentences, z_te


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--authors-repo", required=True, type=Path, help="local clone of joshseth/cores")
    ap.add_argument("--models", nargs="+", default=list(MODELS), help="offline model names (default: both)")
    ap.add_argument("--n-samples", type=int, default=600, help="sentences drawn, half train, half test (default 600)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16, help="their default")
    ap.add_argument("--n-generate", type=int, default=100,
                    help="held-out prompts for the steered generation (their demo recomputes the whole sequence three "
                         "times per token: ~12 s a prompt for Gemma-3-270M on 2 CPU cores)")
    ap.add_argument("--max-new-tokens", type=int, default=6)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "oracle" / "04.json")
    args = ap.parse_args(argv)
    repo = args.authors_repo.expanduser().resolve()
    if not (repo / "src" / "cores" / "SVA_uni.py").is_file():
        ap.error(f"--authors-repo must be a clone of joshseth/cores (src/cores/SVA_uni.py), got {repo}")
    if args.n_samples < 4 or args.n_samples % 2:
        ap.error(f"--n-samples must be an even integer ≥ 4, got {args.n_samples}")
    if args.n_generate < 0 or args.max_new_tokens < 1:
        ap.error("--n-generate must be ≥ 0 and --max-new-tokens ≥ 1")
    sys.path.insert(0, str(repo / "src"))
    from cores import SVA_uni as sva  # noqa: PLC0415  (the authors' code, from their clone)

    from corekit.tasks.agreement import load_spacy  # noqa: PLC0415

    torch.set_grad_enabled(True)
    nlp = load_spacy()
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    from corekit import oracle  # noqa: PLC0415
    record = {"command": oracle.command_line(sys.argv[0], argv if argv is not None else sys.argv[1:]),
              "authors_repo": "joshseth/cores", "authors_commit": commit, "authors_file": "src/cores/SVA_uni.py",
              "torch": torch.__version__, "machine": platform.machine(), "seeds": [args.seed],
              "n_samples": args.n_samples, "split": "half train, half test (their permutation)",
              "departures": ["offline GGUF weights in float32 (their code: bfloat16 for gemma / llama names)",
                             "the tokenizer pads on the right",
                             f"generation on {args.n_generate} held-out agreement prompts, {args.max_new_tokens} new "
                             "tokens, their seed for each, first verb scored with corekit's spaCy rule"],
              "models": {}}
    t0 = time.perf_counter()
    coordinates, sentences = {}, None
    for name in args.models:
        print(f"{name}: running SVA_uni's pipeline", flush=True)
        result, drawn, z_te = run_model(sva, name, args, nlp)
        if sentences is not None and drawn["texts"] != sentences["texts"]:
            raise SystemExit("the authors' generator drew different sentences for different models")
        sentences = drawn
        coordinates[name] = z_te
        record["models"][name] = result
        print(f"  layer {result['chosen_layer']}: base {result['base_auroc']}, keep / remove / flip "
              f"{result['keep_only_auroc']} / {result['remove_auroc']} / {result['flip_auroc']}, R² "
              f"{result['margin_fit']['r2']}; generation {result['generation']['switched']} of "
              f"{result['generation']['right']}", flush=True)
    names = list(coordinates)
    record["cross_model_spearman"] = {f"{a} ~ {b}": round(float(spearmanr(coordinates[a], coordinates[b])[0]), 4)
                                      for i, a in enumerate(names) for b in names[i + 1:]}
    record["runtime_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    (args.out.parent / "04_sentences.json").write_text(json.dumps(
        {"source": f"joshseth/cores {commit[:10]} SVA_uni.build_sva_dataset(n={args.n_samples}, "
                   f"rng=default_rng({args.seed})), their permutation for the split", **sentences}) + "\n")
    print(f"wrote {args.out} and 04_sentences.json ({record['runtime_s']} s); Spearman {record['cross_model_spearman']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
