"""Oracle for chapter 02: the ACE authors' grokking-core analysis, run by their own code on our checkpoints.

Given a local clone of ``joshseth/cores`` (``--authors-repo``) and the checkpoints a run of chapter 02
exported (``-p export_checkpoints PATH``; read with ``grokking_cores.load_checkpoints``), this script maps
every model's weights into the authors' ``TwoLayerTransformer`` (``src/cores/models.py``:
``nn.TransformerEncoderLayer`` blocks with a causal mask), checks that both models compute the same
last-token state, runs their ``analyze_epoch``
(``src/cores/modular_addition_analysis.py``) on their test loader, runs corekit's
``grokking_cores.last_token_summary(analysis="authors")`` on the same weights and writes both, with the
command, the authors' commit and the runtime, to ``results/oracle/02.json``. Their code is imported
from the clone at run time; nothing of it lives in this project.

One adaptation: their ``load_model`` builds ``TwoLayerTransformer(vocab_size, d_model)`` with its
default ``d_ff=512``; the script passes the run's ``d_mlp`` by wrapping that constructor.

    python scripts/oracle/cores_02.py --authors-repo ../cores --checkpoints ckpts_02.pt
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("energy", "necessary", "necessary_strict", "sufficient", "sufficient_strict", "r2", "circle", "modes")


def authors_state(state: dict, m: int, config: dict) -> dict:
    """Return model m of a corekit ensemble state_dict as the authors' ``TwoLayerTransformer`` state_dict."""
    P = {k[len("params."):]: v[m].detach().float() for k, v in state.items()}
    D, H = config["d_model"], config["n_heads"]
    out = {"token_emb.weight": P["W_E"], "pos_emb.weight": torch.zeros(64, D), "lm_head.weight": P["W_U"].T,
           "lm_head.bias": P["b_U"]}
    out["pos_emb.weight"][:P["W_pos"].shape[0]] = P["W_pos"]
    for i in range(config["n_layers"]):
        g = lambda n: P[f"{i}_{n}"]  # noqa: E731
        pre = f"layer{i + 1}."
        out[pre + "self_attn.in_proj_weight"] = torch.cat([g(f"W_{c}").permute(0, 2, 1).reshape(D, D) for c in "QKV"])
        out[pre + "self_attn.in_proj_bias"] = torch.cat([g(f"b_{c}").reshape(D) for c in "QKV"])
        out[pre + "self_attn.out_proj.weight"] = g("W_O").reshape(D, D).T
        out[pre + "self_attn.out_proj.bias"] = g("b_O")
        out[pre + "linear1.weight"], out[pre + "linear1.bias"] = g("W_in").T, g("b_in")
        out[pre + "linear2.weight"], out[pre + "linear2.bias"] = g("W_out").T, g("b_out")
        for j in (1, 2):
            out[pre + f"norm{j}.weight"], out[pre + f"norm{j}.bias"] = g(f"ln{j}_w"), g(f"ln{j}_b")
    assert H * (D // H) == D
    return out


def chapter_claims(rows: list[dict], S: int, seeds: list | None = None) -> dict:
    """Return chapter 02's "_authors" claims computed from the authors' own numbers, as the chapter defines them.

    Each weight-decay model m (the first S) at its own checkpoints: grokking, the first checkpoint where its test
    accuracy is ≥ 0.99 (the last when never); before, the first where it fits its training pairs (≥ 0.99; 0 when
    never), or the one before its grokking if that is not earlier; final, the last checkpoint. Model S + m (its
    ω → 0 branch) is read at model m's checkpoints. Growth: final / max(at grokking, 1). Values are {"seed N":
    value} over the weight-decay seeds (``seeds``, the first S), as the chapter's claims are.
    """
    get = lambda i, key, m: rows[i]["models"][m]["authors"][key]  # noqa: E731
    first = lambda key, m: next((i for i in range(len(rows)) if get(i, key, m) >= 0.99), None)  # noqa: E731
    final = len(rows) - 1
    grok = [final if first("acc", m) is None else first("acc", m) for m in range(S)]
    memorised = [first("train_acc", m) or 0 for m in range(S)]
    before = [mem if mem < g else max(0, g - 1) for mem, g in zip(memorised, grok)]
    labels = [f"seed {s}" for s in (seeds or list(range(S)))[:S]]
    per_seed = lambda values: dict(zip(labels, values))  # noqa: E731
    at = lambda key, idx, offset=0: [get(i, key, offset + m) for m, i in enumerate(idx)]  # noqa: E731
    growth = lambda key, offset=0: per_seed([round(f / max(g, 1), 2) for f, g in zip(  # noqa: E731
        at(key, [final] * S, offset), at(key, grok, offset))])
    return {"unit_circle_fraction_at_grok_authors": per_seed([round(v, 3) for v in at("circle", grok)]),
            "operator_r2_before_authors": per_seed([round(v, 3) for v in at("r2", before)]),
            "operator_r2_after_authors": per_seed([round(min(get(i, "r2", m) for i in range(g, len(rows))), 3)
                                                   for m, g in enumerate(grok)]),
            "necessary_rank_growth_authors": growth("necessary"),
            "sufficient_rank_growth_authors": growth("sufficient"),
            "modes_at_grok_authors": at("modes", grok), "modes_final_authors": per_seed(at("modes", [final] * S)),
            "wd0_necessary_rank_growth_authors": growth("necessary", S)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--authors-repo", required=True, type=Path, help="local clone of joshseth/cores")
    ap.add_argument("--checkpoints", required=True, type=Path, help="file written by chapter 02's export_checkpoints")
    ap.add_argument("--epochs", type=float, nargs="*", help="checkpoint epochs to analyse (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "oracle" / "02.json")
    args = ap.parse_args(argv)
    repo = args.authors_repo.expanduser().resolve()
    if not (repo / "src" / "cores" / "modular_addition_analysis.py").is_file():
        ap.error(f"--authors-repo must be a clone of joshseth/cores (src/cores/modular_addition_analysis.py), got {repo}")
    if not args.checkpoints.is_file():
        ap.error(f"--checkpoints {args.checkpoints} does not exist: run chapter 02 with -p export_checkpoints PATH")
    sys.path.insert(0, str(repo / "src"))
    from cores import modular_addition_analysis as analysis  # noqa: PLC0415  (the authors' code, from their clone)
    from cores.models import ModAddDataset, TwoLayerTransformer, eval_accuracy  # noqa: PLC0415
    from torch.utils.data import DataLoader  # noqa: PLC0415

    from corekit.chapters import grokking_cores  # noqa: PLC0415
    from corekit.tasks.modular import modular_addition  # noqa: PLC0415

    weights_sha256 = hashlib.sha256(args.checkpoints.read_bytes()).hexdigest()   # names the weights this record read
    export = grokking_cores.load_checkpoints(args.checkpoints)
    config, p = export.config.as_dict(), export.p
    if not (config["causal"] and config["norm"] == "post" and config["qkv_bias"] and config["bias"]):
        raise SystemExit("the checkpoints must come from the authors' block (causal, post-LN, biases): "
                         f"got causal={config['causal']}, norm={config['norm']!r}, qkv_bias={config['qkv_bias']}")
    if export.split != "numpy" or export.data_seed != 42 or export.train_frac != 0.5:
        raise SystemExit("the checkpoints must use the authors' split (split numpy, data_seed 42, train_frac 0.5)")
    analysis.TwoLayerTransformer = functools.partial(TwoLayerTransformer, d_ff=config["d_mlp"], n_head=config["n_heads"])
    test_loader = DataLoader(ModAddDataset(p=p, train=False), batch_size=512, shuffle=False)
    train_loader = DataLoader(ModAddDataset(p=p, train=True), batch_size=512, shuffle=False)
    task = modular_addition(p, 0.5, 42, split="numpy")
    ours_test = torch.stack([task.a[task.test_idx], task.b[task.test_idx]], 1)
    if not torch.equal(test_loader.dataset.data[:, :2], ours_test):
        raise SystemExit("the authors' test pairs differ from corekit's numpy split")
    tokens = task.tokens(equals=False)
    data = (tokens[task.train_idx], tokens[task.test_idx], task.labels[task.test_idx], tokens, task.labels)
    model = export.model()
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    epochs = sorted(export.epochs) if not args.epochs else [e for e in sorted(export.epochs) if e in args.epochs]
    from corekit import oracle  # noqa: PLC0415
    record = {"command": oracle.command_line(sys.argv[0], argv if argv is not None else sys.argv[1:]),
              "authors_repo": "joshseth/cores", "authors_commit": commit, "torch": torch.__version__,
              "machine": platform.machine(), "weights_sha256": weights_sha256, "p": p, "config": config,
              "seeds": export.seeds, "checkpoints": []}
    t0 = time.perf_counter()
    worst = {k: 0.0 for k in KEYS}
    with tempfile.TemporaryDirectory() as tmp:
        for e in epochs:
            state = export.epochs[e]
            model.load_state_dict(state)
            payload = {"model_state_dicts": [authors_state(state, m, config) for m in range(model.n_models)]}
            tag = int(round(e))
            torch.save(payload, Path(tmp) / f"epoch_{tag:06d}.pt")
            ours = grokking_cores.last_token_summary(model, *data, analysis="authors")
            with torch.no_grad():
                h_ours = model.residual(data[1])[:, :, -1]
            row = {"epoch": e, "models": []}
            for m in range(model.n_models):
                theirs_model = analysis.load_model(tag, m, torch.device("cpu"), Path(tmp), vocab_size=p,
                                                   d_model=config["d_model"])
                with torch.no_grad():
                    _, _, h2 = theirs_model(data[1], return_states=True)
                out = analysis.analyze_epoch(Path(tmp), ep=tag, m_ix=m, test_loader=test_loader,
                                             device=torch.device("cpu"), vocab_size=p, d_model=config["d_model"])
                theirs = {"energy": None, "necessary": int(out["r_nec"]), "necessary_strict": int(out["r_nec_strict"]),
                          "sufficient": int(out["r_suf"]), "sufficient_strict": int(out["r_suf_strict"]),
                          "r2": float(out["r2"]), "circle": float(out["frac_near"]),
                          "modes": int(np.asarray(out["present"]).sum()), "acc": float(out["acc"]), "k": int(out["k"]),
                          "train_acc": float(eval_accuracy(theirs_model, train_loader, torch.device("cpu"),
                                                           last_token=True))}
                mine = {k: (float(ours[k][m]) if k in ("r2", "circle") else int(ours[k][m])) for k in KEYS}
                theirs["energy"] = None
                diffs = {k: abs(mine[k] - theirs[k]) for k in KEYS if theirs[k] is not None}
                for k, d in diffs.items():
                    worst[k] = max(worst[k], d)
                row["models"].append({"authors": theirs, "corekit_authors_analysis": mine, "diff": diffs,
                                      "max_abs_h_diff": float((h2[:, -1] - h_ours[m]).abs().max())})
            record["checkpoints"].append(row)
            print(f"epoch {e:g}: " + "; ".join(
                f"m{m} nec {r['authors']['necessary']}/{r['corekit_authors_analysis']['necessary']} "
                f"R² {r['authors']['r2']:.3f}/{r['corekit_authors_analysis']['r2']:.3f} "
                f"modes {r['authors']['modes']}/{r['corekit_authors_analysis']['modes']}"
                for m, r in enumerate(row["models"])), flush=True)
    record["runtime_s"] = round(time.perf_counter() - t0, 1)
    record["claims"] = chapter_claims(record["checkpoints"], model.n_models // 2, export.seeds)
    record["grok_epoch"] = next((row["epoch"] for row in record["checkpoints"]
                                 if min(r["authors"]["acc"] for r in row["models"][:model.n_models // 2]) >= 0.99), None)
    record["max_abs_diff"] = worst
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print("largest |ours − theirs| over all checkpoints and models:", worst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
