"""Bundle lifecycle under damage, concurrency and retention."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from query import BundleReader, load_bundle, retrieve
from store.activation import ActivationError, activate, gc, read_active, rollback
from store.bundles import (
    MANIFEST,
    BundleError,
    BundleIntegrityError,
    bundle_path,
    list_bundles,
    read_manifest,
)
from store.regression import RegressionCase, add_case, read_cases
from tests.conftest import OTHER_CORPUS, TINY_CORPUS
from tests.validation.test_gate import _rewrite_with_checksum
from validation import validate_bundle

BUNDLE_FILES = (
    "documents.parquet",
    "chunks.parquet",
    "chunks.usearch",
    "failures/ingest.parquet",
    "failures/chunk.parquet",
    "failures/embed.parquet",
    "bm25/data.csc.index.npy",
    "bm25/indices.csc.index.npy",
    "bm25/indptr.csc.index.npy",
    "bm25/vocab.index.json",
    "bm25/params.index.json",
)


def _validated_copy(src, dst) -> str:
    shutil.copytree(src, dst)
    return str(dst)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
@pytest.mark.parametrize("name", BUNDLE_FILES)
def test_damaged_files_are_refused_by_activation_and_loading(
    validated_root, tmp_path, query_encoder, name, damage
):
    root = _validated_copy(validated_root, tmp_path / "r")
    target = os.path.join(bundle_path(root, "b1"), name)
    with open(target, "rb") as handle:
        data = bytearray(handle.read())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    with open(target, "wb") as handle:
        handle.write(bytes(data))
    with pytest.raises(ActivationError, match=name.replace(".", r"\.")):
        activate(root, "b1")
    with pytest.raises(BundleIntegrityError, match=name.replace(".", r"\.")):
        load_bundle(root, bundle_id="b1", model=query_encoder)


def test_a_damaged_manifest_is_refused(validated_root, tmp_path, query_encoder):
    root = _validated_copy(validated_root, tmp_path / "r")
    path = os.path.join(bundle_path(root, "b1"), MANIFEST)
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) // 2)
    with pytest.raises(ActivationError, match="manifest"):
        activate(root, "b1")
    with pytest.raises(BundleError, match="manifest"):
        load_bundle(root, bundle_id="b1", model=query_encoder)


def test_a_damaged_validation_report_blocks_activation(validated_root, tmp_path):
    root = _validated_copy(validated_root, tmp_path / "r")
    report = os.path.join(bundle_path(root, "b1"), "validation.json")
    with open(report, "r+b") as handle:
        handle.truncate(os.path.getsize(report) // 2)
    with pytest.raises(ActivationError, match="validation report"):
        activate(root, "b1")


def test_an_index_header_that_disagrees_with_the_manifest_is_named(
    validated_root, tmp_path, query_encoder
):
    from usearch.index import Index

    root = _validated_copy(validated_root, tmp_path / "r")
    path = bundle_path(root, "b1")
    index = Index(ndim=384, metric="cos")
    index.add(np.arange(3, dtype=np.uint64), np.eye(3, 384, dtype=np.float32))
    index.save(os.path.join(path, "chunks.usearch"))
    manifest = read_manifest(path)
    table = pq.read_table(os.path.join(path, "chunks.parquet"))
    _rewrite_with_checksum(path, "chunks.parquet", table)  # refresh checksums only
    from schemas.manifest import FileEntry
    from store.bundles import sha256_file

    files = dict(read_manifest(path).files)
    usearch_file = os.path.join(path, "chunks.usearch")
    files["chunks.usearch"] = FileEntry(
        sha256=sha256_file(usearch_file), size=os.path.getsize(usearch_file)
    )
    data = read_manifest(path).model_copy(update={"files": files}).model_dump(mode="json")
    with open(os.path.join(path, MANIFEST), "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    expected = manifest.indexes["chunks.usearch"].count
    with pytest.raises(
        BundleIntegrityError, match=rf"chunks\.usearch: header count is 3.*{expected}"
    ):
        load_bundle(root, bundle_id="b1", model=query_encoder)


def _set_embedding(path: str, transform) -> None:
    table = pq.read_table(os.path.join(path, "chunks.parquet"))
    column = table.column("embedding").combine_chunks()
    vectors = column.values.to_numpy(zero_copy_only=False).reshape(len(column), -1).copy()
    vectors = transform(vectors)
    flat = pa.array(vectors.ravel(), pa.float32())
    new = pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
    index = table.schema.get_field_index("embedding")
    field = pa.field("embedding", new.type, nullable=False)
    _rewrite_with_checksum(path, "chunks.parquet", table.set_column(index, field, new))


@pytest.mark.parametrize(
    ("injury", "failed_check"),
    [
        (
            lambda v: np.where(np.arange(v.size).reshape(v.shape) == 5, np.nan, v),
            "embedding_finite",
        ),
        (lambda v: v[:, :383] / np.linalg.norm(v[:, :383], axis=1, keepdims=True), "embedding_dim"),
    ],
    ids=["nan-vector", "wrong-dimension"],
)
def test_invalid_vectors_block_activation(fresh_root, injury, failed_check):
    path = bundle_path(str(fresh_root), "b1")
    _set_embedding(path, injury)
    report = validate_bundle(path)
    assert any(failed_check in c.name for c in report.failed())
    with pytest.raises(ActivationError, match=failed_check):
        activate(str(fresh_root), "b1")


def test_regression_suite_gates_activation(fresh_root):
    root = str(fresh_root)
    add_case(root, RegressionCase(query="Which volcano is on Sicily?", expect=("volcano.txt",)))
    assert validate_bundle(bundle_path(root, "b1"), regression=read_cases(root)).passed
    add_case(root, RegressionCase(query="How is green tea made?", expect=("river.md",), k=1))
    report = validate_bundle(bundle_path(root, "b1"), regression=read_cases(root))
    assert [c.name for c in report.failed()] == ["regression.2(How is green tea made?)"]
    assert report.failed()[0].observed["missing"] == ["river.md"]
    with pytest.raises(ActivationError, match=r"regression\.2"):
        activate(root, "b1")


def test_gc_keeps_the_newest_and_never_the_active_or_its_parent(two_bundle_root, tmp_path):
    root = _validated_copy(two_bundle_root, tmp_path / "r")
    for name in ("b0", "b3"):
        shutil.copytree(bundle_path(root, "b1"), bundle_path(root, name))
    activate(root, "b1")
    assert gc(root, keep=1, dry_run=True) == ["b0", "b2"]
    assert list_bundles(root) == ["b0", "b1", "b2", "b3"]
    assert gc(root, keep=1) == ["b0", "b2"]
    assert list_bundles(root) == ["b1", "b3"]
    assert read_active(root) == "b1"
    with pytest.raises(ValueError, match="zero or more"):
        gc(root, keep=-1)


def test_gc_protects_the_parent_of_the_active_bundle(two_bundle_root, tmp_path):
    root = _validated_copy(two_bundle_root, tmp_path / "r")
    manifest = read_manifest(bundle_path(root, "b2"))
    assert manifest.parent_bundle_id == "b1"  # b2 was built while b1 was active
    activate(root, "b2")
    assert gc(root, keep=0) == []
    assert list_bundles(root) == ["b1", "b2"]


def test_reader_reload_switches_bundles_without_a_gap(two_bundle_root, tmp_path, query_encoder):
    root = _validated_copy(two_bundle_root, tmp_path / "r")
    reader = BundleReader(root, model=query_encoder)
    before = reader.current
    assert before.bundle_id == "b1" and reader.reload() is False
    activate(root, "b2")
    assert reader.reload() is True
    assert reader.current.bundle_id == "b2"
    assert retrieve(before, "volcano", k=1)[0].doc_id == "volcano.txt"  # old handle still works
    assert retrieve(reader.current, "owls hunting", k=1)[0].doc_id == "owls.md"


@pytest.mark.slow
def test_readers_never_see_a_mixed_bundle_during_100_swaps(
    two_bundle_root, tmp_path, query_encoder
):
    root = _validated_copy(two_bundle_root, tmp_path / "r")
    corpora = {"b1": set(TINY_CORPUS) | {"bike-1", "bike-2"}, "b2": set(OTHER_CORPUS)}
    corpora["b1"].discard("records.jsonl")
    errors: list[str] = []
    served = {"b1": 0, "b2": 0}
    stop = threading.Event()
    lock = threading.Lock()

    def read_loop(reader: BundleReader) -> None:
        queries = ["rivers and seas", "how things are made", "animals at night"]
        i = 0
        while not stop.is_set():
            try:
                reader.reload()
                bundle = reader.current
                evidence = retrieve(bundle, queries[i % 3], k=3)
                docs = {e.doc_id for e in evidence}
                if not docs <= corpora[bundle.bundle_id]:
                    errors.append(f"{bundle.bundle_id} served {docs}")
                for e in evidence:
                    if bundle.documents[e.doc_id]["text"][e.start : e.end] != e.text:
                        errors.append(f"span mismatch in {bundle.bundle_id}")
                with lock:
                    served[bundle.bundle_id] += 1
            except Exception as exc:
                errors.append(repr(exc))
            i += 1

    readers = [BundleReader(root, model=query_encoder, verify=False) for _ in range(8)]
    threads = [threading.Thread(target=read_loop, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    try:
        for _ in range(100):
            activate(root, "b2")
            rollback(root)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert served["b1"] > 0 and served["b2"] > 0


_ACTIVATOR = """
import os, sys, time
from store.activation import ActivationConflictError, activate
root, bundle, go = sys.argv[1:4]
while not os.path.exists(go):
    time.sleep(0.001)
try:
    activate(root, bundle, expected_previous="b1")
    print("won")
except ActivationConflictError:
    print("conflict")
"""


def test_two_processes_activating_at_once_exactly_one_wins(two_bundle_root, tmp_path):
    root = _validated_copy(two_bundle_root, tmp_path / "r")
    shutil.copytree(bundle_path(root, "b2"), bundle_path(root, "b3"))
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _ACTIVATOR, root, b, str(go)], stdout=subprocess.PIPE, text=True
        )
        for b in ("b2", "b3")
    ]
    time.sleep(2.0)  # both interpreters started and waiting
    go.touch()
    outcomes = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(outcomes) == ["conflict", "won"]
    winner = ("b2", "b3")[outcomes.index("won")]
    assert read_active(root) == winner
