"""Oracle for chapter 06: the eNTK authors' transformer run and Table 2 measurement, from their own code.

Given a local clone of ``jylin04/mi-ntk`` (``--authors-repo``), this script executes the definition
cells of the authors' notebook ``modular_arithmetic_transformer_v4.ipynb`` (data split, model,
``train`` / ``test``, Fourier features, ``subspace_overlap``, ``empirical_ntk_by_layer``) and
``ntk.eig_decompose`` from that clone at run time (none of their code lives in this project), trains
their model for each seed as their cell 26 does, and measures every parameter's kernel the way their
Table 2 cells do. It then loads the same weights into corekit's model and runs chapter 06's
measurement (:mod:`corekit.chapters.entk_transformer_modular`) on them, and writes both, with the command, the authors'
commit and the runtimes, to ``results/oracle/06.json``; the weights go beside it.

Two departures from the authors' notebook, both exact: the in-loop eNTK of cell 26 (which consumes no
random numbers) is left out of the training loop, and the kernel mean over all (p+1)² output pairs,
``K[:, :, :C, :C].mean((2, 3))``, is computed as the authors' ``empirical_ntk_by_layer`` of the
model's summed output divided by C² (the same matrix; the script checks it on a subset of inputs
against the authors' full (N, N, C, C) kernel).

    python scripts/oracle/mi_ntk_06.py --authors-repo ../mi-ntk --seeds 2 3
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "modular_arithmetic_transformer_v4.ipynb"
#: The notebook's definition cells, found by what they define.
DEFINITIONS = ("def fourier_cols", "def gen_train_test_with_labels", "def gen_total_data", "class MATransformer",
               "def train(", "def test(", "def subspace_overlap", "def empirical_ntk_by_layer")
PARAMS = ("embed.W_E", "pos_embed.W_pos", "transformer_block.attn.W_Q", "transformer_block.attn.W_K",
          "transformer_block.attn.W_V", "transformer_block.attn.W_O", "transformer_block.mlp.W_in",
          "transformer_block.mlp.W_out", "unembed.W_U")
SHORT = dict(zip(PARAMS, ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U")))


class HyperParams:
    """The authors' settings (their cell 11); the seed is set per run."""

    p, d_model, d_mlp, n_heads, alpha, lr, wd, batch_size, epochs, log_every, seed = (
        29, 64, 256, 4, 0.5, 3e-4, 1.0, 64, 4000, 20, 2)


def authors_namespace(repo: Path) -> dict:
    """Return a namespace holding the authors' notebook definitions and their ``ntk`` module, loaded from ``repo``."""
    cells = json.loads((repo / NOTEBOOK).read_text())["cells"]
    sys.path.insert(0, str(repo))
    import ntk  # noqa: PLC0415  (the authors' module, from their clone)
    ns = dict(math=math, np=np, t=torch, nn=nn, F=F, Tensor=Tensor, Tuple=Tuple, Optional=Optional, Dict=Dict,
              List=List, OrderedDict=OrderedDict, ntk=ntk, params=HyperParams())
    found = set()
    for cell in cells:
        src = "".join(cell["source"])
        hits = [d for d in DEFINITIONS if d in src]
        if cell["cell_type"] == "code" and hits:
            exec(compile(src, f"{NOTEBOOK}:{cells.index(cell)}", "exec"), ns)
            found.update(hits)
    missing = set(DEFINITIONS) - found
    if missing:
        raise SystemExit(f"{repo / NOTEBOOK} lacks the definitions {sorted(missing)}: not the expected notebook")
    return ns


def train_authors(ns: dict, seed: int, epochs: int) -> tuple[nn.Module, dict, np.ndarray]:
    """Return the authors' model trained for ``seed`` as their cells 11-26 do, its log and the training pairs."""
    from torch.utils.data import DataLoader, TensorDataset  # noqa: PLC0415
    params = ns["params"]
    params.seed = seed
    torch.manual_seed(seed)                                                          # cell 11
    train_x, train_y, test_x, test_y = ns["gen_train_test_with_labels"](params.alpha, params.p)   # cell 18
    train_loader = DataLoader(TensorDataset(torch.tensor(train_x, dtype=torch.long),
                                            torch.tensor(train_y, dtype=torch.long)),
                              batch_size=params.batch_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(torch.tensor(test_x, dtype=torch.long),
                                           torch.tensor(test_y, dtype=torch.long)),
                             batch_size=params.batch_size, shuffle=False)
    model = ns["MATransformer"](params.p + 1, params.d_model, params.n_heads, params.d_mlp)   # cell 20
    opt = torch.optim.AdamW(model.parameters(), lr=params.lr, weight_decay=params.wd)
    device = torch.device("cpu")
    log = {"epoch": [], "train_loss": [], "test_acc": [], "train_acc": []}
    for epoch in range(epochs):                                                      # cell 26
        loss = ns["train"](model, train_loader, opt, device)
        if epoch % params.log_every == 0:
            log["epoch"].append(epoch)
            log["train_loss"].append(loss)
            log["test_acc"].append(ns["test"](model, test_loader, device))
            log["train_acc"].append(ns["test"](model, train_loader, device))
    return model, log, train_x


