"""Bundle layout on a bundle root: paths, ids, manifest writing and checking.

The root is a local directory or an object-store prefix (``gs://…``, ``s3://…``; see
:mod:`store.storage`). Layout::

    <root>/ACTIVE                  id of the active bundle (see store.activation)
    <root>/history.jsonl           every activation and rollback
    <root>/bundles/<bundle_id>/    one immutable bundle
    <root>/staging/<bundle_id>/    a build in progress (never read by queries)
"""

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.manifest import (
    READABLE_SCHEMA_VERSIONS,
    IndexInfo,
    Manifest,
)
from store import storage, table_cache
from store.npy import header_dtype

DEFAULT_ROOT = ".evidex"
MANIFEST = "manifest.json"
VALIDATION_REPORT = "validation.json"
DOCUMENTS = "documents.parquet"
CHUNKS = "chunks.parquet"
CHUNK_INDEX = "chunks.usearch"
FAILURES_DIR = "failures"
LEXICAL_DIR = "bm25"
MENTIONS = "mentions.parquet"
ENTITIES = "entities.parquet"
RELATIONS = "relations.parquet"
COMMUNITIES = "communities.parquet"
RELATION_INDEX = "relations.usearch"
COMMUNITY_INDEX = "communities.usearch"
ENCODER_GRAPH = "encoder/model.onnx"
ENCODER_TOKENIZER = "encoder/tokenizer.json"


def partition_index(access_class: str) -> str:
    """File of the HNSW partition over one access class's chunks."""
    return f"chunks.{access_class}.usearch"


TABLES = {
    "documents": DOCUMENTS,
    "chunks": CHUNKS,
    "mentions": MENTIONS,
    "entities": ENTITIES,
    "relations": RELATIONS,
    "communities": COMMUNITIES,
}
KNOWLEDGE_TABLES = ("mentions", "entities", "relations", "communities")


class BundleError(RuntimeError):
    """A bundle is missing, malformed, or fails its checks."""


class BundleVersionError(BundleError):
    """The bundle's schema version is not one this code reads."""


class BundleIntegrityError(BundleError):
    """A file's bytes do not match the manifest's checksum."""


class UnsafeArtifactError(BundleError):
    """A bundle file could run code or reach outside the bundle if it were loaded.

    Raised before anything is deserialized: a manifest path that is absolute or
    climbs out with ``..``, a symbolic link, a pickle (by suffix or by its
    protocol header), a ``.npy`` array of Python objects, or a Parquet column of
    an Arrow extension type.
    """


PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".pt", ".pth", ".ckpt")
_EXTENSION_KEY = b"ARROW:extension:name"
_PICKLE_PROTOCOLS = (b"\x02", b"\x03", b"\x04", b"\x05")
ONNX_HEAD = b"\x08"
"""An ONNX ModelProto opens with field 1 (``ir_version``, a varint): tag byte 0x08."""


def resolve_root(root: str | None = None) -> str:
    """Bundle root: ``root`` if given, else ``$EVIDEX_HOME``, else ``./.evidex``.

    A local root becomes an absolute path; an object-store root (``gs://bucket/x``)
    is kept as given, without a trailing slash.
    """
    chosen = root or os.environ.get("EVIDEX_HOME") or DEFAULT_ROOT
    chosen = chosen.removeprefix("file://")
    if storage.is_remote(chosen):
        return chosen.rstrip("/")
    return os.path.abspath(os.path.expanduser(chosen))


def bundles_dir(root: str) -> str:
    return storage.join(root, "bundles")


def bundle_path(root: str, bundle_id: str) -> str:
    """Directory of a finalized bundle.

    Raises:
        ValueError: ``bundle_id`` is not a plain name.
    """
    if not bundle_id or "/" in bundle_id or bundle_id.startswith("."):
        raise ValueError(f"invalid bundle id {bundle_id!r}")
    return storage.join(bundles_dir(root), bundle_id)


def staging_path(root: str, bundle_id: str) -> str:
    return storage.join(root, "staging", bundle_id)


def local_bundle(root: str, bundle_id: str) -> str:
    """A local directory with the bundle's files: the bundle itself under a local
    root, a cached copy (validation report refreshed) under an object-store root.

    Raises:
        BundleError: the bundle has no manifest (missing or not finished).
        UnsafeArtifactError: an object name under the bundle climbs out of it.
    """
    path = bundle_path(root, bundle_id)
    if not storage.is_remote(path):
        return path
    try:
        return storage.local_copy(
            path, storage.cache_dir(root), manifest=MANIFEST, fresh=(VALIDATION_REPORT,)
        )
    except FileNotFoundError as exc:
        raise BundleError(f"no manifest at {path}: not a finished bundle") from exc
    except ValueError as exc:
        raise UnsafeArtifactError(str(exc)) from exc


