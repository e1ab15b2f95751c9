"""A staged bundle's ``manifest.json``: every file's checksum, row and dead-letter counts,
index headers, the input fingerprint, and the segments the generation reads (its own, or
one per part, after those it keeps from its parent).

Written once a staging folder holds every other file (:func:`write_manifest`), and copied
to an object-store staging folder after them (:func:`upload_manifests`).
"""

import datetime as dt
import json
import os
from collections.abc import Iterable
from typing import Any

import pyarrow.parquet as pq

from schemas.manifest import (
    SCHEMA_VERSION,
    FileEntry,
    KnowledgeState,
    Manifest,
    ModelFingerprint,
    QueryEncoderInfo,
    SegmentRef,
)
from store import __version__, knowledge_layers, storage
from store.bundles import (
    DOCUMENTS,
    FAILURES_DIR,
    MANIFEST,
    TABLES,
    VALIDATION_REPORT,
    BundleError,
    fingerprint_pairs,
    read_index_header,
    read_manifest,
    sha256_file,
)
from store.config import BuildConfig
from store.segments import own_parts, own_segment, segment_digest


def _revisions(staging: str) -> list[tuple[str, str]]:
    table = pq.read_table(os.path.join(staging, DOCUMENTS), columns=["doc_id", "revision"])
    return list(zip(table["doc_id"].to_pylist(), table["revision"].to_pylist(), strict=True))


def _inode(path: str) -> tuple[int, int, int, int]:
    status = os.stat(path)
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _linked_entries(parent: str | None) -> dict[tuple[int, int, int, int], FileEntry]:
    """The manifest entries of a local ``parent`` bundle's files by file identity: a
    staged file that is a hard link of one (a knowledge table's base, kept communities)
    takes its parent's checksum instead of being read again."""
    if parent is None or storage.is_remote(parent):
        return {}
    try:
        listed = read_manifest(parent).files
    except (BundleError, OSError):
        return {}
    found = {}
    for rel, entry in listed.items():
        try:
            found[_inode(os.path.join(parent, rel))] = entry
        except OSError:
            continue
    return found


def write_manifest(
    staging: str,
    *,
    bundle_id: str,
    config: BuildConfig,
    model: ModelFingerprint,
    parent_bundle_id: str | None,
    delta: dict[str, Any] | None = None,
    now: dt.datetime | None = None,
    query_encoder: QueryEncoderInfo | None = None,
    segments: list[SegmentRef] | None = None,
    knowledge_state: KnowledgeState | None = None,
    kept_revisions: Iterable[tuple[str, str]] = (),
    linked_from: str | None = None,
) -> Manifest:
    """Checksum every file in ``staging`` and write its ``manifest.json``: a generation
    reading ``segments`` (kept from its parent, with their deletions) and its own.
    ``kept_revisions`` are the ``(doc_id, revision)`` pairs live in the kept segments:
    with the own segment's documents they make the input fingerprint. A file that is a
    hard link of one of the ``linked_from`` bundle's (the parent) keeps its checksum.

    A bundle that wrote several segments (``parts/<k>/``) gets a manifest in each part
    first, checksummed with the rest; the generation lists every part, and its row counts
    and input fingerprint cover them all."""
    folders = own_parts(staging)
    parts = {
        folder: write_manifest(
            os.path.join(staging, folder),
            bundle_id=bundle_id,
            config=config,
            model=model,
            parent_bundle_id=None,
            now=now,
        )
        for folder in folders
        if folder
    }
    linked = _linked_entries(linked_from)
    files = {
        rel: linked.get(_inode(os.path.join(staging, rel)))
        or FileEntry(
            sha256=sha256_file(os.path.join(staging, rel)),
            size=os.path.getsize(os.path.join(staging, rel)),
        )
        for rel in storage.list_files(staging)
        if rel not in (MANIFEST, VALIDATION_REPORT)
    }
    row_counts = {
        name: sum(
            pq.ParquetFile(os.path.join(staging, folder, filename)).metadata.num_rows
            for folder in {"", *folders}
            if os.path.exists(os.path.join(staging, folder, filename))
        )
        for name, filename in TABLES.items()
        if any(os.path.exists(os.path.join(staging, f, filename)) for f in {"", *folders})
    }
    for name, filename in TABLES.items():
        if knowledge_layers.is_layered(staging, filename):
            key = knowledge_layers.ID_COLUMNS[filename]
            row_counts[name] = knowledge_layers.read_table(staging, filename, [key]).num_rows
    dead = {
        rel.split("/", 1)[1].removesuffix(".parquet"): pq.ParquetFile(
            os.path.join(staging, rel)
        ).metadata.num_rows
        for rel in files
        if rel.startswith(FAILURES_DIR + "/")
    }
    indexes = {
        rel: read_index_header(os.path.join(staging, rel))
        for rel in files
        if rel.endswith(".usearch")
    }
    manifest = Manifest(
        schema_version=SCHEMA_VERSION,
        evidex_version=__version__,
        bundle_id=bundle_id,
        parent_bundle_id=parent_bundle_id,
        created_at=(now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        input_fingerprint=fingerprint_pairs(
            [*(r for f in folders for r in _revisions(os.path.join(staging, f))), *kept_revisions]
        ),
        config_hash=config.config_hash(),
        config=config.model_dump(mode="json"),
        model=model,
        row_counts=row_counts,
        dead_letter_counts=dead,
        delta=delta,
        indexes=indexes,
        files=files,
        query_encoder=query_encoder,
        knowledge_state=knowledge_state,
    )
    own = [
        SegmentRef(
            bundle_id=bundle_id,
            part=folder,
            digest=segment_digest(part),
            documents=part.row_counts.get("documents", 0),
            chunks=part.row_counts.get("chunks", 0),
        )
        for folder, part in parts.items()
    ] or [own_segment(manifest)]
    manifest = manifest.model_copy(update={"segments": [*(segments or []), *own]})
    manifest = Manifest.model_validate(manifest.model_dump())
    with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True))
        handle.flush()
        os.fsync(handle.fileno())
    return manifest


def upload_manifests(local: str, staging: str) -> None:
    """Copy the manifests :func:`write_manifest` wrote in ``local`` (the bundle's, and each
    part's) to ``staging`` on an object store, the bundle's last."""
    for rel in [*(f"{f}/{MANIFEST}" for f in own_parts(local) if f), MANIFEST]:
        storage.write_bytes(
            storage.join(staging, rel), storage.read_bytes(os.path.join(local, rel))
        )
