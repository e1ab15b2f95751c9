"""A batch build that writes several segments (``--segments K``): each part built on its
own, the generation the same as a one-segment build's in everything but the layout."""

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import compact
from pipelines.build_index import (
    BuildFailedError,
    EvidexBuildOptions,
    config_from_options,
    run,
    segment_count,
)
from query import load_bundle, open_bundle, retrieve
from schemas.manifest import SegmentRef
from store.bundles import BundleIntegrityError, bundle_path, read_manifest
from store.segments import part_of
from tests.conftest import TINY_CORPUS, validate_and_activate, write_corpus
from validation import validate_bundle

PARTS = 3


@pytest.fixture(scope="module")
def parted(tmp_path_factory):
    """A root whose active ``p1`` was built as three segments, and a root whose active
    ``f1`` is a one-segment build of the same corpus."""
    base = tmp_path_factory.mktemp("parts")
    corpus = write_corpus(base / "corpus", TINY_CORPUS)
    root, single = str(base / "root"), str(base / "single")
    built = run(["--input", str(corpus), "--root", root, "--segments", str(PARTS)], bundle_id="p1")
    validate_and_activate(root, "p1")
    run(["--input", str(corpus), "--root", single, "--segments", "1"], bundle_id="f1")
    validate_and_activate(single, "f1")
    return root, single, corpus, built


def _table(path: str, rel: str) -> pa.Table:
    return pq.read_table(os.path.join(path, rel))


def _parts_table(path: str, rel: str, sort_by: str) -> pa.Table:
    tables = [_table(os.path.join(path, "parts", str(k)), rel) for k in range(PARTS)]
    return pa.concat_tables(tables).sort_by(sort_by)


@pytest.mark.slow
def test_each_part_holds_the_documents_that_hash_to_it(parted):
    _, _, _, built = parted
    manifest = built.manifest
    assert [(s.bundle_id, s.part) for s in manifest.segments] == [
        ("p1", f"parts/{k}") for k in range(PARTS)
    ]
    assert "documents.parquet" not in manifest.files  # no top-level segment
    total_docs = total_chunks = 0
    for k, ref in enumerate(manifest.segments):
        where = os.path.join(built.path, "parts", str(k))
        docs = _table(where, "documents.parquet")["doc_id"].to_pylist()
        assert docs and all(part_of(d, PARTS) == k for d in docs)
        chunks = _table(where, "chunks.parquet")["doc_id"].to_pylist()
        assert set(chunks) <= set(docs)
        mentions = _table(where, "extraction/mentions.parquet")["doc_id"].to_pylist()
        assert set(mentions) <= set(docs)
        assert (ref.documents, ref.chunks) == (len(docs), len(chunks))
        total_docs, total_chunks = total_docs + len(docs), total_chunks + len(chunks)
    assert manifest.row_counts["documents"] == total_docs == 7
    assert manifest.row_counts["chunks"] == total_chunks


@pytest.mark.slow
def test_parts_hold_what_a_one_segment_build_holds(parted):
    _, single, _, built = parted
    fresh = bundle_path(single, "f1")
    ours, theirs = built.manifest, read_manifest(fresh)
    assert ours.input_fingerprint == theirs.input_fingerprint
    assert ours.row_counts == theirs.row_counts
    for rel, key in (
        ("documents.parquet", "doc_id"),
        ("chunks.parquet", "chunk_id"),
        ("extraction/mentions.parquet", "mention_id"),
        ("extraction/statements.parquet", "statement_id"),
    ):
        mine, expected = _parts_table(built.path, rel, key), _table(fresh, rel)
        if "embedding" in mine.column_names:
            assert np.allclose(
                np.array(mine["embedding"].to_pylist()),
                np.array(expected["embedding"].to_pylist()),
                atol=1e-5,
            )
            mine, expected = mine.drop_columns(["embedding"]), expected.drop_columns(["embedding"])
        assert mine.equals(expected), rel
    # The knowledge layer is the generation's, computed over every part at once.
    for rel in ("mentions.parquet", "entities.parquet", "relations.parquet"):
        assert _table(built.path, rel).equals(_table(fresh, rel)), rel
    assert validate_bundle(built.path).passed


@pytest.mark.slow
def test_queries_read_every_part(parted, query_encoder):
    root, single, corpus, _ = parted
    bundle = load_bundle(root, model=query_encoder)
    one = load_bundle(single, model=query_encoder)
    assert len(bundle.segments) == PARTS
    assert bundle.chunk_ids == one.chunk_ids
    for query, expected in (
        ("Danube Black Sea pelicans", "river.md"),
        ("Sicilian Defence opening", "chess.md"),
        ("disc brakes wet weather", "bike-2"),
    ):
        top = retrieve(bundle, query, k=3)
        assert top[0].doc_id == expected == retrieve(one, query, k=3)[0].doc_id
        if not expected.startswith("bike"):
            text = (corpus / expected).read_text(encoding="utf-8")
            assert text[top[0].start : top[0].end] == top[0].text


