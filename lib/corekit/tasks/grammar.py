"""Grammar features on story text: the corpus, next-word contexts, UD labels and the probe protocol.

Corpus. TinyStories (Eldan & Li 2023) through ``datasets`` when it loads (a hub that
answers within a few seconds); otherwise the corpus shipped in ``corekit/data/stories.jsonl``, which
Gemma-3-270M wrote from the story openings in :data:`OPENINGS` (sampling with a fixed seed; the
recipe is the file's first line and ``python -m corekit.tasks.grammar build-corpus`` rebuilds it).

Contexts. A context is the ``context_tokens`` tokens of a story that end right before a word (the
tokenizer has a boundary where spaCy's word starts), run after a BOS token. Its labels are those of
that next word from spaCy's UD pipeline (``en_core_web_sm``): the UPOS class (:data:`UPOS_CLASSES`)
and the feature=value pairs of UD morphology (:data:`MORPH_FEATURES`). As in the paper, a context is
kept only if the word the model predicts (its greedy continuation, tagged in place) has the same
UPOS as the true next word; the morphology labels are the predicted word's features.

Probes: :mod:`corekit.probes` (the protocol that scores candidate directions on these labels).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from corekit.lm.loading import hub_is_offline, hub_reachable, load
from corekit.lm.stream import forward, residual_hooks
from corekit.tasks import ud

#: The eight word classes of the paper (UD UPOS tags).
UPOS_CLASSES = ("PUNCT", "PRON", "PROPN", "DET", "ADV", "CCONJ", "NOUN", "VERB")
#: The UD morphology features whose values become binary labels.
MORPH_FEATURES = ("Number", "Person", "Case", "Definite", "Mood", "VerbForm", "Tense", "Gender")
#: The shipped corpus.
CORPUS = Path(__file__).resolve().parent.parent / "data" / "stories.jsonl"
SOURCES = ("auto", "tinystories", "shipped")

#: Story openings in TinyStories' style; the shipped corpus continues each of them ``samples_per_opening`` times.
OPENINGS = (
    "Once upon a time, there was a little girl named Lily.",
    "Once upon a time, there was a little boy named Tom.",
    "One day, a small dog named Max found a red ball in the park.",
    "Sara and Ben liked to play in the garden.",
    "There was a big, friendly bear who lived in the forest.",
    "Tim had a new toy car. It was shiny and blue.",
    "Anna wanted to bake a cake for her mom.",
    "Once upon a time, in a small village, there lived a kind old man.",
    "The sun was shining and the birds were singing.",
    "Mia found a little kitten under a tree.",
    "Jack and his dad went to the beach on a sunny day.",
    "Lucy was sad because her balloon flew away.",
    "In a big house, there lived a curious cat named Tom.",
    "One morning, Ben woke up and saw snow outside.",
    "A little bird could not fly. It hurt its wing.",
    "Sue had a pretty doll. She took it everywhere.",
    "Once upon a time, there was a frog who loved to jump.",
    "Max and Lily were best friends. They did everything together.",
    "The little fish swam in the blue sea.",
    "Emma saw a big rainbow in the sky after the rain.",
    "Once upon a time, a brave knight lived in a castle.",
    "Timmy did not want to go to bed.",
    "A girl named Zoe loved to paint pictures.",
    "Grandma gave Sam a big box for his birthday.",
    "There once was a tiny mouse who lived in a hole in the wall.",
    "Lily's mom told her to clean her room.",
    "The farmer had a cow, a pig and a horse.",
    "Once upon a time, there was a happy duck who liked to swim.",
    "Bob the dog liked to dig holes in the yard.",
    "Amy and her brother went to the zoo.",
    "It was a cold, windy night, and Tom could not sleep.",
    "A little girl named Rose had a magic hat.",
    "Once upon a time, there was a big tree in the middle of the park.",
    "Ella wanted to help her dad fix the old car.",
    "The moon was bright, and the stars were twinkling.",
    "One day, Lily and her friend found a map in the attic.",
    "Ben had a red kite. He liked to fly it on windy days.",
    "Once upon a time, there lived a princess who was very lonely.",
    "The children were playing in the snow when they heard a sound.",
    "A small robot named Bolt lived with a family in the city.",
    "Kate lost her shoe at school.",
    "There was a little train that went up the hill every day.",
    "Once upon a time, an owl and a rabbit lived in the same wood.",
    "Jim liked to eat apples. Every day he ate two apples.",
    "Mom and Sara went to the store to buy some milk.",
    "A lazy cat slept in the sun all day.",
    "Peter wanted a puppy more than anything.",
    "One rainy day, Lucy and Tim stayed inside and built a fort.",
)


# ------------------------------------------------------------------------------------------------
# The corpus


@dataclass
class Corpus:
    """Story texts, where they came from and the recipe that produced them (None for TinyStories)."""

    stories: list[str]
    source: str
    recipe: dict | None = None


def build_corpus(lm, path: str | Path = CORPUS, samples_per_opening: int = 2, max_new_tokens: int = 320,
                 temperature: float = 0.8, top_k: int = 40, seed: int = 0, batch_size: int = 48) -> Corpus:
    """Return the corpus Gemma writes from :data:`OPENINGS` (sampled with ``seed``) and save it to ``path``.

    The first line of the file is the recipe (these parameters, the model, the time it took).
    """
    if samples_per_opening < 1 or max_new_tokens < 1 or batch_size < 1:
        raise ValueError("samples_per_opening, max_new_tokens and batch_size must be positive integers")
    from tqdm import tqdm
    tok = lm.tokenizer
    prompts = [o for o in OPENINGS for _ in range(samples_per_opening)]
    side = tok.padding_side
    tok.padding_side = "left"
    torch.manual_seed(seed)
    start = time.perf_counter()
    texts = []
    try:
        for i in tqdm(range(0, len(prompts), batch_size), desc="stories"):
            chunk = prompts[i:i + batch_size]
            enc = tok(chunk, return_tensors="pt", padding=True).to(lm.device)
            with torch.no_grad():
                out = lm.model.generate(**enc, do_sample=True, temperature=temperature, top_k=top_k, top_p=1.0,
                                        max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
            for prompt, row in zip(chunk, out[:, enc["input_ids"].shape[1]:]):
                texts.append(prompt + tok.decode(row, skip_special_tokens=True))
    finally:
        tok.padding_side = side
    recipe = dict(model=lm.name, openings=len(OPENINGS), samples_per_opening=samples_per_opening,
                  max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, seed=seed,
                  batch_size=batch_size, torch=torch.__version__, device=str(lm.device),
                  seconds=round(time.perf_counter() - start, 1),
                  command="python -m corekit.tasks.grammar build-corpus")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(json.dumps({"recipe": recipe}) + "\n")
        for opening, text in zip(prompts, texts):
            fh.write(json.dumps({"opening": opening, "text": text}) + "\n")
    return Corpus(texts, f"shipped ({path.name})", recipe)


def _tinystories(n_stories: int) -> list[str] | None:
    """Return TinyStories' first ``n_stories`` validation stories, or None when they cannot be loaded quickly."""
    import importlib.util
    if importlib.util.find_spec("datasets") is None:
        return None
    if hub_is_offline() or not hub_reachable(timeout=3.0):
        return None
    try:
        import datasets
        data = datasets.load_dataset("roneneldan/TinyStories", split=f"validation[:{n_stories}]")
    except Exception:  # noqa: BLE001 (any failure to fetch means: use the shipped corpus)
        return None
    return [row["text"] for row in data]


