"""The book page "Your own model" (book/own_model.md) runs as printed, on the offline SmolLM2-135M.

Its two code blocks are executed in order, in one namespace, exactly as the page shows them; each
method stays within 15 lines besides its imports. The numbers they compute are checked for what the
page says they are (the same calls are checked against autograd on every family in test_lm_families.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
from corekit import lm as llm  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "book" / "own_model.md"


def blocks() -> list[str]:
    """Return the page's python code blocks, in order."""
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def method_lines(code: str) -> int:
    """Return the lines of a block that are neither blank nor imports."""
    return sum(1 for line in code.splitlines() if line.strip() and not line.startswith(("import ", "from ")))


def test_each_method_is_at_most_fifteen_lines():
    ace_block, entk_block = blocks()
    assert method_lines(ace_block) <= 15 and method_lines(entk_block) <= 15


@pytest.mark.llm
def test_the_page_runs_as_printed():
    if not llm.OFFLINE["smollm2-135m"].installed():
        pytest.skip(llm.OFFLINE["smollm2-135m"].missing_message())
    torch.set_num_threads(1)
    ns: dict = {}
    for code in blocks():
        exec(compile(code, str(PAGE), "exec"), ns)
    model, core, rank, obs = ns["model"], ns["core"], ns["rank"], ns["obs"]
    D = model.d_model
    assert core.basis.shape == (1, D, D) and core.sigma.shape == (1, D)
    assert bool((core.sigma[0, :-1] >= core.sigma[0, 1:] - 1e-12).all())
    w = torch.linalg.eigvalsh(obs[0])               # E_n[J_nᵀJ_n] over 8 prompts of 4 logits: rank ≤ 32
    assert float(w[:-32].abs().max()) < 1e-8 * float(w[-1]) and float(w[-32]) > 1e-6 * float(w[-1])
    assert 1 <= int(rank[0]) <= 7                    # 8 prompts: the covariance, and so the core, has rank ≤ 7
    assert float(core.sigma[0, 7:].max()) < 1e-6 * float(core.sigma[0, 0])
    pairs, scores, op = ns["pairs"], ns["scores"], ns["op"]
    assert op.module_path == "model.layers.14.mlp.down_proj"
    assert bool((pairs.values[:-1] >= pairs.values[1:]).all()) and float(pairs.values[-1]) > 0
    assert float(pairs.residuals.max()) <= 1e-6 * float(pairs.values[0])
    assert scores.shape == (4, 4)
