"""The knowledge scale benchmark at a tiny size: its JSON, its invariants, and the
synthetic workload's fit to SciFact's distributions."""

import json

import numpy as np
import pytest

from benchmarks import knowledge_workload as workload
from benchmarks.knowledge_scale import STEPS, HashNameEncoder, main

DOCS = 200


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("knowledge-scale")
    out = folder / "out.json"
    assert main(["--docs", str(DOCS), "--json", str(out), "--work", str(folder / "work")]) == 0
    (one,) = json.loads(out.read_text())
    return one


def test_the_json_has_every_figure(result):
    for field in ("window_update_s", "window_bytes_written", "reader_reopen_s", "peak_rss_mb"):
        assert result[field] > 0, field
    assert result["docs"] == DOCS
    assert list(result["steps"]) == list(STEPS)
    for name, step in result["steps"].items():
        assert step["wall_s"] > 0 and step["peak_rss_mb"] > 0, name
    assert result["peak_rss_mb"] == max(s["peak_rss_mb"] for s in result["steps"].values())
    for name in ("generate", "canonicalize", "relations", "communities"):
        assert result["steps"][name]["bytes_written"] > 0, name
    assert result["steps"]["open"]["bytes_written"] == 0  # a reader writes nothing
    for field in ("window_update_cold_s", "reader_reopen_cold_s"):
        assert result[field] > 0, field


def test_a_one_document_window_writes_its_change_not_the_layer(result):
    steps = result["steps"]
    assert steps["window"]["layered_tables"] == ["mentions", "entities", "relations"]
    layer = sum(steps[s]["bytes_written"] for s in ("canonicalize", "relations", "communities"))
    assert 0 < result["window_bytes_written"] < 0.05 * layer


def test_the_steps_hand_on_consistent_tables(result):
    steps, shape = result["steps"], result["workload"]
    assert steps["canonicalize"]["mentions"] == shape["mentions"]
    assert 0 < steps["canonicalize"]["entities"] <= shape["mentions"]
    assert steps["relations"]["statements"] == shape["statements"]
    assert 0 < steps["relations"]["relations"] <= shape["statements"]
    assert steps["open"]["entities"] == steps["canonicalize"]["entities"]
    assert steps["window"]["window_mentions"] > 0
    assert steps["communities"]["engine"] == "leiden"  # the default


def test_the_workload_matches_scifacts_shapes(result):
    shape, targets = result["workload"], workload.TARGETS
    for name in ("chunks_per_doc", "mentions_per_chunk", "statements_per_chunk"):
        assert shape[name] == pytest.approx(targets[name], rel=0.1), name
    assert shape["mentions_per_doc_entity"] == pytest.approx(
        targets["mentions_per_doc_entity"], rel=0.15
    )


def test_the_workload_is_deterministic_and_fitted():
    first = list(workload.generate(300, seed=5))
    again = list(workload.generate(300, seed=5))
    assert first == again
    assert next(iter(workload.generate(300, seed=6))) != first[0]
    mentions = [m for d in first for m in d.mentions]
    statements = [s for d in first for s in d.statements]
    nouns = np.mean([m.label == "NOUN_CHUNK" for m in mentions])
    assert nouns == pytest.approx(workload.TARGETS["noun_chunk_share"], abs=0.03)
    cooccurrence = np.mean([s.category == "co-occurrence" for s in statements])
    assert cooccurrence == pytest.approx(workload.TARGETS["cooccurrence_share"], abs=0.03)
    ids = [m.mention_id for m in mentions]
    assert len(set(ids)) == len(ids)
    by_id = {m.mention_id: m for m in mentions}
    for s in statements:  # a statement links two mentions of its chunk
        assert by_id[s.subject_mention_id].chunk_id == s.chunk_id
        assert by_id[s.object_mention_id].chunk_id == s.chunk_id


def test_entities_grow_like_scifacts():
    """Distinct entities drawn grow with the corpus by SciFact's Heaps exponent (0.86,
    measured by subsampling its documents), and the variants are all there."""
    drawn = {}
    for docs in (250, 1000):
        last = list(workload.generate(docs, seed=17))[-2]
        drawn[docs] = last.drawn_entities
    exponent = np.log(drawn[1000] / drawn[250]) / np.log(4)
    assert exponent == pytest.approx(workload.TARGETS["heaps_exponent"], abs=0.08)
    texts = {m.text for d in workload.generate(300, seed=17) for m in d.mentions}
    assert any(t.isupper() for t in texts) and any("-" in t for t in texts)
    assert any(t.endswith("s") for t in texts) and any(t[0].isupper() for t in texts)


def test_hash_name_encoder_is_fixed_and_unit_length():
    encoder = HashNameEncoder()
    vectors = encoder.embed(["tumour", "tumor", "tumour"])
    assert vectors.shape == (3, 32)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.array_equal(vectors[0], vectors[2])
    assert float(vectors[0] @ vectors[1]) < 0.85  # unrelated: no spelling merge