class SummedOutput(nn.Module):
    """The authors' model with its C outputs summed: the eNTK of this output is Σ_{c,c'} K_cc'."""

    def __init__(self, model: nn.Module, n_out: int):
        super().__init__()
        self.model, self.n_out = model, n_out

    def forward(self, x):
        return self.model(x)[:, :self.n_out].sum(-1, keepdim=True)


def authors_kernels(ns: dict, model: nn.Module, X: Tensor, C: int) -> dict[str, Tensor]:
    """Return {parameter: K (N, N)} = the authors' ``entk[name][:, :, :C, :C].mean((2, 3))``."""
    per = ns["empirical_ntk_by_layer"](SummedOutput(model, C), X, X)
    return {name[len("model."):]: K[:, :, 0, 0] / C ** 2 for name, K in per.items()}


def check_summed_kernel(ns: dict, model: nn.Module, X: Tensor, C: int) -> float:
    """Return the largest relative difference between the summed-output kernels and the authors' full ones on X."""
    full = ns["empirical_ntk_by_layer"](model, X, X)
    summed = authors_kernels(ns, model, X, C)
    return max(float((full[n][:, :, :C, :C].mean(dim=(2, 3)) - summed[n]).abs().max() / summed[n].abs().max())
               for n in full)


def authors_spectrum(model: nn.Module, p: int) -> np.ndarray:
    """Return the authors' embedding Fourier spectrum (p,): mean over d_model of |FFT(W_E[:p])|² (their cell 32)."""
    W_E = model.embed.W_E.detach()[:p, :]
    return (torch.fft.fft(W_E, dim=0).abs() ** 2).mean(dim=1).numpy()


