"""The residual-stream eNTK operator of a causal LM (corekit.entk.ResidualStreamNTK) against independent references.

A tiny random Gemma-3 (float64, sliding window shorter than the contexts) is small enough for the full
output eNTK: the Jacobian of every logit with respect to the MLP down-projection by ``jacrev`` through
the whole Hugging Face model. Its nonzero spectrum must equal that of K̃ = S^{1/2} K_r S^{1/2}. Tests
marked ``llm`` repeat the checks on a few short contexts of the real Gemma-3-270M.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from torch.func import functional_call, jacrev  # noqa: E402

from corekit import entk
from corekit import lm as llm  # noqa: E402
from corekit.chapters.entk_gemma_grammar import stream_of  # noqa: E402


def tiny_gemma(softcap=None) -> llm.LM:
    """Return a tiny random Gemma-3 causal LM (3 blocks, d_model 16, vocabulary 43) in float64."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<eos>"] + [f"w{i}" for i in range(40)])}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    cfg = transformers.Gemma3TextConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=8, sliding_window=4,
                                        final_logit_softcapping=softcap, max_position_embeddings=64, pad_token_id=0,
                                        eos_token_id=2, bos_token_id=2)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    model = model.double().eval().requires_grad_(False)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return llm.LM("tiny-gemma3", model, tok, "test")


@pytest.fixture(scope="module")
def tiny():
    lm = tiny_gemma()
    ids = torch.randint(3, 43, (3, 6), generator=torch.Generator().manual_seed(1))
    return lm, ids


def full_output_entk(lm: llm.LM, ids: torch.Tensor, layer: int) -> torch.Tensor:
    """Return the eNTK (N·V, N·V) of the last-token logits w.r.t. block ``layer``'s down-projection (jacrev, whole model)."""
    name = f"model.layers.{layer - 1}.mlp.down_proj.weight"
    W = dict(lm.model.named_parameters())[name]
    J = jacrev(lambda w: functional_call(lm.model, {name: w}, (ids,)).logits[:, -1])(W)
    J = J.reshape(-1, W.numel())
    return J @ J.T


