"""The ``ACTIVE`` pointer: atomic activation, rollback and history.

``ACTIVE`` holds one bundle id. It is replaced by writing a temporary file,
fsyncing it, renaming it over ``ACTIVE`` and fsyncing the directory, under an
exclusive lock with a compare-and-swap on the previous value, so of two
concurrent activators exactly one wins. Only a bundle whose validation report
passed for its exact manifest can be activated.
"""

import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evidex.bundles import (
    VALIDATION_REPORT,
    BundleError,
    bundle_path,
    fsync_dir,
    list_bundles,
    manifest_sha256,
    read_manifest,
)

ACTIVE = "ACTIVE"
HISTORY = "history.jsonl"
_LOCK = ".activation.lock"
_UNSET: Any = object()


class ActivationError(RuntimeError):
    """A bundle cannot be activated (not validated, failed validation, missing)."""


class ActivationConflictError(ActivationError):
    """``ACTIVE`` changed between reading it and replacing it."""


def read_active(root: str) -> str | None:
    """Id of the active bundle, or ``None`` when nothing is active."""
    try:
        with open(os.path.join(root, ACTIVE), encoding="utf-8") as handle:
            value = handle.read().strip()
    except FileNotFoundError:
        return None
    return value or None


def read_history(root: str) -> list[dict[str, Any]]:
    """Every recorded activation/rollback, oldest first."""
    try:
        with open(os.path.join(root, HISTORY), encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def check_validated(root: str, bundle_id: str) -> None:
    """Raise unless the bundle has a passing validation report for its exact manifest.

    Raises:
        ActivationError: naming what is missing or what failed.
    """
    path = bundle_path(root, bundle_id)
    try:
        read_manifest(path)
    except BundleError as exc:
        raise ActivationError(f"cannot activate {bundle_id}: {exc}") from exc
    report_file = os.path.join(path, VALIDATION_REPORT)
    if not os.path.isfile(report_file):
        raise ActivationError(
            f"cannot activate {bundle_id}: it has not been validated (run `evidex validate`)"
        )
    with open(report_file, encoding="utf-8") as handle:
        report = json.load(handle)
    if report.get("manifest_sha256") != manifest_sha256(path):
        raise ActivationError(
            f"cannot activate {bundle_id}: its validation report is for a different manifest"
        )
    if not report.get("passed"):
        failed = [c["name"] for c in report.get("checks", []) if not c.get("success")]
        raise ActivationError(
            f"cannot activate {bundle_id}: validation failed ({', '.join(failed) or 'unknown'})"
        )


@contextmanager
def _locked(root: str) -> Iterator[None]:
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, _LOCK), "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _write_pointer(root: str, bundle_id: str) -> None:
    temp = os.path.join(root, f".{ACTIVE}.{os.getpid()}.tmp")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(bundle_id + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, os.path.join(root, ACTIVE))
    fsync_dir(root)


def _append_history(root: str, event: dict[str, Any]) -> None:
    with open(os.path.join(root, HISTORY), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


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
        ActivationError: the bundle is missing or not validated.
        ActivationConflictError: ``ACTIVE`` no longer holds ``expected_previous``.
    """
    check_validated(root, bundle_id)
    with _locked(root):
        previous = read_active(root)
        if expected_previous is not _UNSET and previous != expected_previous:
            raise ActivationConflictError(
                f"ACTIVE changed: expected {expected_previous!r}, found {previous!r}; "
                "re-read the status and retry"
            )
        _write_pointer(root, bundle_id)
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
