"""The stream's committer: one window's processed rows -> a segment and the next
generation, validated, then ``ACTIVE`` compare-and-swapped.

``evidex stream --engine beam`` (:mod:`pipelines.stream_windows`) parses, chunks,
embeds and runs spaCy over each window's arrivals inside the running pipeline; what
reaches the committer is the window's rows. They become one segment written with the
batch build's writers (:func:`pipelines.segment.write_segment_rows`); the active
generation's segments are kept with the window's deletions; the knowledge layer is
updated as a refresh updates it (:func:`transforms.knowledge_update.apply_update`).
One commit at a time per process: each builds on the generation the one before
activated. A commit that fails or is refused leaves ``ACTIVE`` as it was.

Deletions: a document whose file is gone from the input, or a record missing from a
JSONL file the window read again. A changed document replaces its old revision.

What this path does not take, it hands to the batch refresh (:func:`pipelines.refresh.
refresh`), which builds the input's current state: nothing active yet (the first
generation), an active generation this build cannot extend (other settings, no
incremental knowledge layer), explicit deletes in play (tombstones and delete records
hold for files read later too), a metadata sidecar, and a finished background
compaction (taken in, or rebased onto, by the refresh).
"""

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.refresh import (
    RefreshResult,
    compact_if_due,
    fingerprint,
    listing,
    read_state,
    refresh,
    validated,
    write_state,
)
from schemas import DEAD_LETTER_SCHEMA
from schemas.manifest import ModelFingerprint
from store import bundles, storage
from store.activation import ActivationError, activate, read_active
from store.config import BuildConfig
from store.segments import document_state, source_file
from store.staging import discard, heartbeat
from transforms.gather import batched_rows
from transforms.ingest import duplicate_letter
from transforms.write import records_table, write_rows

logger = logging.getLogger(__name__)

FAILURE_STAGES = ("ingest", "chunk", "embed", "extract", "embed_knowledge")
"""The dead-letter tables of a generation, one per stage (as the batch build writes)."""

_ONE_AT_A_TIME = threading.Lock()


@dataclass(frozen=True)
class CommitSettings:
    """What every window's commit needs, resolved once when the committer starts."""

    config: BuildConfig
    model: ModelFingerprint
    model_path: str
    keep_failed: bool
    encoder_artifact: bool
    loaded: Any = None
    """The loaded embedding model: a generation whose parent has no query encoder gets
    one exported from it, as a build's does."""


@dataclass
class WindowRows:
    """One window's processed arrivals, as the stream pipeline gathers them."""

    files: dict[str, list[float]]
    """Each file read in the window -> [size, modification time] as it was read."""
    documents: list[Any]
    """The new and changed documents (those the active generation holds in the same
    state were skipped)."""
    seen: set[str]
    """The id of every document read in the window, skipped ones included."""
    embedded: list[Any]
    extraction: dict[str, list[Any]]
    """``{mentions, statements, acronyms}``: lists of row batches."""
    deletes: int
    """Explicit deletes (tombstones, delete records) read in the window."""
    failures: dict[str, list[Any]]
    """Dead letters by stage."""
    known: set[str]
    """Text keys whose vectors came from the active generation (not embedded)."""
    start: float = 0.0
    """When the window began (seconds since the epoch)."""

    @classmethod
    def of(cls, gathered: dict[str, list[Any]], *, start: float = 0.0) -> "WindowRows":
        return cls(
            files={path: [size, mtime] for path, size, mtime in gathered["files"]},
            documents=list(gathered["documents"]),
            seen=set(gathered["seen"]),
            embedded=list(gathered["embedded"]),
            extraction={
                name: list(gathered.get(name, []))
                for name in ("mentions", "statements", "acronyms")
            },
            deletes=len(gathered["deletes"]),
            failures={stage: list(gathered.get(f"bad_{stage}", [])) for stage in FAILURE_STAGES},
            known=set(gathered.get("known", [])),
            start=start,
        )