def load_corpus(source: str = "auto", path: str | Path | None = None, n_stories: int = 2000) -> Corpus:
    """Return the story corpus: TinyStories (``source`` "tinystories", or "auto" when it loads) or the shipped file."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if source in ("auto", "tinystories"):
        stories = _tinystories(n_stories)
        if stories is not None:
            return Corpus(stories, "TinyStories (validation split)")
        if source == "tinystories":
            raise ValueError("source='tinystories' needs the `datasets` package and a reachable Hugging Face hub; "
                             "use source='auto' or 'shipped'")
    path = Path(path) if path is not None else CORPUS
    if not path.is_file():
        raise ValueError(f"no corpus at {path}: build it with `python -m corekit.tasks.grammar build-corpus`")
    with open(path) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    if not rows or "recipe" not in rows[0]:
        raise ValueError(f"{path} is not a corpus file (its first line must hold the recipe)")
    return Corpus([r["text"] for r in rows[1:]], f"shipped ({path.name})", rows[0]["recipe"])


# ------------------------------------------------------------------------------------------------
# Contexts and their labels


@dataclass
class Context:
    """A context: ``token_ids`` (the tokens before the next word, no BOS), its text and the next word's UD labels."""

    story: int
    token_ids: list[int]
    text: str
    word: str
    upos: str
    morph: dict[str, str] = field(default_factory=dict)

    def labels(self) -> set[str]:
        """Return the context's label names: its UPOS class and every "Feature=Value" of its next word."""
        return {self.upos} | {f"{k}={v}" for k, v in self.morph.items()}


