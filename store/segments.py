"""Generations of segments: which files a segment holds, how a generation names them, and
the checks that let a reader trust a segment it did not write.

A *segment* is the chunk-level part of the bundle directory that wrote it: its documents,
chunks (with vectors), chunk HNSW files, BM25 index and the extraction of its chunks
(mentions, statements and acronym definitions before canonicalization). A *generation* is
a bundle whose manifest lists the segments it reads, by the bundle that holds them and a
digest over their files, each with the documents and chunks deleted since it was written.
A refresh writes one new segment and lists every other one again by reference: nothing is
copied. Bundles before schema version 3 are generations of one segment, their own.

A batch build may write several segments at once (``--segments K``): each is a folder
``parts/<k>/`` of the bundle with the segment's files and a manifest of its own, and holds
the documents whose id hashes to ``k`` (:func:`part_of`). A generation names such a segment
by its bundle and part (:attr:`SegmentRef.key`).
"""

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from schemas.manifest import Manifest, SegmentRef
from store import storage, table_cache
from store.bundles import (
    CHUNK_INDEX,
    CHUNKS,
    DOCUMENTS,
    LEXICAL_DIR,
    BundleError,
    BundleIntegrityError,
    read_columns,
    read_manifest,
    sha256_file,
)

PARTS_DIR = "parts"
EXTRACTION_DIR = "extraction"
EXTRACTED_MENTIONS = f"{EXTRACTION_DIR}/mentions.parquet"
EXTRACTED_STATEMENTS = f"{EXTRACTION_DIR}/statements.parquet"
EXTRACTED_ACRONYMS = f"{EXTRACTION_DIR}/acronyms.parquet"


def is_segment_file(rel: str) -> bool:
    """Whether a bundle file belongs to the bundle's segment (not to its generation)."""
    if rel in (DOCUMENTS, CHUNKS, CHUNK_INDEX):
        return True
    if rel.startswith(("chunks.",)) and rel.endswith(".usearch"):
        return True
    return rel.startswith((LEXICAL_DIR + "/", EXTRACTION_DIR + "/"))


def part_folder(number: int) -> str:
    """The folder of a bundle's ``number``-th segment when it wrote several (``parts/<k>``)."""
    return f"{PARTS_DIR}/{number}"


def part_of(doc_id: str, parts: int) -> int:
    """The segment (``0 .. parts-1``) a build with ``parts`` segments writes ``doc_id`` to:
    a stable hash, so every worker and every run agree.

    Example:
        >>> part_of("doc-1", 1)
        0
    """
    if parts <= 1:
        return 0
    return int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:12], 16) % parts


def own_parts(directory: str) -> list[str]:
    """The segment folders a local bundle (or staging folder) wrote itself: ``parts/<k>``
    in order of ``k`` when it wrote several, else ``""`` (its top-level files)."""
    folder = os.path.join(directory, PARTS_DIR)
    if not os.path.isdir(folder):
        return [""]
    numbers = sorted(int(name) for name in os.listdir(folder) if name.isdigit())
    return [part_folder(n) for n in numbers]


def segment_digest(manifest: Manifest) -> str:
    """sha256 over the ``path ␟ sha256`` lines of the bundle's segment files, sorted."""
    lines = sorted(
        f"{rel}\x1f{e.sha256}" for rel, e in manifest.files.items() if is_segment_file(rel)
    )
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def own_segment(manifest: Manifest) -> SegmentRef:
    """The segment a bundle wrote itself, with nothing deleted."""
    return SegmentRef(
        bundle_id=manifest.bundle_id,
        digest=segment_digest(manifest),
        documents=manifest.row_counts.get("documents", 0),
        chunks=manifest.row_counts.get("chunks", 0),
    )


def segment_refs(manifest: Manifest) -> list[SegmentRef]:
    """The segments a generation reads, oldest first (a bundle before segments: its own)."""
    return list(manifest.segments) or [own_segment(manifest)]


def has_own_segment(manifest: Manifest) -> bool:
    """Whether the bundle wrote a segment that a generation lists (its own or a later one)."""
    return any(is_segment_file(rel) for rel in manifest.files)


@dataclass(frozen=True)
class Segment:
    """One segment opened for reading: where its files are, and what of it is deleted."""

    ref: SegmentRef
    path: str
    """The segment's folder: its bundle's directory, or ``parts/<k>`` in it."""
    manifest: Manifest
    """The manifest of the segment's folder (its files' checksums): the bundle's own, or
    the part's."""
    home: str = ""
    """The directory of the bundle holding the segment (``path`` itself unless a part)."""

    @property
    def deleted_chunks(self) -> frozenset[str]:
        return frozenset(self.ref.deleted_chunks)

    @property
    def deleted_documents(self) -> frozenset[str]:
        return frozenset(self.ref.deleted_documents)


Locate = Callable[[str], str]
"""A segment's bundle id -> the local directory of that bundle."""


def sibling_locator(path: str) -> Locate:
    """Segments of the bundle at ``path`` live in bundles beside it (``bundles/<id>``)."""
    parent = os.path.dirname(os.path.abspath(path))
    return lambda bundle_id: os.path.join(parent, bundle_id)