def commit_window(
    rows: WindowRows,
    *,
    input_pattern: str,
    root: str,
    build_args: Sequence[str],
    settings: CommitSettings,
    embed: Any,
    compactor: Any = None,
) -> RefreshResult:
    """Publish ``rows`` as the next generation of ``root`` (or hand the window to a
    refresh, see the module's docstring); returns what was done, for the progress line.

    Args:
        embed: ``list[str] -> array`` of unit vectors with the build's model (the
            knowledge layer's new summaries and reports).
        compactor: the stream's ``pipelines.compactor.BackgroundCompaction``.
    """
    with _ONE_AT_A_TIME:
        started = time.monotonic()
        files_now = listing(input_pattern)
        state, active = read_state(root), read_active(root)
        ours = bool(active) and state.get("bundle_id") == active
        earlier = (state.get("files") or {}) if ours else None
        idle = not rows.files and not (compactor is not None and compactor.exited)
        if idle and ours and state.get("listing") == fingerprint(files_now):  # a bare tick
            return RefreshResult(
                "unchanged", active, len(files_now), 0, 0, 0, 0, "", time.monotonic() - started
            )
        handed, parent = _handed_to_refresh(
            rows, root, active, settings, compactor, files_now, earlier
        )
        if handed or parent is None:
            logger.info("window handed to a refresh: %s", handed)
            result = refresh(input_pattern, root, build_args, compactor=compactor)
            reason = "; ".join(r for r in (result.reason, f"refresh: {handed}") if r)
            return result._replace(reason=reason, seconds=time.monotonic() - started)
        return _commit(
            rows, parent, files_now, earlier, started, root, settings, embed, compactor,
            build_args,
        )  # fmt: skip


def _handed_to_refresh(
    rows: WindowRows,
    root: str,
    active: str | None,
    settings: CommitSettings,
    compactor: Any,
    files_now: dict[str, list[float]],
    earlier: dict[str, list[float]] | None,
) -> tuple[str, Any]:
    """Why this window goes to a refresh ("" if it does not), and the parent.
    ``earlier``: the listing behind the active generation (``None`` when unknown)."""
    from pipelines.build_index import delta_parent

    config = settings.config
    if compactor is not None and compactor.exited:
        return "a background compaction finished", None
    if config.ingest.metadata:
        return "a metadata sidecar is in use", None
    if active is None:
        return "first generation", None
    parent = delta_parent(root, active, config, settings.model)
    if parent is None:
        return f"the active generation {active} cannot be extended", None
    if config.knowledge.enabled and parent.knowledge is None:
        return f"the active generation {active} has no incremental knowledge layer", None
    if rows.deletes or parent.deleting_files:
        return "explicit deletes", None
    missed = _missed(rows, earlier, files_now)
    if missed:
        return f"{missed} changed file(s) never arrived (a source that drops events)", None
    return "", parent


def _missed(
    rows: WindowRows, earlier: dict[str, list[float]] | None, files_now: dict[str, list[float]]
) -> int:
    """Files changed since the active generation's listing, before this window began,
    that no window has read: the source lost their arrival (a file changed during the
    window may still arrive in the next one, as the source polls)."""
    if earlier is None:
        return 0
    return sum(
        1
        for path, stat in files_now.items()
        if earlier.get(path) != stat and path not in rows.files and stat[1] < rows.start
    )