#: The pipeline components word-class and morphology tagging needs.
TAGGING = ("tok2vec", "tagger", "attribute_ruler", "morphologizer")


def load_spacy(name: str = ud.PIPELINE):
    """Return spaCy's English UD pipeline with only the components tagging needs (:data:`TAGGING`)."""
    return ud.load_spacy(name, TAGGING)


def _morph(token) -> dict[str, str]:
    """Return the UD features of a spaCy token restricted to :data:`MORPH_FEATURES` (multi-valued ones joined by ",")."""
    feats = token.morph.to_dict()
    return {k: v for k, v in feats.items() if k in MORPH_FEATURES}


def candidates(tokenizer, stories: Sequence[str], nlp, context_tokens: int = 64,
               classes: Sequence[str] = UPOS_CLASSES) -> list[Context]:
    """Return every context of ``context_tokens`` tokens that ends right before a word of one of ``classes``.

    A word qualifies when a token starts exactly where it starts (or one character earlier, at the
    space in front of it) and the story holds at least ``context_tokens`` tokens before that token.
    """
    if not isinstance(context_tokens, int) or context_tokens < 1:
        raise ValueError(f"context_tokens must be a positive integer, got {context_tokens!r}")
    unknown = [c for c in classes if c not in UPOS_CLASSES]
    if unknown or not classes:
        raise ValueError(f"classes must be UPOS tags among {UPOS_CLASSES}, got {list(classes)}")
    out = []
    for i, doc in enumerate(nlp.pipe(stories, batch_size=32)):
        text = doc.text
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        starts = {a: j for j, (a, b) in enumerate(offsets) if b > a}
        for tok in doc:
            if tok.pos_ not in classes or tok.idx == 0:
                continue
            j = starts.get(tok.idx)
            if j is None and text[tok.idx - 1] == " ":
                j = starts.get(tok.idx - 1)
            if j is None or j < context_tokens:
                continue
            begin = offsets[j - context_tokens][0]
            out.append(Context(i, ids[j - context_tokens:j], text[begin:offsets[j][0]], tok.text, tok.pos_, _morph(tok)))
    return out


def word_after(texts: Sequence[str], continuations: Sequence[str], nlp) -> list[tuple[str, dict[str, str]] | None]:
    """Return (UPOS, UD features) spaCy gives the first word of each continuation appended to its text (None: no word)."""
    if len(texts) != len(continuations):
        raise ValueError(f"texts and continuations must have the same length, got {len(texts)} and {len(continuations)}")
    joined = [t + c for t, c in zip(texts, continuations)]
    out = []
    for text, cont, doc in zip(texts, continuations, nlp.pipe(joined, batch_size=64)):
        if not cont.strip():
            out.append(None)
            continue
        first = len(text) + len(cont) - len(cont.lstrip())
        hit = next((t for t in doc if t.idx + len(t.text) > first and not t.is_space), None)
        out.append(None if hit is None else (hit.pos_, _morph(hit)))
    return out


@dataclass
class Selection:
    """The kept contexts (balanced over classes), their token ids (N, 1 + T) with BOS, the residual
    stream at the last token (len(layers), N, d) for the residual streams ``layers`` of :mod:`corekit.lm`,
    the model's greedy continuations, the UD features of the word they start (the *predicted* word),
    and the filter's tally."""

    contexts: list[Context]
    input_ids: Tensor
    residuals: Tensor
    layers: list[int]
    greedy: list[str]
    predicted_morph: list[dict[str, str]]
    tried: dict[str, int]
    kept: dict[str, int]

    @property
    def upos(self) -> np.ndarray:
        """Return the UPOS class of every kept context's next word (N,) (the predicted word's, by the filter)."""
        return np.array([c.upos for c in self.contexts])

    def predicted_labels(self) -> list[set[str]]:
        """Return each context's label names for its predicted word: the UPOS class and every "Feature=Value"."""
        return [{c.upos} | {f"{k}={v}" for k, v in m.items()} for c, m in zip(self.contexts, self.predicted_morph)]


