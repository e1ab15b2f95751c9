"""One refresh of a bundle root from its input: delta build -> validate -> activate, then
compaction when the merge policy calls for it (``pipelines.compact.MergePolicy``): here,
or beside the stream's windows (``pipelines.compactor``), which a refresh then takes in.

Shared by ``evidex stream`` (once per window) and scheduled runs. The input's
current state is what gets built: new and changed documents are processed,
unchanged ones reuse the active bundle's rows and vectors, files that are gone
are gone. A refresh whose build or validation fails leaves ``ACTIVE`` as it was,
and the same documents are tried again next time (nothing is marked done until
a bundle holding them is active).

State: ``<root>/stream_state.json`` keeps the input listing (path, size,
modification time of each file) behind the active bundle and its fingerprint, so an
unchanged input costs one listing, not a build, and a refresh reads only the files
whose size or modification time changed (the documents of the others are kept
unread). It is written atomically after activation.
"""

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from store import storage
from store.bundles import local_bundle, resolve_root, store_validation_report

logger = logging.getLogger(__name__)

STATE_FILE = "stream_state.json"


class RefreshResult(NamedTuple):
    """What one refresh did (``status`` is unchanged, activated, refused or failed)."""

    status: str
    bundle_id: str | None
    seen: int
    new: int
    changed: int
    deleted: int
    chunks_embedded: int
    reason: str
    seconds: float

    def line(self) -> str:
        """The progress line printed per window."""
        return (
            f"{self.status}: {self.seen} seen, {self.new} new, {self.changed} changed, "
            f"{self.deleted} deleted, {self.chunks_embedded} chunks embedded"
            + (f", bundle {self.bundle_id}" if self.bundle_id else "")
            + (f" ({self.reason})" if self.reason else "")
            + f" in {self.seconds:.1f}s"
        )


def listing(pattern: str) -> dict[str, list[float]]:
    """Every file matching ``pattern``: path -> [size, modification time]."""
    from apache_beam.io.filesystems import FileSystems

    from transforms.ingest import pattern_and_root

    glob, _ = pattern_and_root(pattern)
    metadata = FileSystems.match([glob])[0].metadata_list
    return {m.path: [m.size_in_bytes, round(m.last_updated_in_seconds, 3)] for m in metadata}


def fingerprint(files: dict[str, list[float]]) -> str:
    """sha256 over the sorted (path, size, mtime) of a :func:`listing`."""
    rows = sorted((path, *stat) for path, stat in files.items())
    return hashlib.sha256(json.dumps(rows).encode("utf-8")).hexdigest()


def untouched_files(
    state: dict[str, Any], active: str | None, files: dict[str, list[float]]
) -> frozenset[str]:
    """The files listed with the same size and modification time as in the listing
    behind the active generation (none when the state is not that generation's)."""
    if not active or state.get("bundle_id") != active:
        return frozenset()
    before = state.get("files") or {}
    return frozenset(path for path, stat in files.items() if before.get(path) == stat)


def read_state(root: str) -> dict[str, Any]:
    try:
        return dict(json.loads(storage.read_bytes(storage.join(root, STATE_FILE))))
    except FileNotFoundError:
        return {}


def write_state(root: str, state: dict[str, Any]) -> None:
    """Replace the state file atomically (temp file, fsync, rename; one object write)."""
    payload = json.dumps(state, sort_keys=True).encode("utf-8")
    storage.write_bytes(storage.join(root, STATE_FILE), payload)