def store_validation_report(root: str, bundle_id: str, local: str) -> None:
    """Copy the report that validation wrote into the local copy ``local`` back to the
    bundle on an object-store root (a local root's bundle already holds it)."""
    target = storage.join(bundle_path(root, bundle_id), VALIDATION_REPORT)
    if storage.is_remote(target):
        storage.write_bytes(target, storage.read_bytes(os.path.join(local, VALIDATION_REPORT)))


def read_columns(path: str, columns: list[str]) -> pa.Table:
    """Some columns of a Parquet table on any filesystem."""
    if storage.is_remote(path):
        return pq.read_table(pa.BufferReader(storage.read_bytes(path)), columns=columns)
    return pq.read_table(path, columns=columns)


def new_bundle_id(now: dt.datetime | None = None) -> str:
    """A sortable bundle id from the UTC time, e.g. ``20261130T031100.123456Z``."""
    moment = now or dt.datetime.now(dt.UTC)
    return moment.strftime("%Y%m%dT%H%M%S.%fZ")


def sha256_file(path: str) -> str:
    """The file's sha256 (hex); a process that keeps tables in memory (a stream) hashes
    each file once (:func:`store.table_cache.digest`)."""
    return table_cache.digest(path, _sha256)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint_pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """sha256 over the sorted, distinct ``doc_id ␟ revision`` lines."""
    payload = "\n".join(f"{d}\x1f{r}" for d, r in sorted(set(pairs))).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def input_fingerprint(documents_parquet: str) -> str:
    """:func:`fingerprint_pairs` of a documents table."""
    table = pq.read_table(documents_parquet, columns=["doc_id", "revision"])
    return fingerprint_pairs(
        zip(table["doc_id"].to_pylist(), table["revision"].to_pylist(), strict=True)
    )


def embedding_matrix(column: Any) -> np.ndarray:
    """A fixed-size-list ``embedding`` column -> an ``n x d`` float32 matrix."""
    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    width = column.type.list_size
    values = column.values
    flat = numbers(values) if values.null_count == 0 else values.to_numpy(zero_copy_only=False)
    return flat.reshape(len(column), width).astype(np.float32, copy=False)


def numbers(column: Any) -> np.ndarray:
    """A null-free numeric Arrow array or chunked column as a read-only numpy view of its
    buffers. ``to_numpy`` would do the same but imports pandas (0.3 s of a cold query).

    Raises:
        ValueError: the column holds nulls or is not a fixed-width number type.
    """
    dtype = _numpy_dtype(column.type)
    parts = []
    for chunk in column.chunks if hasattr(column, "chunks") else [column]:
        if chunk.null_count:
            raise ValueError(f"column of {chunk.type} holds {chunk.null_count} null(s)")
        data = chunk.buffers()[1]
        if data is not None and len(chunk):
            offset = chunk.offset * dtype.itemsize
            parts.append(np.frombuffer(data, dtype=dtype, count=len(chunk), offset=offset))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _numpy_dtype(arrow_type: Any) -> np.dtype:
    if pa.types.is_floating(arrow_type):
        return np.dtype(f"float{arrow_type.bit_width}")
    if pa.types.is_integer(arrow_type):
        sign = "int" if pa.types.is_signed_integer(arrow_type) else "uint"
        return np.dtype(f"{sign}{arrow_type.bit_width}")
    raise ValueError(f"not a number column: {arrow_type}")


def read_parquet(path: str, columns: list[str] | None = None) -> pa.Table:
    """One local Parquet file's ``columns`` (all by default), read through the file reader:
    ``pq.read_table`` goes through ``pyarrow.dataset``, whose import costs a cold query
    about 0.3 s."""
    return pq.ParquetFile(path).read(columns=columns)


def publish(root: str, staging: str, bundle_id: str) -> str:
    """Move a finished staging directory to ``bundles/<bundle_id>``: one rename on a
    local root; on an object store, file by file with the manifest last."""
    target = bundle_path(root, bundle_id)
    if storage.is_remote(target):
        try:
            storage.move_tree(staging, target, last=MANIFEST)
        except FileExistsError as exc:
            raise BundleError(f"bundle {bundle_id} already exists at {target}") from exc
        return target
    os.makedirs(bundles_dir(root), exist_ok=True)
    if os.path.exists(target):
        raise BundleError(f"bundle {bundle_id} already exists at {target}")
    os.rename(staging, target)
    table_cache.moved(staging, target)
    fsync_dir(bundles_dir(root))
    return target