def open_segments(
    path: str, manifest: Manifest, *, verify: bool = True, locate: Locate | None = None
) -> list[Segment]:
    """The generation's segments, each checked against its reference.

    Checks: the holding bundle exists and its segment files hash to the listed digest;
    with ``verify``, every segment file's size and sha256.

    Raises:
        BundleIntegrityError: a listed segment is missing, differs from its digest, or a
            file of it from its checksum.
    """
    locate = locate or sibling_locator(path)
    opened = []
    for ref in segment_refs(manifest):
        own = ref.bundle_id == manifest.bundle_id
        home = path if own else locate(ref.bundle_id)
        if own and not ref.part:
            where, holder = path, manifest
        else:
            where = storage.join(home, ref.part) if ref.part else home
            try:
                holder = read_manifest(where)
            except BundleError as exc:
                raise BundleIntegrityError(
                    f"generation {manifest.bundle_id} lists segment {ref.key}, which "
                    f"cannot be read: {exc}"
                ) from exc
        if segment_digest(holder) != ref.digest:
            raise BundleIntegrityError(
                f"segment {ref.key} does not match the digest generation "
                f"{manifest.bundle_id} lists for it"
            )
        if verify and not own:
            _verify_once(where, holder, ref.digest)
        elif verify:
            verify_segment_files(where, holder)
        opened.append(Segment(ref, where, holder, home))
    return opened


_VERIFIED: dict[tuple[str, str], tuple[tuple[str, int, int], ...]] = {}
_VERIFIED_LOCK = threading.Lock()


def _verify_once(path: str, manifest: Manifest, digest: str) -> None:
    """:func:`verify_segment_files`, once per process for a segment whose files have not
    been replaced since (same size and modification time): a server that reloads a new
    generation re-hashes only the segments it has not read before."""
    stamp = tuple(
        (rel, *_size_and_mtime(os.path.join(path, rel)))
        for rel in sorted(manifest.files)
        if is_segment_file(rel)
    )
    key = (os.path.abspath(path), digest)
    with _VERIFIED_LOCK:
        if _VERIFIED.get(key) == stamp:
            return
    verify_segment_files(path, manifest)
    with _VERIFIED_LOCK:
        _VERIFIED[key] = stamp


def _size_and_mtime(path: str) -> tuple[int, int]:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return -1, -1
    return status.st_size, status.st_mtime_ns


def verify_segment_files(path: str, manifest: Manifest) -> None:
    """Size and sha256 of each segment file of the bundle at ``path``.

    Raises:
        BundleIntegrityError: naming the first file that is missing or differs.
    """
    for rel, entry in sorted(manifest.files.items()):
        if not is_segment_file(rel):
            continue
        full = os.path.join(path, rel)
        if not os.path.isfile(full):
            raise BundleIntegrityError(f"segment file {rel} is missing from {path}")
        if os.path.getsize(full) != entry.size or sha256_file(full) != entry.sha256:
            raise BundleIntegrityError(
                f"segment file {rel} of {path} does not match its manifest checksum"
            )


def check_deletions(segment: Segment, doc_ids: Sequence[str], chunk_ids: Sequence[str]) -> None:
    """Refuse a deletion set (or a record of moved sources) that names a document or chunk
    the segment does not hold.

    Raises:
        BundleIntegrityError: naming the segment and the first unknown id.
    """
    for kind, deleted, held in (
        ("document", segment.ref.deleted_documents, doc_ids),
        ("chunk", segment.ref.deleted_chunks, chunk_ids),
        ("moved document", list(segment.ref.sources), doc_ids),
    ):
        unknown = sorted(set(deleted) - set(held))
        if unknown:
            raise BundleIntegrityError(
                f"segment {segment.ref.key} deletes or moves {len(unknown)} "
                f"{kind}(s) it does not hold, e.g. {unknown[0]!r}"
            )


_LINE = re.compile(r"#L\d+$")
_ROW_BYTES = 2048
"""A rough size of one document's or chunk's row held in memory (:mod:`store.table_cache`)."""

DOCUMENT_FIELDS = (
    "doc_id",
    "revision",
    "title",
    "source_uri",
    "source_role",
    "access_class",
    "language",
    "metadata_json",
    "valid_from",
    "valid_to",
)
"""Every document column but the text (the revision is the text's hash)."""


def document_state(row: Any) -> str:
    """What decides whether a refresh keeps a document where it is: its revision and
    every other field but the text. A new access class, title or source path (from a
    metadata sidecar, say) makes the document changed, so no row keeps a stale one.

    A JSONL record's line number (``#L<n>`` of its source) is left out: it is where the
    record sits, not what it is, and deleting one record would otherwise make every record
    below it "changed". A kept record's source therefore names the line it had when its
    segment was written.
    """
    get = row.get if isinstance(row, dict) else lambda name: getattr(row, name)
    values = [get(name) for name in DOCUMENT_FIELDS]
    source = DOCUMENT_FIELDS.index("source_uri")
    values[source] = _LINE.sub("", str(values[source]))
    payload = json.dumps(values, ensure_ascii=False)
    return f"{get('revision')}:{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:16]}"