@pytest.mark.slow
def test_a_refresh_deletes_from_the_part_holding_a_document(parted, tmp_path, query_encoder):
    root, _, corpus, _ = parted
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    # The same folder (a document's source path is part of its state), restored after.
    tea = corpus / "tea.md"
    before = tea.read_text(encoding="utf-8")
    tea.write_text("# Tea\n\nOolong tea is partly oxidised, then rolled.", encoding="utf-8")
    try:
        args = ["--input", str(corpus), "--root", work, "--segments", "2"]
        result = run(args, bundle_id="p2")
    finally:
        tea.write_text(before, encoding="utf-8")
    refs = result.manifest.segments
    # A refresh writes one segment whatever --segments says; the parts are kept by reference.
    assert [(r.bundle_id, r.part) for r in refs][-1] == ("p2", None)
    assert len(refs) == PARTS + 1
    holder = refs[part_of("tea.md", PARTS)]
    assert holder.deleted_documents == ["tea.md"]
    assert all(not r.deleted_documents for r in refs[:PARTS] if r is not holder)
    validate_and_activate(work, "p2")
    top = retrieve(load_bundle(work, model=query_encoder), "oolong tea rolled", k=1)
    assert top[0].doc_id == "tea.md" and "Oolong" in top[0].text
    # A whole merge writes as many parts as the batch build did, split the same way.
    compacted = compact.run([], root=work, bundle_id="p3")
    assert [(r.bundle_id, r.part) for r in compacted.manifest.segments] == [
        ("p3", f"parts/{k}") for k in range(PARTS)
    ]
    for k in range(PARTS):
        docs = _table(os.path.join(compacted.path, "parts", str(k)), "documents.parquet")
        assert all(part_of(d, PARTS) == k for d in docs["doc_id"].to_pylist())
    assert compacted.manifest.row_counts["documents"] == 7
    assert validate_bundle(compacted.path).passed


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flipped byte", "missing part"])
def test_a_damaged_part_is_refused(parted, tmp_path, damage, query_encoder):
    root, _, _, _ = parted
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    part = Path(bundle_path(work, "p1"), "parts", "1")
    if damage == "flipped byte":
        target = part / "chunks.usearch"
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
    else:
        shutil.rmtree(part)
    with pytest.raises(BundleIntegrityError, match="parts/1"):
        open_bundle(bundle_path(work, "p1"), model=query_encoder)
    assert not validate_bundle(bundle_path(work, "p1"), write=False).passed


def test_segments_is_auto_or_a_bounded_number(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"a.txt": "Glass is made from sand."})

    def resolve(value, path=corpus):
        options = PipelineOptions(["--input", str(path), "--segments", value])
        return segment_count(options, config_from_options(options.view_as(EvidexBuildOptions)))

    assert resolve("auto") == 1  # a few bytes: one segment
    # One per 128 MiB the build reads: an oversized text file is a dead letter, not read.
    sized = tmp_path / "sized"
    sized.mkdir()
    for name, mib in (("big.jsonl", 300), ("huge.txt", 300)):
        with open(sized / name, "wb") as handle:
            handle.truncate(mib * 2**20)  # sparse: sizes without the disk
    assert resolve("auto", sized) == 3
    assert resolve("4") == 4
    for bad in ("0", "-2", "65", "many"):
        with pytest.raises(BuildFailedError, match="--segments"):
            resolve(bad)
    with pytest.raises(BuildFailedError, match="--segments"):
        run(["--input", str(corpus), "--root", str(tmp_path / "root"), "--segments", "0"])


def test_the_parts_of_one_batch_build_count_as_one_segment_in_the_merge_policy():
    def ref(bundle_id, chunks, part=None):
        return SegmentRef(
            bundle_id=bundle_id, part=part, digest="0" * 64, documents=chunks, chunks=chunks
        )

    parts = [ref("big", 100, f"parts/{k}") for k in range(3)]
    windows = [ref("w1", 10), ref("w2", 20)]
    policy = compact.MergePolicy(max_segments=2)
    generation = SimpleNamespace(segments=[*parts, *windows])
    # Five segments, three of them one build's parts: four against the limit of two.
    assert policy.reason(generation) == "5 segments (more than 4)"
    assert policy.segments_to_merge(generation) == ["w1", "w2"]  # the parts are kept
    assert policy.reason(SimpleNamespace(segments=[*parts, windows[0]])) is None
    # Separate bundles of the same size are not parts of one build.
    separate = SimpleNamespace(segments=[ref("a", 100), ref("b", 100), ref("c", 100)])
    assert policy.reason(separate) == "3 segments (more than 2)"
