import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.manifest import FileEntry
from store.activation import ActivationError, check_validated
from store.bundles import CHUNKS, MANIFEST, bundle_path, read_manifest, sha256_file
from store.segments import own_segment
from validation import validate_bundle
from validation.gate import ann_checks


def _rewrite_with_checksum(path: str, rel: str, table: pa.Table) -> None:
    """Replace a table and update the manifest so only the content checks can catch it."""
    pq.write_table(table, os.path.join(path, rel))
    manifest = read_manifest(path)
    files = dict(manifest.files)
    full = os.path.join(path, rel)
    files[rel] = FileEntry(sha256=sha256_file(full), size=os.path.getsize(full))
    manifest = manifest.model_copy(update={"files": files})
    # A consistent manifest lists its own segment by the digest of the files it now holds.
    own = own_segment(manifest)
    segments = [own if s.bundle_id == own.bundle_id else s for s in manifest.segments]
    data = manifest.model_copy(update={"segments": segments}).model_dump(mode="json")
    with open(os.path.join(path, MANIFEST), "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def test_report_of_a_good_bundle_passes_and_is_written(validated_root):
    path = bundle_path(str(validated_root), "b1")
    with open(os.path.join(path, "validation.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    assert report["passed"] is True
    names = {c["name"] for c in report["checks"]}
    assert "bundle.checksums" in names
    assert any("span_text_matches" in n for n in names)
    assert any(n.startswith("ann.mean_recall@") for n in names)
    check_validated(str(validated_root), "b1")


def test_a_span_that_does_not_match_its_document_fails_and_blocks_activation(fresh_root):
    path = bundle_path(str(fresh_root), "b1")
    table = pq.read_table(os.path.join(path, CHUNKS))
    starts = table.column("start").to_pylist()
    starts[0] += 1
    index = table.schema.get_field_index("start")
    table = table.set_column(index, table.schema.field(index), pa.array(starts, pa.int64()))
    _rewrite_with_checksum(path, CHUNKS, table)
    report = validate_bundle(path)
    assert not report.passed
    assert {c.name for c in report.failed()} == {
        "chunks.expect_column_values_to_be_in_set(span_text_matches)"
    }
    with pytest.raises(ActivationError, match="span_text_matches"):
        check_validated(str(fresh_root), "b1")


def test_a_tampered_file_fails_the_checksum_check(fresh_root):
    path = bundle_path(str(fresh_root), "b1")
    with open(os.path.join(path, "documents.parquet"), "ab") as handle:
        handle.write(b"tampered")
    report = validate_bundle(path)
    assert [c.name for c in report.failed()] == ["bundle.checksums"]


def test_duplicate_ids_and_bad_norms_fail(fresh_root):
    path = bundle_path(str(fresh_root), "b1")
    table = pq.read_table(os.path.join(path, CHUNKS))
    doubled = pa.concat_tables([table, table.slice(0, 1)])
    _rewrite_with_checksum(path, CHUNKS, doubled)
    failed = {c.name for c in validate_bundle(path).failed()}
    assert "chunks.expect_column_values_to_be_unique(chunk_id)" in failed
    assert "ann.vector_count_equals_rows" in failed


def test_ann_recall_floor_can_fail(tmp_path):
    import numpy as np
    from usearch.index import Index

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keys = np.arange(300, dtype=np.uint64)
    index = Index(ndim=8, metric="cos")
    index.add(keys, vectors[::-1].copy())  # keys deliberately attached to the wrong vectors
    index.save(str(tmp_path / "x.usearch"))
    checks = {c.name: c for c in ann_checks(str(tmp_path / "x.usearch"), keys, vectors)}
    assert not checks["ann.mean_recall@10"].success
    assert checks["ann.vector_count_equals_rows"].success


def test_undeclared_roles_and_reversed_validity_fail(fresh_root):
    path = bundle_path(str(fresh_root), "b1")
    table = pq.read_table(os.path.join(path, "documents.parquet"))
    rows = table.to_pylist()
    rows[0].update(valid_from="2025-01-01", valid_to="2024-01-01")
    rows[1].update(source_role="rumour")
    _rewrite_with_checksum(path, "documents.parquet", pa.Table.from_pylist(rows, table.schema))
    failed = {c.name for c in validate_bundle(path).failed()}
    assert failed == {
        "documents.expect_column_pair_values_a_to_be_greater_than_b(valid_to,valid_from)",
        "documents.expect_column_values_to_be_in_set(source_role)",
    }


@pytest.mark.parametrize("n", [1, 2, 3])
def test_ann_qualification_handles_tiny_indexes(tmp_path, n):
    """A one-document bundle has one vector: search returns 1-D keys, which must still score."""
    import numpy as np

    from store.config import AnnConfig
    from transforms.ann import build_index
    from validation.gate import ann_checks

    vectors = np.random.default_rng(n).normal(size=(n, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keys = np.arange(1, n + 1, dtype=np.uint64)
    path = str(tmp_path / "tiny.usearch")
    build_index(keys, vectors, config=AnnConfig()).save(path)
    checks = {c.name: c for c in ann_checks(path, keys, vectors)}
    assert checks[f"ann.mean_recall@{n}"].success and checks[f"ann.mean_recall@{n}"].observed == 1.0


def test_ann_recall_counts_tied_vectors_as_found(tmp_path):
    """The same passage in several documents gives equal vectors: whichever of them the
    index returns is a right answer, so a healthy index over duplicates passes."""
    import numpy as np

    from store.config import AnnConfig
    from transforms.ann import build_index

    rng = np.random.default_rng(3)
    distinct = rng.standard_normal((100, 16)).astype(np.float32)
    distinct /= np.linalg.norm(distinct, axis=1, keepdims=True)
    vectors = np.repeat(distinct, 4, axis=0)  # every vector four times, under four keys
    keys = rng.permutation(np.arange(1000, 1400, dtype=np.uint64))
    path = str(tmp_path / "dup.usearch")
    build_index(keys, vectors, config=AnnConfig()).save(path)
    checks = {c.name: c for c in ann_checks(path, keys, vectors)}
    assert checks["ann.mean_recall@10"].observed == 1.0
    assert checks["ann.min_recall@10"].observed == 1.0
    # Ties are no loophole: the same index with its keys shuffled among the groups fails.
    wrong = str(tmp_path / "wrong.usearch")
    build_index(keys, np.roll(vectors, 4, axis=0), config=AnnConfig()).save(wrong)
    assert not {c.name: c for c in ann_checks(wrong, keys, vectors)}["ann.mean_recall@10"].success