def content_state(row: Any) -> str:
    """What decides whether a document read from another location is the same document,
    *moved*: :func:`document_state` without the source location, but with its file suffix
    (the suffix decides how the text was read and where chunks break, so a document that
    moves from ``.md`` to ``.txt`` is changed, not moved).

    Example:
        >>> a = {name: "" for name in DOCUMENT_FIELDS} | {"revision": "r1"}
        >>> moved = a | {"source_uri": "/exports/dt=2026-12-07/part-0.jsonl#L3"}
        >>> content_state(a | {"source_uri": "/exports/day1.jsonl#L3"}) == content_state(moved)
        True
    """
    get = row.get if isinstance(row, dict) else lambda name: getattr(row, name)
    values = [get(name) for name in DOCUMENT_FIELDS if name != "source_uri"]
    suffix = os.path.splitext(source_file(str(get("source_uri"))))[1].lower()
    payload = json.dumps([*values, suffix], ensure_ascii=False)
    return f"{get('revision')}:{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:16]}"


def moved_source(row: Any, source_uri: str) -> dict[str, Any]:
    """A document row as a generation reads it when the segment's ref records that the
    document now comes from ``source_uri`` (:attr:`SegmentRef.sources`)."""
    values = dict(row) if isinstance(row, dict) else row._asdict()
    values["source_uri"] = source_uri
    return values


def segment_ids(segment: Segment) -> tuple[list[str], list[str], list[str], list[str]]:
    """The segment's document ids, their states (:func:`document_state`), its chunk ids
    and each chunk's document id (all rows, deleted or not), read from its tables."""
    docs, chunk_ids, chunk_docs = _segment_rows(segment)
    moved = segment.ref.sources
    states = [
        document_state(moved_source(d, moved[d["doc_id"]])) if d["doc_id"] in moved else state
        for d, (state, _) in zip(docs, _states(segment, docs), strict=True)
    ]
    return [d["doc_id"] for d in docs], states, chunk_ids, chunk_docs


def _segment_rows(segment: Segment) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The segment's document rows, chunk ids and chunk document ids (kept in a stream,
    whose every window reads the rows of every segment: :mod:`store.table_cache`).
    Callers must not change the lists."""
    documents = storage.join(segment.path, DOCUMENTS)
    docs = table_cache.remember(
        documents,
        "document rows",
        lambda: read_columns(documents, list(DOCUMENT_FIELDS)).to_pylist(),
        size=_ROW_BYTES * segment.ref.documents,
    )
    path = storage.join(segment.path, CHUNKS)
    chunks = table_cache.remember(
        path,
        "chunk and document ids",
        lambda: tuple(c.to_pylist() for c in read_columns(path, ["chunk_id", "doc_id"]).columns),
        size=_ROW_BYTES * segment.ref.chunks,
    )
    return docs, chunks[0], chunks[1]


def _states(segment: Segment, docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """:func:`document_state` and :func:`content_state` of each of the segment's document
    rows, as written (a moved document's state is computed again by the caller)."""
    return list(
        table_cache.remember(
            storage.join(segment.path, DOCUMENTS),
            "document states",
            lambda: [(document_state(d), content_state(d)) for d in docs],
            size=_ROW_BYTES * len(docs),
        )
    )


def source_file(source_uri: str) -> str:
    """The file a document was read from: its source without a JSONL line (``#L<n>``).

    Example:
        >>> source_file("/data/corpus.jsonl#L12")
        '/data/corpus.jsonl'
    """
    return _LINE.sub("", source_uri)


class LiveDocument(NamedTuple):
    """Where a live document of a generation is, and in what state."""

    revision: str
    position: int
    """Index of the segment holding it, in the generation's list."""
    state: str
    """:func:`document_state` of its row (with the source its segment ref records, if it
    moved)."""
    source: str = ""
    """The file it was last read from (:func:`source_file`)."""
    content: str = ""
    """:func:`content_state` of its row as written."""


def live_revisions(segments: Sequence[Segment]) -> dict[str, LiveDocument]:
    """Each live document across ``segments``.

    Raises:
        BundleIntegrityError: a deletion set names an unknown id, or one document is
            live in two segments.
    """
    live: dict[str, LiveDocument] = {}
    for position, segment in enumerate(segments):
        docs, chunk_ids, _ = _segment_rows(segment)
        doc_ids = [d["doc_id"] for d in docs]
        check_deletions(segment, doc_ids, chunk_ids)
        deleted = segment.deleted_documents
        moved = segment.ref.sources
        states = _states(segment, docs)
        for doc_id, row, (state, content) in zip(doc_ids, docs, states, strict=True):
            if doc_id in deleted:
                continue
            if doc_id in live:
                raise BundleIntegrityError(
                    f"document {doc_id!r} is live in two segments "
                    f"({segments[live[doc_id].position].ref.key} and "
                    f"{segment.ref.key})"
                )
            source = row["source_uri"]
            if doc_id in moved:
                source = moved[doc_id]
                state = document_state(moved_source(row, source))
            live[doc_id] = LiveDocument(
                row["revision"], position, state, source_file(source), content
            )
    return live