def _forward(lm, ids: Tensor, layers: Sequence[int], batch_size: int, continuation: int) -> tuple[Tensor, Tensor]:
    """Return (greedy continuation (B, continuation) token ids, residual stream at the last context token
    (len(layers), B, d)) for contexts (B, T); the continuation reuses the key / value cache."""
    head = lm.model.get_output_embeddings()
    greedy, states = [], []
    with torch.no_grad():
        for i in range(0, len(ids), batch_size):
            sub = ids[i:i + batch_size].to(lm.device)
            pos = torch.arange(sub.shape[1], device=lm.device)[None].expand_as(sub)
            with residual_hooks(lm, read=layers) as seen:
                hidden, cache = forward(lm, sub, torch.ones_like(sub), pos, use_cache=continuation > 1)
            states.append(torch.stack([seen[l][:, -1].float().cpu() for l in layers]))
            toks = [head(hidden[:, -1]).argmax(-1)]
            for step in range(1, continuation):
                mask = torch.ones(sub.shape[0], sub.shape[1] + step, dtype=sub.dtype, device=lm.device)
                hidden, cache = forward(lm, toks[-1][:, None], mask, pos[:, -1:] + step, cache=cache, use_cache=True)
                toks.append(head(hidden[:, -1]).argmax(-1))
            greedy.append(torch.stack(toks, 1).cpu())
    return torch.cat(greedy), torch.cat(states, dim=1)


def select(lm, pool: Sequence[Context], nlp, n_per_class: int, layers: Sequence[int], seed: int = 0,
           classes: Sequence[str] = UPOS_CLASSES, oversample: float = 1.5, batch_size: int = 32,
           continuation: int = 3) -> Selection:
    """Return ``n_per_class`` contexts of each class whose greedy next word has the true word's UPOS.

    The model continues every candidate greedily by ``continuation`` tokens; spaCy tags the first word
    of that continuation in place (the predicted word: its UPOS for the filter, its features for the
    morphology labels). Candidates are drawn at random (``seed``) from each class's pool, in rounds
    of ``oversample`` times what is still missing, until every class is full or its pool is spent
    (then it keeps fewer: see ``kept``). Every candidate tried runs through the model once, which
    also reads its residual stream at ``layers``.
    """
    from tqdm import tqdm
    if not isinstance(n_per_class, int) or n_per_class < 1:
        raise ValueError(f"n_per_class must be a positive integer, got {n_per_class!r}")
    if not isinstance(continuation, int) or continuation < 1:
        raise ValueError(f"continuation must be a positive integer (tokens of greedy continuation), got {continuation!r}")
    layers = [lm.check_layer(l) for l in layers]
    rng = random.Random(seed)
    by_class = {c: [x for x in pool if x.upos == c] for c in classes}
    missing = [c for c, xs in by_class.items() if not xs]
    if missing:
        raise ValueError(f"the candidate pool holds no context before a word of class {missing}")
    for xs in by_class.values():
        rng.shuffle(xs)
    bos = lm.tokenizer.bos_token_id
    kept: dict[str, list] = {c: [] for c in classes}
    tried = {c: 0 for c in classes}
    bar = tqdm(total=n_per_class * len(classes), desc="contexts kept")
    while True:
        batch = []
        for c in classes:
            need = n_per_class - len(kept[c])
            take = by_class[c][tried[c]:tried[c] + (math.ceil(need * oversample) if need > 0 else 0)]
            tried[c] += len(take)
            batch += take
        if not batch:
            break
        ids = torch.tensor([([bos] if bos is not None else []) + x.token_ids for x in batch])
        greedy, states = _forward(lm, ids, layers, batch_size, continuation)
        words = [lm.tokenizer.decode(row.tolist()) for row in greedy]
        tags = word_after([x.text for x in batch], words, nlp)
        for j, (x, tag) in enumerate(zip(batch, tags)):
            if tag is not None and tag[0] == x.upos and len(kept[x.upos]) < n_per_class:
                kept[x.upos].append((x, ids[j], states[:, j], words[j], tag[1]))
                bar.update(1)
    bar.close()
    rows = [r for c in classes for r in kept[c]]
    if not rows:
        raise ValueError("no context passed the greedy filter")
    return Selection([r[0] for r in rows], torch.stack([r[1] for r in rows]), torch.stack([r[2] for r in rows], 1),
                     layers, [r[3] for r in rows], [r[4] for r in rows], tried, {c: len(kept[c]) for c in classes})


