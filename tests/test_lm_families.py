"""The public entry point on the paper's model families, against autograd on the plain Hugging Face model.

Each family (GPT-2, GPT-NeoX / Pythia, Llama, Gemma-2, Gemma-3, Qwen2) is a tiny random float64
model with a word-level tokenizer, saved to a folder and loaded back through ``lm.load(path)`` (the
path a hub id takes after its download). ACE with a K-logit readout at a middle layer
(``lm.from_layer`` ∘ ``lm.logit_readout``) must give the observability that autograd on the plain
model gives, prompt by prompt; the residual-stream eNTK must have the spectrum of the full output eNTK
(``jacrev`` of every logit through the whole model with respect to the family's MLP output projection).
"""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from torch.func import functional_call, jacrev  # noqa: E402

from corekit import ace, entk  # noqa: E402
from corekit import lm as llm  # noqa: E402

WORDS = [f"w{i}" for i in range(40)]
FAMILIES = ["gpt2", "gpt_neox", "llama", "gemma2", "gemma3", "qwen2"]
PROMPTS = ["w3 w7 w1 w9", "w12 w5 w30 w2 w8 w8", "w4 w4 w19", "w22 w0 w11 w6 w27"]   # lengths differ: padded
TOKENS = ["w1", "w2", "w3", "w5", "w8"]                                             # K = 5 logits
LAYER = 2                                                                            # of 3 blocks


def word_tokenizer():
    """Return a fast word-level tokenizer over w0 … w39 (and <pad>, <unk>, <eos>)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<eos>"] + WORDS)}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


def config(family: str, softcap: float | None):
    """Return a tiny configuration (3 blocks, width 16) of ``family``; Gemma's final logits soft-capped at ``softcap``."""
    common = dict(vocab_size=len(WORDS) + 3, pad_token_id=0, eos_token_id=2, bos_token_id=2, max_position_embeddings=64)
    small = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=2)
    if family == "gpt2":
        return transformers.GPT2Config(n_embd=16, n_layer=3, n_head=2, n_positions=64, vocab_size=len(WORDS) + 3,
                                       pad_token_id=0, eos_token_id=2, bos_token_id=2)
    if family == "gpt_neox":
        return transformers.GPTNeoXConfig(**small, rotary_pct=0.5, **common)
    if family == "llama":
        return transformers.LlamaConfig(**small, num_key_value_heads=1, **common)
    if family == "qwen2":
        return transformers.Qwen2Config(**small, num_key_value_heads=1, **common)
    gemma = dict(small, num_key_value_heads=1, head_dim=8, sliding_window=4, final_logit_softcapping=softcap)
    if family == "gemma2":
        return transformers.Gemma2Config(**gemma, attn_logit_softcapping=20.0, **common)
    return transformers.Gemma3TextConfig(**gemma, **common)


def saved(family: str, folder, softcap: float | None = None) -> llm.LM:
    """Return a tiny random ``family`` model saved to ``folder`` and loaded back with ``lm.load`` in float64."""
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config(family, softcap), attn_implementation="eager")
    with torch.no_grad():       # larger weights than the default init, so the functions are far from linear
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    model.save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    lm = llm.load(str(folder), device="cpu", dtype="float64")
    if family == "qwen2":   # AutoTokenizer reads a Qwen2 folder's tokenizer as Qwen's byte-level BPE: not a word vocabulary
        lm.tokenizer = word_tokenizer()
    return lm


