"""Canonicalization by key (algorithms.canonical_blocks) against the whole-corpus
algorithm (algorithms.canonicalize.canonicalize): the same entities, ids and assignment."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.canonical_blocks import block_of, canonicalize_by_key, components
from algorithms.canonicalize import MentionRef, canonicalize
from benchmarks.knowledge_steps import HashNameEncoder
from benchmarks.knowledge_workload import generate
from schemas import stable_id

TEXTS = ["Paris", "paris", "PARIS", "Tumor", "tumour", "Tumors", "BMI", "body mass index"]
NORMS = ["paris", "tumor", "tumour", "tumours", "bmi", "body mass index", "bodymass index"]
NORMS += ["human colour", "human color", "humane color", "colour", "color"]
LABELS = ["PERSON", "GPE", "LOC", "ORG", "NOUN_CHUNK"]
DEFINITIONS = [("bmi", "body mass index"), ("bmi", "bodymass index"), ("BMI", "tumour")]


def embed(names: list[str]) -> np.ndarray:
    """Names that share their first letter are close, others are not: some candidate
    pairs merge and some do not."""
    first = np.asarray([[1.0 if n[:1] == c else 0.0 for c in "bchpt"] for n in names])
    return np.hstack([0.3 * HashNameEncoder().embed(names), 3 * first.astype(np.float32)])


mentions = st.lists(
    st.tuples(st.sampled_from(TEXTS), st.sampled_from(NORMS), st.sampled_from(LABELS)),
    max_size=40,
).map(
    lambda rows: [
        MentionRef(f"m{i:03d}", text, label, norm, f"c{i % 5}")
        for i, (text, norm, label) in enumerate(rows)
    ]
)


@settings(max_examples=300, deadline=None)
@given(mentions, st.lists(st.sampled_from(DEFINITIONS), max_size=4), st.sampled_from([2, 64]))
def test_by_key_makes_the_entities_of_the_whole_corpus(refs, acronyms, max_block):
    expected = canonicalize(refs, acronyms, embed=embed, max_block=max_block)
    assert canonicalize_by_key(refs, acronyms, embed=embed, max_block=max_block) == expected


def test_clusters_that_get_one_id_are_told_apart_as_the_whole_corpus_does():
    # Two blocks ("paris", "paris city") whose clusters are both named "Paris", a place.
    refs = [
        MentionRef("m1", "Paris", "GPE", "paris", "c1"),
        MentionRef("m2", "Paris", "GPE", "paris city", "c2"),
    ]
    expected = canonicalize(refs)
    assert len({e.entity_id for e in expected.entities}) == 2
    assert stable_id("entity", "paris", "place") in {e.entity_id for e in expected.entities}
    assert canonicalize_by_key(refs) == expected


def test_by_key_makes_the_entities_of_a_seeded_workload():
    rows = list(generate(200, seed=11))
    refs = [
        MentionRef(m.mention_id, m.text, m.label, m.norm, m.chunk_id)
        for d in rows
        for m in d.mentions
    ]
    acronyms = [(a[2], a[3]) for d in rows for a in d.acronyms]
    expected = canonicalize(refs, acronyms, embed=embed)
    assert len(expected.entities) > 500
    assert any(len(e.aliases) > 1 for e in expected.entities)
    assert canonicalize_by_key(reversed(refs), acronyms[::-1], embed=embed) == expected


def test_a_block_holds_one_squashed_form():
    with pytest.raises(ValueError, match="another squashed form"):
        block_of("paris", [MentionRef("m1", "Rome", "GPE", "rome", "c1")])
    with pytest.raises(ValueError, match="no mention"):
        block_of("paris", [])


def test_components_name_each_key_by_its_smallest():
    assert components([("b", "c"), ("d", "c"), ("x", "y")]) == {
        "b": "b",
        "c": "b",
        "d": "b",
        "x": "x",
        "y": "x",
    }
    assert components([]) == {}
