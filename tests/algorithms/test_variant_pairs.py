"""Spelling-variant candidates by context: the same pairs, and so the same entities, as
blocking every name's one-deletion keys (the implementation before, kept here as the
reference)."""

import itertools
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import algorithms.canonicalize as canonical
from algorithms.canonicalize import MentionRef, _variant_pairs, canonicalize
from algorithms.normalize import normalize_surface
from benchmarks.knowledge_steps import HashNameEncoder
from benchmarks.knowledge_workload import generate

ALIASES = Path(__file__).resolve().parents[1] / "data" / "scifact_aliases.jsonl"


def reference_pairs(norms, max_block):
    """Every name's deletion keys in one dictionary of blocks (the former algorithm)."""
    blocks = defaultdict(list)
    for norm in norms:
        words = norm.split(" ")
        for i, word in enumerate(words):
            if len(word) < 5 or not word.isalpha():
                continue
            before, after = " ".join(words[:i]), " ".join(words[i + 1 :])
            for variant in {word, *(word[:j] + word[j + 1 :] for j in range(len(word)))}:
                blocks[f"{len(words)}|{i}|{before}|{variant}|{after}"].append(norm)
    pairs = set()
    for members in blocks.values():
        if len(members) < 2 or len(members) > max_block:
            continue
        for a, b in itertools.combinations(sorted(set(members)), 2):
            diff = [(x, y) for x, y in zip(a.split(" "), b.split(" "), strict=True) if x != y]
            if len(diff) == 1 and canonical._one_edit_apart(*diff[0]):
                pairs.add((a, b))
    return sorted(pairs)


def variant_names(seed: int, count: int = 3000) -> list[str]:
    """Names of 1-3 words with many one-edit variants, shared contexts and digits."""
    rng = random.Random(seed)
    stems = ["tumour", "colour", "leukaemia", "oesophagus", "haemoglobin", "analyse", "cell"]
    names = []
    for _ in range(count):
        word = rng.choice(stems) + rng.choice(["", "s", "x", "ic"])
        j = rng.randrange(len(word))
        edit = rng.choice([word, word[:j] + word[j + 1 :], word[:j] + "a" + word[j + 1 :]])
        lead = rng.choice(["", "human ", "acute ", "type 2 ", "cd4 "])
        names.append(lead + edit + rng.choice(["", " cells", " factor"]))
    return sorted(set(names))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("max_block", [3, 64])
def test_pairs_equal_the_reference(seed, max_block):
    names = variant_names(seed)
    assert _variant_pairs(names, max_block) == reference_pairs(names, max_block)


def test_pairs_equal_the_reference_with_repeated_names():
    names = variant_names(4, 400) * 2  # a block's size counts repeats, as before
    for max_block in (2, 5, 64):
        assert _variant_pairs(names, max_block) == reference_pairs(names, max_block)


def _refs(texts_labels: list[tuple[str, str]]) -> list[MentionRef]:
    return [
        MentionRef(f"m{i:05d}", text, label, normalize_surface(text), f"c{i % 7}")
        for i, (text, label) in enumerate(texts_labels)
        if normalize_surface(text)
    ]


def _same_entities(mentions: list[MentionRef], acronyms, monkeypatch) -> None:
    # Names that share a word's first letter are close under this fixed encoder, so
    # some candidate pairs merge and some do not.
    def embed(names):
        vectors = HashNameEncoder().embed(names)
        first = np.asarray([[1.0 if n[:1] == c else 0.0 for c in "acdhlot"] for n in names])
        return np.hstack([0.3 * vectors, 3 * first.astype(np.float32)])

    found = canonicalize(mentions, acronyms, embed=embed)
    with monkeypatch.context() as patch:
        patch.setattr(canonical, "_variant_pairs", reference_pairs)
        expected = canonicalize(mentions, acronyms, embed=embed)
    assert found == expected


def test_entities_equal_the_reference_on_a_seeded_workload(monkeypatch):
    rows = list(generate(150, seed=9))
    mentions = [
        MentionRef(m.mention_id, m.text, m.label, m.norm, m.chunk_id)
        for d in rows
        for m in d.mentions
    ]
    mentions += _refs([(name, "NOUN_CHUNK") for name in variant_names(5, 800)])
    acronyms = sorted((a[2], a[3]) for d in rows for a in d.acronyms)
    _same_entities(mentions, acronyms, monkeypatch)


def test_entities_equal_the_reference_on_scifact_mentions(monkeypatch):
    lines = [json.loads(line) for line in ALIASES.read_text().splitlines() if line.strip()]
    _same_entities(_refs([(r["mention"], r["label"]) for r in lines]), [], monkeypatch)
