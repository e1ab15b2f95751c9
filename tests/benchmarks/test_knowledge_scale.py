"""The knowledge scale benchmark at a tiny size: its JSON, its invariants, and the
synthetic workload's fit to SciFact's distributions."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from algorithms.canonicalize import MentionRef, canonicalize
from algorithms.summaries import aggregate_relations
from benchmarks import knowledge_workload as workload
from benchmarks.knowledge_scale import STEPS, HashNameEncoder, main
from benchmarks.knowledge_steps import read_rows
from schemas import Entity, Statement
from store.config import KnowledgeConfig

DOCS = 200


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("knowledge-scale")
    out, work = folder / "out.json", folder / "work"
    argv = ["--docs", str(DOCS), "--json", str(out), "--work", str(work), "--segments", "2"]
    assert main(argv) == 0
    (one,) = json.loads(out.read_text())
    return one, work / str(DOCS)


@pytest.fixture(scope="module")
def result(run):
    return run[0]


def test_the_keyed_steps_run_as_workers_and_make_the_whole_corpus_tables(run):
    result, work = run
    for name in ("canonicalize", "relations"):
        step = result["steps"][name]
        assert step["shards"] == 2
        keyed = [s for s in step["stages"].values() if len(s["peak_rss_mb"]) == 2]
        assert len(keyed) >= 3, name  # each keyed stage: one process per shard
        assert step["worker_peak_rss_mb"] == max(
            max(s["peak_rss_mb"]) for s in step["stages"].values()
        )
    extraction = work / "segment" / "extraction"
    refs = read_rows(str(extraction / "mentions.parquet"), MentionRef)
    definitions = pq.read_table(extraction / "acronyms.parquet", columns=["short", "long"])
    pairs = list(zip(*(definitions[c].to_pylist() for c in ("short", "long")), strict=True))
    config = KnowledgeConfig()
    expected = canonicalize(
        refs,
        pairs,
        embed=HashNameEncoder().embed,
        similarity=config.merge_similarity,
        max_block=config.max_block_size,
    )
    assert read_rows(str(work / "generation" / "entities.parquet"), Entity) == expected.entities
    statements = read_rows(str(extraction / "statements.parquet"), Statement)
    names = {e.entity_id: e.name for e in expected.entities}
    relations = aggregate_relations(statements, expected.assignment, names)
    written = pq.read_table(work / "generation" / "relations.parquet")
    assert written["relation_id"].to_pylist() == sorted(r.relation_id for r in relations)
    assert written["support"].to_pylist() == [
        r.support for r in sorted(relations, key=lambda r: r.relation_id)
    ]


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
    window = steps["window"]
    # Each table the window changes is its parent's base and a delta; the others are the
    # parent's files (the window's one statement may make no relation of its own).
    assert window["layered_tables"][:2] == ["mentions", "entities"]
    assert "relations" in window["layered_tables"] + window["linked_tables"]
    layer = sum(steps[s]["bytes_written"] for s in ("canonicalize", "relations", "communities"))
    # A tenth: at 200 documents the delta files' own overhead (footers, schemas) weighs
    # on a layer of a few hundred kilobytes; the figures at 10k and 100k are the benchmark's.
    assert 0 < result["window_bytes_written"] < 0.1 * layer


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
    # What a chunk holds does not depend on the corpus's size (statements per chunk have
    # a long tail, so 200 documents scatter more); how often a document names an entity
    # again does (an entity is established only once it recurs), and is checked at
    # SciFact's size below.
    for name in ("chunks_per_doc", "mentions_per_chunk"):
        assert shape[name] == pytest.approx(targets[name], rel=0.1), name
    assert shape["statements_per_chunk"] == pytest.approx(targets["statements_per_chunk"], rel=0.2)
    assert 1.5 < shape["mentions_per_doc_entity"] < targets["mentions_per_doc_entity"] + 0.1


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
    for s in statements:  # a statement's subject, and object unless literal, are its chunk's
        assert by_id[s.subject_mention_id].chunk_id == s.chunk_id
        if s.object_mention_id is not None:
            assert by_id[s.object_mention_id].chunk_id == s.chunk_id
    literal = np.mean([s.object_mention_id is None for s in statements])
    assert 0.2 < literal < 0.6  # SciFact: 41% of all statements


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


def test_the_workload_at_scifacts_size_meets_its_targets():
    """At SciFact's 5,183 documents the workload draws about as many entities as SciFact's
    layer has, as many of them once, and names one as often in a document."""
    drawn, targets = workload.drawn_shape(workload.SCIFACT_DOCS, seed=0), workload.TARGETS
    assert drawn["entities"] == pytest.approx(targets["entities_at_scifact"], rel=0.05)
    assert drawn["singleton_entity_share"] == pytest.approx(
        targets["singleton_entity_share"], abs=0.03
    )
    for name in ("mentions_per_chunk", "statements_per_chunk", "mentions_per_doc_entity"):
        assert drawn[name] == pytest.approx(targets[name], rel=0.05), name