def keys_from_spectrum(spectrum: np.ndarray, p: int) -> list[int]:
    """Return the frequencies 1…⌊p/2⌋ above the largest drop of the sorted spectrum (the authors pick them by eye)."""
    power = spectrum[1:p // 2 + 1]
    order = np.argsort(-power)
    ratios = power[order][:-1] / power[order][1:]
    return sorted(int(k) + 1 for k in order[:int(np.argmax(ratios[:max(1, p // 4)])) + 1])


def authors_scores(ns: dict, kernels: dict[str, Tensor], keys: list[int], p: int, top_k: int) -> dict:
    """Return per parameter the authors' top eigenvalues and their block overlaps with the sum and input features."""
    X, _ = ns["gen_total_data"](p)
    feats = ns["build_fourier_features"](X[:, :2], p, k=[k - 1 for k in keys])
    n = 2 * len(keys)
    blocks = [(0, n + 1), (n + 1, 2 * n + 1)]
    out = {}
    for name, K in kernels.items():
        values, vectors = ns["ntk"].eig_decompose(K.clone(), topk=top_k)
        Q = vectors.numpy()
        out[SHORT[name]] = {
            "eigenvalues": [float(v) for v in values],
            "blocks": [list(b) for b in blocks],
            "sum": [ns["subspace_overlap"](Q[:, a:b], feats, key="sum")[1] / n for a, b in blocks],
            "input": [ns["subspace_overlap"](Q[:, a:b], feats, key="axis_sum")[1] / n for a, b in blocks],
        }
    return out


def corekit_scores(state: dict, keys_hint: list[int], p: int, top_k: int) -> dict:
    """Return chapter 06's measurement (corekit) on the authors' weights: logits difference, keys and block scores."""
    from corekit.chapters import entk_transformer_modular  # noqa: PLC0415
    from corekit.models import BatchedTransformer, TransformerConfig, load_lin_weights  # noqa: PLC0415
    from corekit.tasks.modular import modular_addition  # noqa: PLC0415
    model = BatchedTransformer(TransformerConfig.entk_authors(p), seeds=[0])   # the authors' sizes and draw
    load_lin_weights(model, 0, state)
    tokens = modular_addition(p, 0.5, 0, split="python").tokens()
    result = entk_transformer_modular.measure(model, 0, tokens, p, top_k=top_k)
    return {"keys": result.keys, "scores": result.table(), "model": model}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--authors-repo", required=True, type=Path, help="local clone of jylin04/mi-ntk")
    ap.add_argument("--seeds", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--epochs", type=int, default=4000)
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "oracle" / "06.json")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    repo = args.authors_repo.expanduser().resolve()
    if not (repo / NOTEBOOK).is_file() or not (repo / "ntk.py").is_file():
        ap.error(f"--authors-repo must be a clone of jylin04/mi-ntk (with {NOTEBOOK} and ntk.py), got {repo}")
    torch.set_num_threads(args.threads)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    ns = authors_namespace(repo)
    p = ns["params"].p
    X = torch.tensor(ns["gen_total_data"](p)[0])
    weights_dir = args.out.parent / "weights"
    weights_dir.mkdir(parents=True, exist_ok=True)
    from corekit import oracle  # noqa: PLC0415
    record = {"command": oracle.command_line(sys.argv[0], argv if argv is not None else sys.argv[1:]),
              "authors_repo": "jylin04/mi-ntk", "authors_commit": commit, "notebook": NOTEBOOK,
              "torch": torch.__version__, "machine": platform.machine(), "threads": args.threads,
              "epochs": args.epochs, "top_k": args.top_k, "seeds": {}}
    for seed in args.seeds:
        t0 = time.perf_counter()
        model, log, train_x = train_authors(ns, seed, args.epochs)
        train_s = time.perf_counter() - t0
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        weights = weights_dir / f"06_seed{seed}.pt"
        torch.save(state, weights)
        spectrum = authors_spectrum(model, p)
        keys = keys_from_spectrum(spectrum, p)
        t1 = time.perf_counter()
        kernel_check = check_summed_kernel(ns, model.eval(), X[:48], p + 1)
        scores = authors_scores(ns, authors_kernels(ns, model.eval(), X, p + 1), keys, p, args.top_k)
        measure_s = time.perf_counter() - t1
        acc = np.asarray(log["test_acc"])
        ours = corekit_scores(state, keys, p, args.top_k)
        with torch.no_grad():
            theirs_logits = model.eval()(X).double()
            ours_logits = ours["model"](X)[0, :, -1].double()
        diff = {name: {fam: max(abs(a - b) for a, b in zip(v[fam], ours["scores"][name][fam])) for fam in ("sum", "input")}
                for name, v in scores.items()}
        record["seeds"][str(seed)] = {
            "weights": str(weights.relative_to(ROOT)) if weights.is_relative_to(ROOT) else str(weights),
            "train_pairs_head": train_x[:5, :2].tolist(),
            "log": log, "train_seconds": round(train_s, 1), "measure_seconds": round(measure_s, 1),
            "first_epoch_test_acc_50": next((int(e) for e, a in zip(log["epoch"], acc) if a >= 50), None),
            "first_epoch_test_acc_99": next((int(e) for e, a in zip(log["epoch"], acc) if a >= 99), None),
            "final_test_acc": float(acc[-1]) / 100, "spectrum": spectrum.tolist(), "keys": keys,
            "summed_kernel_check_rel": kernel_check, "authors": scores,
            "corekit": {"keys": ours["keys"], "scores": ours["scores"],
                        "max_abs_logit_diff": float((theirs_logits - ours_logits).abs().max())},
            "max_abs_diff_of_max": max(max(d.values()) for d in diff.values()),
        }
        s = record["seeds"][str(seed)]
        print(f"seed {seed}: trained in {train_s:.0f} s; test acc ≥ 50 % at {s['first_epoch_test_acc_50']}, ≥ 99 % at "
              f"{s['first_epoch_test_acc_99']}; keys {keys} (corekit {ours['keys']}); W_U sum {scores['W_U']['sum']}, "
              f"input {scores['W_U']['input']}; largest |ours − theirs| {s['max_abs_diff_of_max']:.4f} of max; "
              f"logits differ by {s['corekit']['max_abs_logit_diff']:.1e}", flush=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