def refresh(
    input_pattern: str,
    root: str | None,
    build_args: Sequence[str] = (),
    *,
    compactor: Any = None,
) -> RefreshResult:
    """Bring the root's active bundle up to date with ``input_pattern``.

    Args:
        input_pattern: file, directory or glob (any Beam filesystem).
        root: bundle root.
        build_args: extra ``evidex build`` / Beam options.
        compactor: an ``pipelines.compactor.BackgroundCompaction`` (the stream's): the merge
            policy's compaction runs beside the windows, and a finished one is activated,
            or the refresh rebases onto it. Without one, compaction runs here, after the
            activation (:func:`compact_if_due`).
    """
    from pipelines.build_index import BuildFailedError, run
    from store.activation import ActivationError, activate, read_active
    from store.bundles import read_manifest

    started = time.monotonic()
    root = resolve_root(root)
    if not storage.is_remote(root):
        os.makedirs(root, exist_ok=True)
    files = listing(input_pattern)
    digest, seen = fingerprint(files), len(files)
    state, active = read_state(root), read_active(root)
    ready = compactor.finished() if compactor is not None else None
    note = compactor.take_failure() if compactor is not None else ""
    parent_id, reuse = None, frozenset[str]()
    if ready is not None and active == ready.source:
        try:  # nothing was activated since the compaction began: it takes its source's place
            activate(root, ready.bundle_id, expected_previous=ready.source)
            write_state(
                root,
                {
                    "listing": fingerprint(ready.files),
                    "bundle_id": ready.bundle_id,
                    "files": ready.files,
                },
            )
            state, active = read_state(root), ready.bundle_id
            note = f"compacted into {ready.bundle_id}"
        except ActivationError as exc:
            note = f"compacted {ready.bundle_id} not activated: {exc}"
    elif ready is not None and active is not None:
        # Windows were activated meanwhile: this one builds on the compacted generation,
        # re-reading what they added (their vectors reused) and leaving their segments out.
        source = {r.bundle_id for r in read_manifest(local_bundle(root, ready.source)).segments}
        windows = {r.bundle_id for r in read_manifest(local_bundle(root, active)).segments}
        parent_id, reuse = ready.bundle_id, frozenset(windows - source)
        state = {"bundle_id": ready.bundle_id, "files": ready.files}
        note = f"rebased onto compacted {ready.bundle_id}"
    if (
        parent_id is None
        and active
        and state.get("listing") == digest
        and state.get("bundle_id") == active
    ):
        status = "activated" if active == getattr(ready, "bundle_id", None) else "unchanged"
        return RefreshResult(status, active, seen, 0, 0, 0, 0, note, time.monotonic() - started)
    try:
        built = run(
            ["--input", input_pattern, "--root", root, *build_args],
            untouched_files=untouched_files(state, parent_id or active, files),
            parent_id=parent_id,
            reuse_vectors_from=reuse,
        )
    except (BuildFailedError, OSError, RuntimeError, ValueError) as exc:
        return RefreshResult(
            "failed", None, seen, 0, 0, 0, 0, f"build: {exc}", time.monotonic() - started
        )
    delta = built.manifest.delta or {}
    counts = (
        delta.get("new", 0),
        delta.get("changed", 0),
        delta.get("deleted", 0),
        delta.get("texts_embedded", 0),
    )
    refused = validated(root, built.bundle_id)
    if refused:
        return RefreshResult(
            "refused", built.bundle_id, seen, *counts, refused, time.monotonic() - started
        )
    try:
        activate(root, built.bundle_id, **({"expected_previous": active} if parent_id else {}))
    except ActivationError as exc:
        return RefreshResult(
            "refused", built.bundle_id, seen, *counts, str(exc), time.monotonic() - started
        )
    write_state(root, {"listing": digest, "bundle_id": built.bundle_id, "files": files})
    if compactor is not None:
        active_now = built.bundle_id
        started_note = compactor.maybe_start(built.bundle_id, built.manifest, files)
        note = "; ".join(n for n in (note, started_note) if n)
    else:
        active_now, note = compact_if_due(root, built.bundle_id, built.manifest, build_args)
        if active_now != built.bundle_id:
            write_state(root, {"listing": digest, "bundle_id": active_now, "files": files})
    return RefreshResult("activated", active_now, seen, *counts, note, time.monotonic() - started)


def validated(root: str, bundle_id: str) -> str:
    """Validate a built bundle and store its report; "" if it passed, else why not."""
    from store.regression import read_cases
    from validation import validate_bundle

    local = local_bundle(root, bundle_id)  # a cached copy on an object-store root
    report = validate_bundle(
        local, regression=read_cases(root), locate=lambda other: local_bundle(root, other)
    )
    store_validation_report(root, bundle_id, local)
    if report.passed:
        return ""
    return "validation failed: " + ", ".join(c.name for c in report.failed()[:3])


def compact_if_due(
    root: str,
    bundle_id: str,
    manifest: Any,
    build_args: Sequence[str] = (),
    *,
    policy: Any = None,
) -> tuple[str, str]:
    """Compact the just activated generation when the merge policy calls for it, validate
    the result and activate it in its place (compare-and-swap: if anything else was
    activated meanwhile, the compacted generation is left unactivated).

    Returns:
        The generation active afterwards, and a note for the progress line ("" when
        nothing was due). A failed compaction leaves ``bundle_id`` active and says why.
    """
    from pipelines import compact
    from pipelines.build_index import BuildFailedError
    from store.activation import ActivationError, activate

    policy = policy or compact.MergePolicy()
    reason = policy.reason(manifest)
    if reason is None:
        return bundle_id, ""
    logger.info("compacting %s: %s", bundle_id, reason)
    try:
        result = compact.run(
            list(build_args),
            root=root,
            source=bundle_id,
            merge=policy.segments_to_merge(manifest),
        )
    except (BuildFailedError, OSError, RuntimeError, ValueError) as exc:
        logger.warning("compaction of %s failed: %s", bundle_id, exc)
        return bundle_id, f"compaction failed: {exc}"
    refused = validated(root, result.bundle_id)
    if refused:
        return bundle_id, f"compacted {result.bundle_id} refused: {refused}"
    try:
        activate(root, result.bundle_id, expected_previous=bundle_id)
    except ActivationError as exc:
        return bundle_id, f"compacted {result.bundle_id} not activated: {exc}"
    return result.bundle_id, f"compacted ({reason}) into {result.bundle_id}"
