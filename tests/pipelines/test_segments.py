"""Generations of segments: a refresh writes one segment, queries read them all, and
compaction gives what a from-scratch build gives."""

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines import compact
from pipelines.build_index import run
from query import load_bundle, retrieve
from store import knowledge_layers
from store.activation import gc, read_active
from store.bundles import BundleIntegrityError, bundle_path, list_bundles
from store.segments import EXTRACTED_MENTIONS, open_segments
from tests.conftest import TINY_CORPUS, validate_and_activate, write_corpus
from validation import validate_bundle

EDITED = dict(TINY_CORPUS)
EDITED["tea.md"] = "# Tea\n\nOolong tea is partly oxidised before it is rolled and dried."
EDITED["kite.md"] = (
    "# Kites\n\nA kite flies because the wind pushes against its sail. Benjamin Franklin flew "
    "one in a thunderstorm."
)
del EDITED["bread.txt"]


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory):
    """A root where ``b2`` (a refresh of ``b1``: one document edited, one added, one
    removed, in the same input folder) is active, and that folder."""
    base = tmp_path_factory.mktemp("segments")
    root = str(base / "root")
    corpus = write_corpus(base / "corpus", TINY_CORPUS)
    run(["--input", str(corpus), "--root", root], bundle_id="b1")
    validate_and_activate(root, "b1")
    (corpus / "bread.txt").unlink()
    write_corpus(corpus, EDITED)
    result = run(["--input", str(corpus), "--root", root], bundle_id="b2")
    validate_and_activate(root, "b2")
    return root, corpus, result


@pytest.mark.slow
def test_a_refresh_writes_one_segment_of_what_changed(refreshed):
    root, _, result = refreshed
    manifest = result.manifest
    assert [s.bundle_id for s in manifest.segments] == ["b1", "b2"]
    kept = manifest.segments[0]
    assert kept.deleted_documents == ["bread.txt", "tea.md"]
    old_chunks = pq.read_table(os.path.join(bundle_path(root, "b1"), "chunks.parquet"))
    assert kept.deleted_chunks == sorted(
        c["chunk_id"] for c in old_chunks.to_pylist() if c["doc_id"] in ("bread.txt", "tea.md")
    )
    # The new segment holds only the new and changed documents, parsed and embedded once.
    docs = pq.read_table(os.path.join(result.path, "documents.parquet"))["doc_id"].to_pylist()
    assert docs == ["kite.md", "tea.md"]
    chunks = pq.read_table(os.path.join(result.path, "chunks.parquet")).to_pylist()
    assert manifest.delta["texts_embedded"] == len(chunks)
    extracted = pq.read_table(os.path.join(result.path, EXTRACTED_MENTIONS))
    assert set(extracted["doc_id"].to_pylist()) <= {"kite.md", "tea.md"}
    delta = manifest.delta
    assert (delta["new"], delta["changed"], delta["unchanged"], delta["deleted"]) == (1, 1, 5, 1)
    # The knowledge layer covers the live chunks of both segments, and nothing deleted.
    mentions = pq.read_table(os.path.join(result.path, "mentions.parquet"))
    assert "bread.txt" not in set(mentions["doc_id"].to_pylist())
    assert {"kite.md", "river.md"} <= set(mentions["doc_id"].to_pylist())


@pytest.mark.slow
def test_queries_read_every_live_segment_and_no_deleted_row(refreshed, query_encoder):
    root, corpus, _ = refreshed
    bundle = load_bundle(root, model=query_encoder)
    assert len(bundle.segments) == 2
    assert sorted(bundle.documents) == sorted(
        ["bike-1", "bike-2", "chess.md", "kite.md", "river.md", "tea.md", "volcano.txt"]
    )
    assert bundle.chunk_ids == sorted(bundle.chunk_ids)  # one total order across segments
    every = retrieve(bundle, "sourdough bread yeast", k=len(bundle.chunk_ids) + 5)
    assert "bread.txt" not in {e.doc_id for e in every}
    assert len(every) == len(bundle.chunk_ids)
    for query, expected in (("oolong tea rolled", "tea.md"), ("kite sail wind", "kite.md")):
        top = retrieve(bundle, query, k=3)
        assert top[0].doc_id == expected
        text = (corpus / expected).read_text(encoding="utf-8")
        assert text[top[0].start : top[0].end] == top[0].text
    old_tea = retrieve(bundle, "green tea steamed pan-fired", k=10)
    assert all("Green tea" not in e.text for e in old_tea)  # the old revision is gone
    restricted = retrieve(bundle, "kite sail wind", k=3, access=["public"])
    assert restricted and all(e.access_class == "public" for e in restricted)