def _commit(
    rows: WindowRows,
    parent: Any,
    files_now: dict[str, list[float]],
    earlier: dict[str, list[float]] | None,
    started: float,
    root: str,
    settings: CommitSettings,
    embed: Any,
    compactor: Any,
    build_args: Sequence[str],
) -> RefreshResult:
    from pipelines.build_index import BuildFailedError

    live = parent.live
    earlier = earlier or {}
    # Files this window read older than the active generation's listing has them (windows
    # committed out of order).
    stale = {p for p, stat in rows.files.items() if p in earlier and earlier[p][1] > stat[1]}
    if stale:  # a later window committed a newer version first: keep that one
        logger.info("%d file(s) of this window were committed newer already", len(stale))
        rows.files = {p: stat for p, stat in rows.files.items() if p not in stale}
    documents = [
        d
        for d in rows.documents
        if (d.doc_id not in live or live[d.doc_id].state != document_state(d))
        and source_file(d.source_uri) not in stale
    ]
    # As a refresh does: a read document whose id is live from a file still in the input
    # and not read now is a duplicate (the batch build keeps one of the two, too).
    duplicates = [
        d
        for d in documents
        if d.doc_id in live
        and live[d.doc_id].source != source_file(d.source_uri)
        and live[d.doc_id].source in files_now
        and live[d.doc_id].source not in rows.files
    ]
    for d in duplicates:
        rows.failures["ingest"].append(
            duplicate_letter(d.doc_id, live[d.doc_id].source, d.source_uri)
        )
    duplicate_ids = {d.doc_id for d in duplicates}
    documents = [d for d in documents if d.doc_id not in duplicate_ids]
    written = {d.doc_id for d in documents}
    gone = {
        doc_id
        for doc_id, doc in live.items()
        if doc_id not in written
        and (doc.source not in files_now or (doc.source in rows.files and doc_id not in rows.seen))
    }
    unchanged = set(live) - written - gone
    dropped = {d for d in written if d in live} | gone  # the parent's, rewritten or deleted
    new = len(written - set(live))
    counts = (new, len(written) - new, len(gone))
    state = _state_after(rows, earlier, files_now)
    if not written and not gone:
        write_state(
            root, {"listing": fingerprint(state), "bundle_id": parent.bundle_id, "files": state}
        )
        return RefreshResult(
            "unchanged", parent.bundle_id, len(files_now), 0, 0, 0, 0, "",
            time.monotonic() - started,
        )  # fmt: skip
    bundle_id = bundles.new_bundle_id()
    try:
        manifest, embedded = _stage(
            rows, parent, documents, (unchanged, dropped), root, bundle_id, settings, embed
        )
    except (BuildFailedError, OSError, RuntimeError, ValueError) as exc:
        return RefreshResult(
            "failed", None, len(files_now), *counts, 0, f"commit: {exc}",
            time.monotonic() - started,
        )  # fmt: skip
    refused = validated(root, bundle_id)
    if not refused:
        try:
            activate(root, bundle_id, expected_previous=parent.bundle_id)
        except ActivationError as exc:
            refused = str(exc)
    if refused:
        return RefreshResult(
            "refused", bundle_id, len(files_now), *counts, embedded, refused,
            time.monotonic() - started,
        )  # fmt: skip
    write_state(root, {"listing": fingerprint(state), "bundle_id": bundle_id, "files": state})
    if compactor is not None:
        active_now, note = bundle_id, compactor.maybe_start(bundle_id, manifest, state)
    else:
        active_now, note = compact_if_due(root, bundle_id, manifest, build_args)
        if active_now != bundle_id:
            write_state(
                root, {"listing": fingerprint(state), "bundle_id": active_now, "files": state}
            )
    return RefreshResult(
        "activated", active_now, len(files_now), *counts, embedded, note,
        time.monotonic() - started,
    )  # fmt: skip


def _state_after(
    rows: WindowRows, earlier: dict[str, list[float]], files_now: dict[str, list[float]]
) -> dict[str, list[float]]:
    """The input listing behind the generation this window publishes: each file as the
    window read it, or as the listing behind the active generation had it; files not yet
    read (landed after the window closed) are left out, so a refresh reads them."""
    state = {}
    for path in files_now:
        if path in rows.files:
            state[path] = rows.files[path]
        elif path in earlier:
            state[path] = earlier[path]
    return state


