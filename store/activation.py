"""Activation, rollback, history and garbage collection of bundles.

``ACTIVE`` (see :mod:`store.pointer`) is replaced atomically with a
compare-and-swap on its previous value, so of two concurrent activators exactly
one wins. Only a bundle whose files match their checksums and whose validation
report passed for its exact manifest can be activated.
"""

import datetime as dt
import json
import logging
import os
import shutil
from typing import Any

from store import storage
from store.bundles import (
    VALIDATION_REPORT,
    BundleError,
    bundle_path,
    list_bundles,
    local_bundle,
    manifest_sha256,
    read_manifest,
    verify_bundle,
)
from store.pointer import PointerConflictError, pointer_store

logger = logging.getLogger(__name__)

HISTORY = "history.jsonl"
_UNSET: Any = object()


class ActivationError(RuntimeError):
    """A bundle cannot be activated (not validated, failed validation, damaged, missing)."""


class ActivationConflictError(ActivationError):
    """``ACTIVE`` changed between reading it and replacing it."""


def read_active(root: str) -> str | None:
    """Id of the active bundle, or ``None`` when nothing is active."""
    return pointer_store(root).read()


def read_history(root: str) -> list[dict[str, Any]]:
    """Every recorded activation/rollback, oldest first."""
    try:
        text = storage.read_bytes(storage.join(root, HISTORY)).decode("utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def validation_state(path: str) -> dict[str, Any] | None:
    """The bundle's validation report if it is for its current manifest, else ``None``."""
    report_file = os.path.join(path, VALIDATION_REPORT)
    if not os.path.isfile(report_file):
        return None
    try:
        with open(report_file, encoding="utf-8") as handle:
            report = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # unreadable: treated like a report for another manifest
    if not isinstance(report, dict):
        return None
    return report if report.get("manifest_sha256") == manifest_sha256(path) else None


def check_validated(root: str, bundle_id: str) -> None:
    """Raise unless the bundle is intact and passed validation for its exact manifest.

    Raises:
        ActivationError: naming what is missing, damaged or failed.
    """
    try:
        path = local_bundle(root, bundle_id)
        manifest = verify_bundle(path)
        from store.segments import open_segments

        open_segments(path, manifest, locate=lambda other: local_bundle(root, other))
    except BundleError as exc:
        raise ActivationError(f"cannot activate {bundle_id}: {exc}") from exc
    if not os.path.isfile(os.path.join(path, VALIDATION_REPORT)):
        raise ActivationError(
            f"cannot activate {bundle_id}: it has not been validated (run `evidex validate`)"
        )
    report = validation_state(path)
    if report is None:
        raise ActivationError(
            f"cannot activate {bundle_id}: its validation report is unreadable or for a "
            "different manifest (run `evidex validate` again)"
        )
    if not report.get("passed"):
        failed = [c["name"] for c in report.get("checks", []) if not c.get("success")]
        raise ActivationError(
            f"cannot activate {bundle_id}: validation failed ({', '.join(failed) or 'unknown'})"
        )


def _append_history(root: str, event: dict[str, Any]) -> None:
    line = json.dumps(event, sort_keys=True) + "\n"
    storage.append_bytes(storage.join(root, HISTORY), line.encode("utf-8"))


def activate(
    root: str,
    bundle_id: str,
    *,
    expected_previous: str | None = _UNSET,
    action: str = "activate",
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """Point ``ACTIVE`` at ``bundle_id`` atomically.

    Args:
        root: bundle root.
        bundle_id: a validated bundle under ``root``.
        expected_previous: compare-and-swap guard: the id ``ACTIVE`` must still
            hold (``None`` for none); by default, whatever it holds when the lock is taken.
        action: recorded in the history (``activate`` or ``rollback``).
        now: clock for the history entry.

    Returns:
        The history event that was recorded.

    Raises:
        ActivationError: the bundle is missing, damaged or not validated.
        ActivationConflictError: ``ACTIVE`` no longer holds ``expected_previous``.
    """
    check_validated(root, bundle_id)
    store = pointer_store(root)
    with store.locked():
        previous = store.read()
        expected = previous if expected_previous is _UNSET else expected_previous
        try:
            store.swap_locked(expected, bundle_id)
        except PointerConflictError as exc:
            raise ActivationConflictError(f"{exc}; re-read the status and retry") from exc
        event = {
            "time": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
            "action": action,
            "bundle_id": bundle_id,
            "previous": previous,
        }
        _append_history(root, event)
    return event


def rollback(root: str, *, to: str | None = None) -> dict[str, Any]:
    """Re-activate ``to``, or else the bundle that was active before the current one.

    Raises:
        ActivationError: nothing to roll back to.
    """
    current = read_active(root)
    if to is None:
        earlier = [
            e["previous"]
            for e in reversed(read_history(root))
            if e["bundle_id"] == current and e.get("previous") not in (None, current)
        ]
        if not earlier:
            raise ActivationError("nothing to roll back to: no earlier active bundle in history")
        to = earlier[0]
    if to not in list_bundles(root):
        raise ActivationError(f"cannot roll back to {to}: no such bundle under {root}")
    return activate(root, to, expected_previous=current, action="rollback")


def protected_bundles(root: str) -> set[str]:
    """The active bundle and its parent: never garbage-collected."""
    active = read_active(root)
    if active is None:
        return set()
    keep = {active}
    try:
        parent = read_manifest(bundle_path(root, active)).parent_bundle_id
    except BundleError:
        parent = None
    if parent:
        keep.add(parent)
    return keep


def segment_holders(root: str, generations: set[str]) -> set[str]:
    """The bundles whose segments the ``generations`` read (a retained generation keeps
    the bundles holding its segments, whatever their age)."""
    holders = set()
    for bundle_id in sorted(generations):
        try:
            manifest = read_manifest(bundle_path(root, bundle_id))
        except BundleError:
            continue
        holders |= {ref.bundle_id for ref in manifest.segments}
    return holders


def gc(root: str, *, keep: int, dry_run: bool = False) -> list[str]:
    """Delete all but the newest ``keep`` bundles, never the active one or its parent,
    nor a bundle holding a segment that a kept generation reads.

    Returns:
        Ids of the bundles deleted (or that would be, with ``dry_run``).

    Raises:
        ValueError: ``keep`` is negative.
    """
    if keep < 0:
        raise ValueError(f"keep must be zero or more, got {keep}")
    store = pointer_store(root)
    with store.locked():  # no activation can pick a bundle while we delete
        bundles = list_bundles(root)
        retained = set(bundles[len(bundles) - keep :]) if keep else set()
        retained |= protected_bundles(root)
        retained |= segment_holders(root, retained)
        doomed = [b for b in bundles if b not in retained]
        for bundle_id in doomed if not dry_run else []:
            if storage.is_remote(root):
                storage.delete_tree(bundle_path(root, bundle_id))
            else:
                shutil.rmtree(bundle_path(root, bundle_id))
            logger.info("deleted bundle %s", bundle_id)
    return doomed