@pytest.mark.slow
def test_a_new_access_class_alone_makes_a_document_changed(refreshed, tmp_path, query_encoder):
    """The text is the same, so the revision is too: the sidecar's access class must still
    reach every row of the document, never left stale in a kept segment."""
    root, corpus, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    sidecar = tmp_path / "meta.jsonl"
    sidecar.write_text(json.dumps({"source_id": "river.md", "access_class": "restricted"}))
    args = ["--input", str(corpus), "--root", work, "--metadata", str(sidecar)]
    result = run(args, bundle_id="b3")
    delta = result.manifest.delta
    assert (delta["changed"], delta["unchanged"]) == (1, 6)
    validate_and_activate(work, "b3")
    bundle = load_bundle(work, model=query_encoder)
    assert bundle.documents["river.md"]["access_class"] == "restricted"
    public = retrieve(bundle, "Danube Black Sea pelicans", k=10, access=["public"])
    assert "river.md" not in {e.doc_id for e in public}


@pytest.mark.slow
def test_deleting_a_jsonl_record_leaves_the_records_below_it_unchanged(refreshed, tmp_path):
    """A record's line number is where it sits, not what it is."""
    root, corpus, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    records = corpus / "records.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 2  # bike-1 on line 1, bike-2 on line 2
    records.write_text(lines[1], encoding="utf-8")  # bike-2 moves up to line 1
    try:
        result = run(["--input", str(corpus), "--root", work], bundle_id="b3")
    finally:
        records.write_text("".join(lines), encoding="utf-8")
    delta = result.manifest.delta
    assert (delta["new"], delta["changed"], delta["deleted"]) == (0, 0, 1)
    assert "bike-1" in result.manifest.segments[0].deleted_documents


@pytest.mark.slow
def test_compaction_holds_what_a_from_scratch_build_holds(refreshed, tmp_path):
    root, corpus, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    compacted = compact.run([], root=work, bundle_id="b3")
    assert [s.bundle_id for s in compacted.manifest.segments] == ["b3"]
    assert compacted.manifest.delta["compacted_segments"] == ["b1", "b2"]
    assert compacted.manifest.delta["texts_embedded"] == 0
    fresh_root = str(tmp_path / "fresh")
    fresh = run(["--input", str(corpus), "--root", fresh_root], bundle_id="f1")
    tables = ["documents", "chunks", "mentions", "entities", "relations", "communities"]
    tables += ["extraction/mentions", "extraction/statements", "extraction/acronyms"]
    for table in tables:
        ours = pq.read_table(os.path.join(compacted.path, f"{table}.parquet"))
        theirs = pq.read_table(os.path.join(fresh.path, f"{table}.parquet"))
        if "embedding" in ours.column_names:
            for a, b in zip(
                ours["embedding"].to_pylist(), theirs["embedding"].to_pylist(), strict=True
            ):
                assert (a is None) == (b is None)
                assert a is None or np.allclose(a, b, atol=1e-5), table
            ours, theirs = ours.drop_columns(["embedding"]), theirs.drop_columns(["embedding"])
        assert ours.equals(theirs), table
    assert validate_bundle(compacted.path).passed


@pytest.mark.slow
def test_gc_keeps_the_bundles_whose_segments_a_kept_generation_reads(refreshed, tmp_path):
    root, _, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    assert read_active(work) == "b2"
    # Keep only the newest bundle (b2): b1 is its parent, and it holds b2's first segment.
    assert gc(work, keep=1) == []
    manifest = json.loads(Path(bundle_path(work, "b2"), "manifest.json").read_text())
    assert [s["bundle_id"] for s in manifest["segments"]] == ["b1", "b2"]
    assert list_bundles(work) == ["b1", "b2"]


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flipped byte", "unknown chunk", "missing segment"])
def test_a_damaged_generation_is_refused(refreshed, tmp_path, damage, query_encoder):
    root, _, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    b1, b2 = bundle_path(work, "b1"), bundle_path(work, "b2")
    if damage == "flipped byte":
        target = Path(b1, "chunks.usearch")
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
        match = "chunks.usearch"
    elif damage == "unknown chunk":
        path = Path(b2, "manifest.json")
        manifest = json.loads(path.read_text())
        manifest["segments"][0]["deleted_chunks"].append("no-such-chunk")
        path.write_text(json.dumps(manifest))
        match = "no-such-chunk"
    else:
        shutil.rmtree(b1)
        match = "b1"
    with pytest.raises(BundleIntegrityError, match=match):
        load_bundle(work, bundle_id="b2", model=query_encoder)
    report = validate_bundle(b2, write=False)
    assert not report.passed
    if damage != "unknown chunk":
        from store.bundles import read_manifest

        with pytest.raises(BundleIntegrityError):
            open_segments(b2, read_manifest(b2))