def fsync_dir(directory: str) -> None:
    """fsync a directory so a rename inside it is durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def manifest_sha256(path: str) -> str:
    """sha256 of a bundle's ``manifest.json``: the bundle's exact fingerprint."""
    return sha256_file(os.path.join(path, MANIFEST))


def read_manifest(path: str) -> Manifest:
    """Load and validate ``manifest.json`` of the bundle at ``path``.

    Raises:
        BundleError: missing or malformed manifest.
        BundleVersionError: a schema version this code cannot read.
    """
    manifest_file = storage.join(path, MANIFEST)
    try:
        raw = json.loads(storage.read_bytes(manifest_file))
    except FileNotFoundError as exc:
        raise BundleError(f"no manifest at {manifest_file}: not a finished bundle") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"manifest {manifest_file} is not valid JSON: {exc}") from exc
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version not in READABLE_SCHEMA_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
        raise BundleVersionError(
            f"bundle at {path} has schema version {version!r}; this evidex reads {readable}"
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValueError as exc:
        raise BundleError(f"manifest {manifest_file} does not match its schema: {exc}") from exc
    for rel in (*manifest.files, *manifest.indexes):
        if not _inside(rel):
            raise UnsafeArtifactError(
                f"manifest {manifest_file} lists {rel!r}, a path outside the bundle directory; "
                "refusing to read it"
            )
    unlisted = sorted(
        r for r in manifest.files if r.endswith(".usearch") and r not in manifest.indexes
    )
    if unlisted:
        raise BundleIntegrityError(
            f"manifest {manifest_file} has no header facts for {', '.join(unlisted)}"
        )
    return manifest


def _inside(rel: str) -> bool:
    """Whether a manifest path is a plain relative path that stays in the bundle."""
    if not rel or rel.startswith(("/", "\\")) or "\\" in rel or ":" in rel.split("/", 1)[0]:
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def _has_extension_type(data_type: pa.DataType) -> bool:
    if isinstance(data_type, pa.BaseExtensionType):
        return True
    return any(
        _has_extension_type(data_type.field(i).type) or _field_is_extension(data_type.field(i))
        for i in range(data_type.num_fields)
    )


def _field_is_extension(field: pa.Field) -> bool:
    return bool(field.metadata) and _EXTENSION_KEY in field.metadata


def _check_artifact(path: str, rel: str) -> None:
    full = os.path.join(path, rel)
    if os.path.islink(full):
        raise UnsafeArtifactError(f"bundle file {rel} is a symbolic link; refusing to follow it")
    if rel.lower().endswith(PICKLE_SUFFIXES):
        raise UnsafeArtifactError(f"bundle file {rel} is a pickle; evidex never unpickles")
    with open(full, "rb") as handle:
        head = handle.read(2)
    # A USearch file opens with its vector count (uint64), so any first bytes are legitimate
    # there; its header is checked against the manifest instead.
    if not rel.endswith(".usearch") and head[:1] == b"\x80" and head[1:2] in _PICKLE_PROTOCOLS:
        raise UnsafeArtifactError(f"bundle file {rel} starts with a pickle header; refusing it")
    if rel.endswith(".onnx") and head[:1] != ONNX_HEAD:
        raise UnsafeArtifactError(
            f"bundle file {rel} does not start like an ONNX protobuf (ir_version first)"
        )
    if rel.endswith(".json") and not _opens_json_object(full):
        raise UnsafeArtifactError(f"bundle file {rel} is not a JSON object")
    if rel.endswith(".npy") and _npy_dtype(full, rel).hasobject:
        raise UnsafeArtifactError(f"bundle file {rel} holds Python objects (pickled)")
    if rel.endswith((".parquet", ".arrow")):
        kind = "readable Parquet" if rel.endswith(".parquet") else "a readable Arrow IPC file"
        try:
            schema = pq.read_schema(full) if rel.endswith(".parquet") else _ipc_schema(full)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise BundleIntegrityError(f"bundle file {rel} is not {kind}: {exc}") from exc
        for field in schema:
            if _field_is_extension(field) or _has_extension_type(field.type):
                raise UnsafeArtifactError(
                    f"bundle file {rel}: column {field.name!r} has an Arrow extension type; "
                    "bundles hold only the plain types of schemas/"
                )


def _ipc_schema(full: str) -> pa.Schema:
    """The schema of an Arrow IPC file (its footer; no record batch is read)."""
    with pa.memory_map(full, "r") as source:
        return pa.ipc.open_file(source).schema


def _opens_json_object(full: str) -> bool:
    with open(full, "rb") as handle:
        return handle.read(64).lstrip()[:1] == b"{"


def _npy_dtype(full: str, rel: str) -> np.dtype:
    """dtype from a ``.npy`` header, without reading (or unpickling) the array."""
    try:
        return header_dtype(full)
    except (OSError, ValueError) as exc:
        raise BundleIntegrityError(f"bundle file {rel} has no readable .npy header: {exc}") from exc


def verify_artifacts(path: str) -> None:
    """Refuse unsafe files anywhere in the bundle, listed in the manifest or not.

    Reads only file headers and Parquet and Arrow IPC footers (no data is deserialized).

    Raises:
        UnsafeArtifactError: naming the file and why it is refused.
        BundleIntegrityError: a Parquet footer or ``.npy`` header is unreadable.
    """
    if os.path.islink(path):
        raise UnsafeArtifactError(f"bundle directory {path} is a symbolic link")
    for parent, dirs, _files in os.walk(path):
        for name in dirs:
            if os.path.islink(os.path.join(parent, name)):
                rel = os.path.relpath(os.path.join(parent, name), path)
                raise UnsafeArtifactError(f"bundle directory {rel} is a symbolic link")
    for rel in storage.list_files(path):
        _check_artifact(path, rel)


def verify_files(path: str, manifest: Manifest) -> None:
    """Check every file's size and sha256 against the manifest.

    Raises:
        BundleIntegrityError: naming the first file that is missing or differs.
    """
    for rel, entry in sorted(manifest.files.items()):
        full = os.path.join(path, rel)
        if not os.path.isfile(full):
            raise BundleIntegrityError(f"bundle file {rel} is missing from {path}")
        if os.path.getsize(full) != entry.size or sha256_file(full) != entry.sha256:
            raise BundleIntegrityError(f"bundle file {rel} does not match its manifest checksum")


def read_index_header(path: str) -> IndexInfo:
    """Metric, dimension and vector count from a USearch file's header (no mapping).

    Raises:
        BundleIntegrityError: the file is missing or its header is unreadable.
    """
    from usearch.index import Index

    try:
        meta = Index.metadata(path)
    except (OSError, RuntimeError, ValueError) as exc:
        raise BundleIntegrityError(f"cannot read USearch header of {path}: {exc}") from exc
    if not meta:
        raise BundleIntegrityError(f"cannot read USearch header of {path}")
    metric = meta["kind_metric"]
    return IndexInfo(
        metric=getattr(metric, "name", str(metric)).lower(),
        dimension=int(meta["dimensions"]),
        count=int(meta["count_present"]),
    )


def verify_index_headers(path: str, manifest: Manifest) -> None:
    """Check each USearch header against the manifest before anything maps it.

    Raises:
        BundleIntegrityError: naming the file, the field, the expected and actual value.
    """
    for rel, expected in sorted(manifest.indexes.items()):
        actual = read_index_header(os.path.join(path, rel))
        for field in ("metric", "dimension", "count"):
            want, got = getattr(expected, field), getattr(actual, field)
            if want != got:
                raise BundleIntegrityError(
                    f"{rel}: header {field} is {got!r}, manifest says {want!r}"
                )
        if expected.dimension != manifest.model.dimension:
            raise BundleIntegrityError(
                f"{rel}: dimension {expected.dimension} differs from the model's "
                f"{manifest.model.dimension}"
            )


def verify_bundle(path: str) -> Manifest:
    """Manifest schema, every checksum and every index header: all a reader needs to trust.

    Raises:
        BundleError: or a subclass, naming what is wrong.
    """
    manifest = read_manifest(path)
    verify_files(path, manifest)
    verify_artifacts(path)
    verify_index_headers(path, manifest)
    return manifest


def list_bundles(root: str) -> list[str]:
    """Ids of finalized bundles under ``root``, oldest first."""
    directory = bundles_dir(root)
    if storage.is_remote(directory):
        return sorted(
            parts[0]
            for parts in (rel.split("/") for rel in storage.list_files(directory))
            if len(parts) == 2 and parts[1] == MANIFEST
        )
    if not os.path.isdir(directory):
        return []
    return sorted(
        name
        for name in os.listdir(directory)
        if os.path.isfile(os.path.join(directory, name, MANIFEST))
    )