@pytest.mark.parametrize("layer", [1, 2, 3])
def test_spectrum_matches_full_output_entk(tiny, layer):
    lm, ids = tiny
    op = entk.ResidualStreamNTK(lm, ids, layer, chunk_size=2)
    with torch.no_grad():
        ref_out = lm.model.model(input_ids=ids).last_hidden_state[:, -1]
    torch.testing.assert_close(op.outputs(), ref_out, rtol=1e-6, atol=1e-6)   # cached path = whole model
    full = torch.linalg.eigvalsh(full_output_entk(lm, ids, layer)).flip(0)[:op.n]
    dense = op.dense()
    ours = torch.linalg.eigvalsh(dense).flip(0)
    assert float((ours - full).abs().max() / full[0]) < 1e-6
    V = torch.randn(5, op.n, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    KV = op.matvec(V)
    assert float((KV - V @ dense).abs().max() / (V @ dense).abs().max()) < 1e-5   # JVP path = Jacobian path
    pairs = entk.lanczos(op.matvec, op.n, 6, block_size=4, max_steps=op.n // 4)
    assert float(((pairs.values - ours[:6]).abs() / ours[:6]).max()) < 1e-6


def test_gram_sqrt_and_scores():
    U = torch.randn(1000, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    S = entk.unembedding_gram(U, chunk=300)
    torch.testing.assert_close(S, U.T @ U)
    R = entk.psd_sqrt(S)
    torch.testing.assert_close(R @ R, S)
    torch.testing.assert_close(R, R.T)
    N, d, k = 6, 5, 3
    vecs = torch.randn(N * d, k, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    scores = entk.eigenvector_scores(vecs, N)
    for j in range(k):
        u, s, _ = np.linalg.svd(vecs[:, j].reshape(N, d).numpy())
        ref = u[:, 0] * s[0]
        ref = ref * np.sign(ref[np.argmax(np.abs(ref))])
        np.testing.assert_allclose(scores[j].numpy(), ref, rtol=1e-10, atol=1e-12)


def test_bad_input(tiny):
    lm, ids = tiny
    with pytest.raises(ValueError, match="layer must be an integer in \\[1, 3\\]"):
        entk.ResidualStreamNTK(lm, ids, 4)
    with pytest.raises(ValueError, match="input_ids must be"):
        entk.ResidualStreamNTK(lm, ids[0], 1)
    with pytest.raises(ValueError, match="soft-caps its logits"):
        entk.ResidualStreamNTK(tiny_gemma(softcap=5.0), ids, 1)
    op = entk.ResidualStreamNTK(lm, ids, 3)
    with pytest.raises(ValueError, match="V must be"):
        op.matvec(torch.zeros(2, op.n + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="vectors must be"):
        entk.eigenvector_scores(torch.zeros(10, 2), 3)


def test_layer_names_the_hugging_face_block(tiny):
    # notebook 07's `layer` N differentiates model.layers.N.mlp.down_proj and reads that block's output
    lm, ids = tiny
    for N in range(lm.n_layers):
        stream = stream_of(lm, N)
        op = entk.ResidualStreamNTK(lm, ids, stream)
        assert op.linear is lm.model.get_submodule(f"model.layers.{N}.mlp.down_proj")
        assert op.module_path == f"model.layers.{N}.mlp.down_proj"
        out = {}
        handle = lm.model.get_submodule(f"model.layers.{N}").register_forward_hook(
            lambda m, a, o: out.setdefault("h", o[0] if isinstance(o, tuple) else o))
        try:
            with llm.residual_hooks(lm, read=[stream]) as seen:
                lm.model(input_ids=ids)
        finally:
            handle.remove()
        torch.testing.assert_close(seen[stream], out["h"], rtol=0, atol=0)
    for bad in (-1, lm.n_layers, 1.0):
        with pytest.raises(ValueError, match="model.layers.N"):
            stream_of(lm, bad)


@pytest.mark.llm
@pytest.mark.parametrize("layer", [16, 17])
def test_gemma_lanczos_matches_dense(layer):
    if not llm.OFFLINE["gemma-3-270m"].installed():
        pytest.skip("gemma-3-270m is not installed (bash scripts/install-models.sh)")
    lm = llm.load("gemma-3-270m", device="cpu", dtype="float32")
    ids = torch.tensor([lm.tokenizer("Once upon a time, there")["input_ids"][:6],
                        lm.tokenizer("The dog ran to the park")["input_ids"][:6]])
    op = entk.ResidualStreamNTK(lm, ids, stream_of(lm, layer))
    assert op.module_path == f"model.layers.{layer}.mlp.down_proj" and len(op.downstream) == 17 - layer
    with torch.no_grad():
        ref_out = lm.model.model(input_ids=ids).last_hidden_state[:, -1]
    torch.testing.assert_close(op.outputs(), ref_out, rtol=1e-4, atol=1e-4)
    dense = op.dense()
    V = torch.randn(4, op.n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert float((op.matvec(V) - V @ dense).norm() / (V @ dense).norm()) < 1e-4
    ref = entk.dense_eigenpairs(dense, 5)
    pairs = entk.lanczos(op.matvec, op.n, 5, block_size=8, max_steps=5)
    assert float(((pairs.values - ref.values).abs() / ref.values).max()) < 1e-3


def test_shared_cache_matches_single_operators(tiny):
    lm, ids = tiny
    ops = entk.ResidualStreamNTK.for_layers(lm, ids, [1, 3], chunk_size=2)
    V = torch.randn(3, ops[1].n, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for layer, op in ops.items():
        single = entk.ResidualStreamNTK(lm, ids, layer)
        torch.testing.assert_close(op.matvec(V), single.matvec(V), rtol=1e-9, atol=1e-12)


def test_greedy_continuation_matches_generate(tiny):
    # notebook 07 tags the first word of the model's 3-token greedy continuation (the predicted word)
    from corekit.tasks.grammar import _forward
    lm, ids = tiny
    got, states = _forward(lm, ids, [1, 3], batch_size=2, continuation=3)
    ref = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                            pad_token_id=0)[:, ids.shape[1]:]
    assert torch.equal(got, ref)
    with llm.residual_hooks(lm, read=[1, 3]) as seen:
        lm.model(input_ids=ids)
    torch.testing.assert_close(states, torch.stack([seen[1][:, -1], seen[3][:, -1]]).float())