def test_the_merge_policy_names_why_a_generation_should_be_compacted():
    from schemas.manifest import SegmentRef

    def generation(*segments):
        return SimpleNamespace(segments=list(segments))

    digest = "0" * 64
    small = SegmentRef(bundle_id="a", digest=digest, documents=10, chunks=10)
    policy = compact.MergePolicy(max_segments=2, max_deleted_share=0.25)
    assert policy.reason(generation(small, small)) is None
    assert policy.reason(generation(small, small, small)) == "3 segments (more than 2)"
    worn = small.model_copy(update={"deleted_chunks": [f"c{i}" for i in range(6)]})
    assert policy.reason(generation(worn, small)) == "30% of the chunk rows deleted (more than 25%)"


@pytest.mark.slow
def test_a_refresh_compacts_when_the_policy_says_so(refreshed, tmp_path, query_encoder):
    from pipelines.refresh import compact_if_due
    from store.bundles import read_manifest

    root, _, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    manifest = read_manifest(bundle_path(work, "b2"))
    assert compact_if_due(work, "b2", manifest) == ("b2", "")  # two segments: not due
    active, note = compact_if_due(work, "b2", manifest, policy=compact.MergePolicy(max_segments=1))
    assert active != "b2" and read_active(work) == active
    assert note == f"compacted (2 segments (more than 1)) into {active}"
    bundle = load_bundle(work, model=query_encoder)
    assert [s.ref.bundle_id for s in bundle.segments] == [active]
    assert retrieve(bundle, "kite sail wind", k=1)[0].doc_id == "kite.md"


@pytest.mark.slow
def test_bm25_across_segments_uses_the_live_corpus_statistics(refreshed, tmp_path, query_encoder):
    """With corpus statistics a term weighs what it weighs in a from-scratch build of the
    same documents (IDF over the live rows of all segments), not what it weighed in the
    segment that happens to hold it."""
    from query.segments import SegmentedLexical

    root, corpus, _ = refreshed
    bundle = load_bundle(root, model=query_encoder)
    fresh = load_bundle(str(_fresh_build(corpus, tmp_path)), model=query_encoder)
    assert bundle.chunk_ids == fresh.chunk_ids
    lexical = bundle.lexical
    assert isinstance(lexical, SegmentedLexical) and lexical.statistics == "corpus"
    query = "tea oxidised before drying and rolled"
    corpus_scores = lexical.scores(query)
    lexical.statistics = "segment"
    segment_scores = lexical.scores(query)
    lexical.statistics = "corpus"
    expected = fresh.lexical.scores(query)
    assert (corpus_scores > 0).tolist() == (expected > 0).tolist()
    # The term weights agree; only each segment's average chunk length still differs.
    gap = np.abs(corpus_scores - expected).max()
    assert gap < np.abs(segment_scores - expected).max()
    assert gap < 0.25 * expected.max()
    with pytest.raises(ValueError, match="statistics"):
        SegmentedLexical([], 0, statistics="global")


def _fresh_build(corpus: Path, tmp_path: Path) -> Path:
    root = tmp_path / "fresh"
    run(["--input", str(corpus), "--root", str(root)], bundle_id="f1")
    validate_and_activate(str(root), "f1")
    return root


@pytest.mark.slow
def test_small_segments_merged_postings_score_what_the_per_segment_loop_scores(
    refreshed, query_encoder, monkeypatch
):
    """The small segments' BM25 postings, merged at open time, give the scores of
    scoring each segment in turn (the path a large segment takes)."""
    from query import segments

    root, _, _ = refreshed
    merged = load_bundle(root, model=query_encoder)
    monkeypatch.setattr(segments, "SMALL_SEGMENT_ROWS", 0)
    one_by_one = load_bundle(root, model=query_encoder)
    for query in ("tea oxidised before drying and rolled", "kite wind sail", "river delta"):
        np.testing.assert_allclose(
            merged.lexical.scores(query), one_by_one.lexical.scores(query), rtol=1e-5, atol=1e-6
        )
    vector = query_encoder.encode("how does a kite fly")
    assert (
        merged.index.search(vector, 5).keys.tolist()
        == one_by_one.index.search(vector, 5).keys.tolist()
    )


