"""Unsafe artifacts (issue 9, item 6): refused before anything is deserialized.

Each case tampers with a private copy of the validated tiny bundle, then checks
the three doors a bundle goes through — ``verify_bundle`` (validation and
activation use it), ``activate`` and ``query.open_bundle`` — with pickle
loading and USearch mapping booby-trapped so that any load fails the test.
"""

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from query import open_bundle
from store.activation import ActivationError, activate, read_active
from store.bundles import (
    MANIFEST,
    BundleIntegrityError,
    UnsafeArtifactError,
    bundle_path,
    sha256_file,
    verify_artifacts,
    verify_bundle,
)


@pytest.fixture
def root(validated_root: Path, tmp_path: Path) -> Path:
    target = tmp_path / "root"
    shutil.copytree(validated_root, target)
    return target


@pytest.fixture
def no_loading(monkeypatch):
    """Fail the test if anything unpickles or maps a vector file."""
    from usearch.index import Index

    def forbidden(*_args, **_kwargs):
        raise AssertionError("something was loaded before the bundle was refused")

    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(Index, "restore", forbidden)
    monkeypatch.setattr(pq, "read_table", forbidden)


def _list(bundle: Path, rel: str) -> None:
    """Add ``rel`` to the manifest with a correct checksum (an attacker who can write it)."""
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"][rel] = {
        "sha256": sha256_file(str(bundle / rel)),
        "size": (bundle / rel).stat().st_size,
    }
    (bundle / MANIFEST).write_text(json.dumps(manifest))


def _refused(root: Path, error: type[Exception], match: str) -> None:
    path = bundle_path(str(root), "b1")
    with pytest.raises(error, match=match):
        verify_bundle(path)
    with pytest.raises(error, match=match):
        open_bundle(path, verify=False)
    with pytest.raises(ActivationError, match=match):
        activate(str(root), "b1")


@pytest.mark.parametrize("name", ["model.pkl", "notes.bin"])
@pytest.mark.parametrize("listed", [False, True])
def test_a_pickle_anywhere_in_the_bundle_is_refused(root, no_loading, name, listed):
    bundle = Path(bundle_path(str(root), "b1"))
    (bundle / "bm25" / name).write_bytes(pickle.dumps({"payload": 1}, protocol=4))
    if listed:
        _list(bundle, f"bm25/{name}")
    _refused(root, UnsafeArtifactError, "pickle")
    assert read_active(str(root)) == "b1"


def test_an_object_array_is_refused(root, no_loading):
    bundle = Path(bundle_path(str(root), "b1"))
    np.save(bundle / "bm25" / "extra.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _refused(root, UnsafeArtifactError, "Python objects")


@pytest.mark.parametrize("kind", ["registered", "unregistered"])
@pytest.mark.parametrize("suffix", ["parquet", "arrow"])  # a table, a knowledge map file
def test_a_column_of_an_extension_type_is_refused(root, no_loading, kind, suffix):
    bundle = Path(bundle_path(str(root), "b1"))
    if kind == "registered":
        table = pa.table({"id": pa.array([b"\x00" * 16], type=pa.uuid())})
    else:  # an unknown extension name: pyarrow keeps it as field metadata
        field = pa.field("x", pa.int64(), metadata={"ARROW:extension:name": "evil.pickled"})
        table = pa.Table.from_arrays([pa.array([1])], schema=pa.schema([field]))
    target = bundle / "failures" / f"extra.{suffix}"
    if suffix == "parquet":
        pq.write_table(table, target)
    else:
        with pa.ipc.new_file(str(target), table.schema) as writer:
            writer.write_table(table)
    _list(bundle, f"failures/extra.{suffix}")
    _refused(root, UnsafeArtifactError, "extension type")


def test_a_map_file_that_is_not_arrow_is_refused(root, no_loading):
    bundle = Path(bundle_path(str(root), "b1"))
    (bundle / "entities.map.arrow").write_bytes(b"not an arrow file at all")
    _list(bundle, "entities.map.arrow")
    _refused(root, BundleIntegrityError, "not a readable Arrow IPC file")


def test_a_usearch_header_that_disagrees_with_the_manifest_is_refused(root, no_loading):
    from usearch.index import Index

    bundle = Path(bundle_path(str(root), "b1"))
    other = Index(ndim=8, metric="cos")
    other.add(np.arange(3, dtype=np.uint64), np.eye(3, 8, dtype=np.float32))
    other.save(str(bundle / "chunks.usearch"))
    _list(bundle, "chunks.usearch")  # checksums agree, so only the header check can catch it
    _refused(root, BundleIntegrityError, r"chunks\.usearch: header (dimension|count|metric)")


@pytest.mark.parametrize("rel", ["../b0/documents.parquet", "../../ACTIVE", "/etc/hostname"])
def test_a_manifest_path_outside_the_bundle_is_refused(root, no_loading, monkeypatch, rel):
    bundle = Path(bundle_path(str(root), "b1"))
    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest["files"][rel] = {"sha256": "0" * 64, "size": 1}
    (bundle / MANIFEST).write_text(json.dumps(manifest))
    opened: list[str] = []
    real_sha = sha256_file
    monkeypatch.setattr("store.bundles.sha256_file", lambda p: opened.append(p) or real_sha(p))
    _refused(root, UnsafeArtifactError, "outside the bundle directory")
    assert opened == []  # nothing outside was even hashed


def test_a_symbolic_link_in_the_bundle_is_refused(root, no_loading, tmp_path):
    bundle = Path(bundle_path(str(root), "b1"))
    (tmp_path / "secret.txt").write_text("outside")
    (bundle / "failures" / "link.txt").symlink_to(tmp_path / "secret.txt")
    _refused(root, UnsafeArtifactError, "symbolic link")


def test_a_usearch_file_whose_count_looks_like_a_pickle_header_is_not_refused(tmp_path):
    """640 vectors: the file starts with bytes 0x80 0x02, a pickle protocol-2 opcode."""
    from usearch.index import Index

    index = Index(ndim=4, metric="cos")
    index.add(
        np.arange(640, dtype=np.uint64),
        np.random.default_rng(0).random((640, 4)).astype(np.float32),
    )
    index.save(str(tmp_path / "chunks.usearch"))
    assert (tmp_path / "chunks.usearch").read_bytes()[:2] == b"\x80\x02"
    verify_artifacts(str(tmp_path))


def test_an_untampered_bundle_still_opens(root):
    bundle = open_bundle(bundle_path(str(root), "b1"))
    assert bundle.bundle_id == "b1" and len(bundle.chunk_ids) > 0


def test_pyarrow_is_pinned_past_the_known_deserialization_cve():
    """CVE-2023-47248 (arbitrary code via PyExtensionType unpickling) hit 0.14.0–14.0.0."""
    pin = next(
        line.split("==")[1].strip().strip('",')
        for line in Path("pyproject.toml").read_text().splitlines()
        if line.strip().startswith('"pyarrow==')
    )
    assert tuple(int(p) for p in pin.split(".")[:2]) >= (14, 0, 1)
    assert pa.__version__ == pin