def plain_jacobian(lm: llm.LM, prompt: str, layer: int, tokens: list[int]) -> tuple[torch.Tensor, ...]:
    """Return (h (D,), logits (K,), J (K, D)) of the prompt alone: the last token's residual at ``layer``, its logits
    of ``tokens`` and their Jacobian ∂logits/∂h, by autograd on the plain model."""
    leaf = {}

    def post(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        leaf["h"] = hidden[:, -1].detach().requires_grad_(True)
        hidden = torch.cat([hidden[:, :-1], leaf["h"][:, None]], dim=1)
        return (hidden,) + tuple(output[1:]) if isinstance(output, tuple) else hidden
    handle = lm.blocks[layer - 1].register_forward_hook(post)
    try:
        with torch.enable_grad():
            logits = lm.model(**lm.tokenizer(prompt, return_tensors="pt")).logits[0, -1, tokens]
            J = torch.stack([torch.autograd.grad(logits[k], leaf["h"], retain_graph=True)[0][0] for k in range(len(tokens))])
    finally:
        handle.remove()
    return leaf["h"][0].detach(), logits.detach(), J


@pytest.mark.parametrize("family", FAMILIES)
def test_ace_with_a_k_logit_readout_matches_autograd_on_the_plain_model(family, tmp_path):
    lm = saved(family, tmp_path / family, softcap=5.0)
    assert llm.layout_of(lm) is llm.LAYOUTS[lm.config.model_type]
    batch = llm.encode(lm, PROMPTS)
    h = llm.residuals(lm, batch, [LAYER])[0][:, -1]                                  # (B, D)
    rest = llm.from_layer(lm, batch, LAYER)
    readout = llm.logit_readout(lm, TOKENS)
    obs = ace.observability(lambda x: readout(rest(x[0]))[None], h[None])[0]          # (D, D)

    refs = [plain_jacobian(lm, p, LAYER, [3 + int(t[1:]) for t in TOKENS]) for p in PROMPTS]
    h_ref, logits_ref = torch.stack([r[0] for r in refs]), torch.stack([r[1] for r in refs])
    obs_ref = torch.stack([J.T @ J for _, _, J in refs]).mean(0)
    # transformers computes rotary factors in float32 even in a float64 model; a padded batch and a
    # prompt alone round them differently (a few float32 ulps per factor), hence float32's tolerance.
    tol = 256 * torch.finfo(torch.float32).eps
    torch.testing.assert_close(h, h_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(readout(rest(h)), logits_ref, rtol=tol, atol=tol)
    assert float((obs - obs_ref).abs().max() / obs_ref.abs().max()) < tol
    sigma = ace.extract(h[None], obs[None]).sigma[0]
    sigma_ref = ace.extract(h_ref[None], obs_ref[None]).sigma[0]
    assert float((sigma - sigma_ref).abs().max() / sigma_ref[0]) < 1e-4


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("layer", [2, 3])
def test_residual_stream_entk_matches_the_full_output_entk(family, layer, tmp_path):
    lm = saved(family, tmp_path / family)
    ids = torch.randint(3, len(WORDS) + 3, (3, 5), generator=torch.Generator().manual_seed(1))
    op = entk.ResidualStreamNTK(lm, ids, layer, chunk_size=2)
    name = f"{op.module_path}.weight"
    assert op.module_path.endswith(llm.layout_of(lm).mlp_out)
    W = dict(lm.model.named_parameters())[name]
    J = jacrev(lambda w: functional_call(lm.model, {name: w}, (ids,)).logits[:, -1])(W).reshape(-1, W.numel())
    full = torch.linalg.eigvalsh(J @ J.T).flip(0)[:op.n]
    ours = torch.linalg.eigvalsh(op.dense()).flip(0)
    assert float((ours - full).abs().max() / full[0]) < 1e-6
    V = torch.randn(3, op.n, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    KV, ref = op.matvec(V), V @ op.dense()
    assert float((KV - ref).abs().max() / ref.abs().max()) < 1e-5                   # JVP path = Jacobian path


def test_from_layer_at_an_earlier_position_and_at_the_embeddings(tmp_path):
    lm = saved("llama", tmp_path / "llama")
    batch = llm.encode(lm, PROMPTS)
    with torch.no_grad():      # each prompt alone through the plain model: its final normed states (T_b, D)
        alone = [lm.model.base_model(**lm.tokenizer(p, return_tensors="pt")).last_hidden_state[0] for p in PROMPTS]
    states = llm.residuals(lm, batch, [0, 1])
    tol = 256 * torch.finfo(torch.float32).eps                                         # float32 rotary factors
    for layer, position in ((0, -1), (1, -2)):
        rest = llm.from_layer(lm, batch, layer, position=position)
        out = rest(states[layer][:, position])
        torch.testing.assert_close(out, torch.stack([a[position] for a in alone]), rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="padding"):
        llm.from_layer(lm, batch, 1, position=0)      # the shortest prompts are left-padded there
    with pytest.raises(ValueError, match="position must be an integer"):
        llm.from_layer(lm, batch, 1, position=99)
    with pytest.raises(ValueError, match=r"h must be \(4, 16\)"):
        llm.from_layer(lm, batch, 1)(torch.zeros(3, 16, dtype=torch.float64))


def test_readout_tokens_and_unknown_architectures_are_refused_by_name(tmp_path):
    lm = saved("gpt2", tmp_path / "gpt2")
    with pytest.raises(ValueError, match="'w1 w2' is 2 tokens"):
        llm.logit_readout(lm, ["w1 w2"])
    with pytest.raises(ValueError, match="outside"):
        llm.logit_readout(lm, [10_000])
    torch.manual_seed(0)
    opt = transformers.AutoModelForCausalLM.from_config(transformers.OPTConfig(
        hidden_size=16, ffn_dim=32, num_hidden_layers=2, num_attention_heads=2, vocab_size=43, word_embed_proj_dim=16))
    other = llm.LM("tiny-opt", opt.double().eval(), word_tokenizer(), "test")
    with pytest.raises(ValueError, match="'opt' model.*known architectures"):
        entk.ResidualStreamNTK(other, torch.ones(2, 3, dtype=torch.long), 1)