def test_the_merge_policy_merges_small_segments_alone_when_it_can():
    from schemas.manifest import SegmentRef

    def generation(*segments):
        return SimpleNamespace(segments=list(segments))

    def segment(name, chunks, deleted=0):
        return SegmentRef(
            bundle_id=name,
            digest="0" * 64,
            documents=chunks,
            chunks=chunks,
            deleted_chunks=[f"{name}{i}" for i in range(deleted)],
        )

    policy = compact.MergePolicy(max_segments=2)
    big, a, b = segment("big", 100), segment("a", 10), segment("b", 20)
    assert policy.segments_to_merge(generation(a, big, b)) == ["a", "b"]
    # The small ones hold half the largest's rows or more: everything is merged.
    assert policy.segments_to_merge(generation(big, a, segment("c", 40))) is None
    # One small segment alone is not worth a merge; deletions call for a whole one.
    assert policy.segments_to_merge(generation(big, a)) is None
    worn = segment("big", 100, deleted=40)
    assert policy.segments_to_merge(generation(worn, a, b)) is None


@pytest.mark.slow
def test_a_tiered_merge_keeps_the_largest_segment_and_the_knowledge_layer(refreshed, tmp_path):
    root, corpus, _ = refreshed
    work = str(tmp_path / "root")
    shutil.copytree(root, work)
    extra = corpus / "owl.md"  # b3 adds one document (the fixture's folder, restored after)
    extra.write_text(
        "# Owls\n\nBarn owls hunt at night and find mice by sound, as Masakazu Konishi showed.",
        encoding="utf-8",
    )
    try:
        # a tiny corpus: one document is a large change, so let the window stay layered
        third = run(["--input", str(corpus), "--root", work, "--fold_share", "1"], bundle_id="b3")
    finally:
        extra.unlink()
    validate_and_activate(work, "b3")
    assert [s.bundle_id for s in third.manifest.segments] == ["b1", "b2", "b3"]
    merged = compact.run([], root=work, bundle_id="b4", merge=["b2", "b3"])
    manifest = merged.manifest
    assert [s.bundle_id for s in manifest.segments] == ["b1", "b4"]
    assert manifest.segments[0] == third.manifest.segments[0]  # with its deletions
    assert manifest.delta["compacted_segments"] == ["b2", "b3"]
    assert manifest.knowledge_state == third.manifest.knowledge_state
    for name in ("mentions", "entities", "relations", "communities"):
        table = f"{name}.parquet"
        before = knowledge_layers.read_table(bundle_path(work, "b3"), table)
        # kept as it is, a table the window wrote as a base and a delta folded whole
        assert not knowledge_layers.is_layered(merged.path, table), name
        assert knowledge_layers.read_table(merged.path, table).equals(before), name
    assert knowledge_layers.is_layered(bundle_path(work, "b3"), "mentions.parquet")
    assert manifest.input_fingerprint == third.manifest.input_fingerprint
    report = validate_bundle(merged.path)
    assert report.passed, report.failed()
    docs = pq.read_table(os.path.join(merged.path, "documents.parquet"))["doc_id"].to_pylist()
    assert sorted(docs) == ["kite.md", "owl.md", "tea.md"]
    assert EXTRACTED_MENTIONS in manifest.files


@pytest.mark.slow
def test_a_corpus_that_names_nothing_still_writes_its_knowledge_tables(tmp_path):
    # No document names a thing, so there are no mentions: the tables are written empty,
    # and the generation keeps a knowledge layer a refresh can extend.
    from store import bundles

    corpus = write_corpus(tmp_path / "corpus", {"kite.md": EDITED["kite.md"].split(".")[0]})
    result = run(["--input", str(corpus), "--root", str(tmp_path / "root")], bundle_id="n1")
    manifest = result.manifest
    assert manifest.row_counts["mentions"] == 0 and manifest.row_counts["entities"] == 0
    for table in bundles.KNOWLEDGE_TABLES:
        assert bundles.TABLES[table] in manifest.files
    assert manifest.knowledge_state is not None