def _stage(
    rows: WindowRows,
    parent: Any,
    documents: list[Any],
    kept: tuple[set[str], set[str]],
    root: str,
    bundle_id: str,
    settings: CommitSettings,
    embed: Any,
) -> tuple[Any, int]:
    """Write the window's segment and the generation into staging, then publish it;
    returns its manifest and the number of chunk texts the window embedded. ``kept``:
    the parent's documents that stay as they are, and those the window rewrites or
    deletes."""
    from pipelines.build_index import local_staging, write_generation
    from pipelines.encoder_artifact import reuse_encoder, write_encoder
    from pipelines.segment import write_segment_rows
    from transforms.embed import text_key
    from transforms.knowledge_update import apply_update
    from transforms.segments import write_extraction

    config, model = settings.config, settings.model
    unchanged, dropped = kept
    ids = {d.doc_id for d in documents}
    embedded = [e for e in rows.embedded if e.chunk.doc_id in ids]
    staging = bundles.staging_path(root, bundle_id)
    with heartbeat(root, bundle_id):
        try:
            if not storage.is_remote(staging):
                os.makedirs(os.path.join(staging, bundles.FAILURES_DIR), exist_ok=True)
            write_segment_rows(staging, documents, embedded, config=config, model=model)
            knowledge_embedded = 0
            if config.knowledge.enabled:
                extraction = {
                    name: [[r for r in batched_rows(batches) if _document_of(r) in ids]]
                    for name, batches in rows.extraction.items()
                }
                _ = list(write_extraction(staging, extraction))
                knowledge_embedded = apply_update(
                    extraction,
                    unchanged,
                    dropped=dropped,
                    parent=parent.path,
                    segments=[s.path for s in parent.segments],
                    staging=staging,
                    model=settings.model_path,
                    config=config.knowledge,
                    changed_since=parent.knowledge.entities_changed,
                    seed=config.seed,
                    dimension=model.dimension,
                    ann=config.ann,
                    embed=embed,
                )
            for stage in FAILURE_STAGES:
                write_rows(
                    storage.join(staging, bundles.FAILURES_DIR, f"{stage}.parquet"),
                    rows.failures[stage],
                    to_table=lambda letters: records_table(letters, DEAD_LETTER_SCHEMA),
                    sort_key=lambda d: (d.record_id, d.error_type, d.message),
                )
            query_encoder = None
            if settings.encoder_artifact:
                query_encoder = reuse_encoder(parent.path, staging, model) or write_encoder(
                    staging, settings.loaded
                )
            texts = {text_key(e.chunk.text) for e in embedded}
            chunks_embedded = len(texts - rows.known)
            with local_staging(staging) as local:
                manifest = write_generation(
                    local,
                    staging,
                    bundle_id=bundle_id,
                    config=config,
                    model=model,
                    parent=parent,
                    parent_id=parent.bundle_id,
                    unchanged=unchanged,
                    embedded=(chunks_embedded, knowledge_embedded),
                    query_encoder=query_encoder,
                    keep_failed=settings.keep_failed,
                )
        except BaseException:
            discard(root, bundle_id, keep_failures=settings.keep_failed)
            raise
        bundles.publish(root, staging, bundle_id)
    return manifest, chunks_embedded


def _document_of(row: Any) -> str:
    """The document an extraction row belongs to: mentions and statements name it;
    acronym rows are ``(doc_id, chunk_id, short, long)``."""
    return str(getattr(row, "doc_id", None) or row[0])


def unit_vectors(model_path: str, loaded: Any, batch_size: int) -> Any:
    """``list[str] -> (n, dimension)`` unit float32 vectors, embedded as the build's
    ``EmbedTexts`` embeds (its RunInference handler, on the already loaded model)."""
    from transforms.embed import SentenceTransformerHandler

    handler = SentenceTransformerHandler(model=model_path, batch_size=batch_size)

    def embed(texts: list[str]) -> np.ndarray:
        results = handler.run_inference([(text, text) for text in texts], loaded)
        return np.stack([np.asarray(r.inference, dtype=np.float32) for r in results])

    return embed