def label_matrix(label_sets: Sequence[set[str]], names: Sequence[str]) -> np.ndarray:
    """Return the binary labels (len(names), N): row i is 1 where the i-th name is among an example's ``label_sets``."""
    return np.array([[name in s for s in label_sets] for name in names], dtype=int)


@dataclass
class MorphLabels:
    """The morphology labels kept (names) and the dropped ones with the reason for each."""

    names: list[str]
    dropped: dict[str, str]


def morph_labels(morphs: Sequence[dict[str, str]], upos: Sequence[str], min_support: int = 30, purity: float = 0.9,
                 coverage: float = 0.9) -> MorphLabels:
    """Return the "Feature=Value" labels of ``morphs`` (one dict per example) as the paper filters them.

    A label is kept when it has at least ``min_support`` positives and as many negatives, unless it
    merely restates a word class: at least ``purity`` of its positives share one UPOS of ``upos`` (N,)
    and it covers at least ``coverage`` of that class.
    """
    if not isinstance(min_support, int) or min_support < 1:
        raise ValueError(f"min_support must be a positive integer, got {min_support!r}")
    if not (0 < purity <= 1 and 0 < coverage <= 1):
        raise ValueError(f"purity and coverage must be in (0, 1], got {purity} and {coverage}")
    upos = np.asarray(upos)
    if len(upos) != len(morphs):
        raise ValueError(f"morphs and upos must have one entry per example, got {len(morphs)} and {len(upos)}")
    names = sorted({f"{k}={v}" for m in morphs for k, v in m.items()})
    Y = label_matrix([{f"{k}={v}" for k, v in m.items()} for m in morphs], names).astype(bool)
    kept, dropped = [], {}
    for name, y in zip(names, Y):
        if min(int(y.sum()), int((~y).sum())) < min_support:
            dropped[name] = f"support {int(y.sum())} < {min_support}"
            continue
        classes, counts = np.unique(upos[y], return_counts=True)
        top = classes[counts.argmax()]
        pure, covers = counts.max() / y.sum(), y[upos == top].mean()
        if pure >= purity and covers >= coverage:
            dropped[name] = f"restates {top} (purity {pure:.2f}, coverage {covers:.2f})"
            continue
        kept.append(name)
    return MorphLabels(kept, dropped)


def top_contexts(scores, contexts: Sequence[Context], k: int = 5, width: int = 60) -> list[tuple[float, str, str, str]]:
    """Return the ``k`` contexts with the highest scores (N,) as (score, last ``width`` characters, next word, UPOS)."""
    s = scores.detach().cpu().numpy() if isinstance(scores, Tensor) else np.asarray(scores)
    order = np.argsort(-s)[:k]
    return [(float(s[i]), contexts[i].text[-width:].replace("\n", " "), contexts[i].word, contexts[i].upos)
            for i in order]


# ------------------------------------------------------------------------------------------------
# Command line: python -m corekit.tasks.grammar build-corpus


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corekit.tasks.grammar", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build-corpus",), help="build-corpus: sample the shipped story corpus")
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--out", default=str(CORPUS))
    parser.add_argument("--samples-per-opening", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=320)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=48)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    lm = load(args.model, device=args.device, dtype="float32")
    corpus = build_corpus(lm, args.out, args.samples_per_opening, args.max_new_tokens, args.temperature, args.top_k,
                          args.seed, args.batch_size)
    print(f"{len(corpus.stories)} stories in {corpus.recipe['seconds']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
