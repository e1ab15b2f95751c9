"""Staging folders of builds in progress: a heartbeat while a build runs, cleanup when it
fails, and the list of stale ones that ``evidex gc`` may delete.

A build stages its files in ``<root>/staging/<bundle_id>/`` and, beside it, keeps
``<root>/staging/<bundle_id>.heartbeat`` fresh (a JSON line with the time, host and
process id, rewritten every few seconds by a daemon thread). The heartbeat is a file,
not a lock, so it works the same on a local root and on an object store: a staging
folder whose heartbeat is older than a threshold (or missing) belongs to no running
build, and ``gc`` deletes it; a live build is never older than one interval.
"""

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from store import storage
from store.bundles import FAILURES_DIR, staging_path

logger = logging.getLogger(__name__)

HEARTBEAT_SUFFIX = ".heartbeat"
HEARTBEAT_INTERVAL_S = 10.0
DEFAULT_STALE_AFTER_S = 15 * 60.0


def staging_dir(root: str) -> str:
    """``<root>/staging``: every build's staging folder lives in it."""
    return storage.join(root, "staging")


def heartbeat_path(root: str, bundle_id: str) -> str:
    return storage.join(staging_dir(root), bundle_id + HEARTBEAT_SUFFIX)


def _beat(path: str, clock: Callable[[], float]) -> None:
    record = {"time": clock(), "host": socket.gethostname(), "pid": os.getpid()}
    if not storage.is_remote(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    storage.write_bytes(path, json.dumps(record).encode("utf-8"))


@contextmanager
def heartbeat(
    root: str,
    bundle_id: str,
    *,
    interval_s: float = HEARTBEAT_INTERVAL_S,
    clock: Callable[[], float] = time.time,
) -> Iterator[str]:
    """Keep ``bundle_id``'s heartbeat fresh while the block runs; remove it afterwards.

    Example:
        >>> with heartbeat(root, bundle_id):  # doctest: +SKIP
        ...     run_the_build()
    """
    path = heartbeat_path(root, bundle_id)
    _beat(path, clock)
    stop = threading.Event()

    def keep_beating() -> None:
        while not stop.wait(interval_s):
            try:
                _beat(path, clock)
            except OSError as exc:  # a full disk must not kill the build from here
                logger.warning("could not refresh the build heartbeat %s: %s", path, exc)

    thread = threading.Thread(target=keep_beating, name=f"heartbeat-{bundle_id}", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()
        storage.delete_file(path)


def discard(root: str, bundle_id: str, *, keep_failures: bool = False) -> None:
    """Delete a failed build's staging folder; with ``keep_failures``, all but ``failures/``."""
    staging = staging_path(root, bundle_id)
    if not keep_failures:
        storage.delete_tree(staging)
        return
    for rel in storage.list_files(staging):
        if rel.split("/")[0] != FAILURES_DIR:
            storage.delete_file(storage.join(staging, rel))
    if not storage.is_remote(staging):
        for parent, dirs, _files in os.walk(staging, topdown=False):
            for name in dirs:
                full = os.path.join(parent, name)
                if not os.listdir(full):
                    os.rmdir(full)


def _last_beat(root: str, bundle_id: str) -> float | None:
    try:
        record = json.loads(storage.read_bytes(heartbeat_path(root, bundle_id)))
        return float(record["time"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def _staged_ids(root: str) -> list[str]:
    directory = staging_dir(root)
    if storage.is_remote(directory):
        names = {rel.split("/")[0] for rel in storage.list_files(directory) if "/" in rel}
    elif os.path.isdir(directory):
        names = {n for n in os.listdir(directory) if os.path.isdir(os.path.join(directory, n))}
    else:
        names = set()
    return sorted(names)


def _newest_change(directory: str) -> float:
    newest = os.path.getmtime(directory)
    for parent, _dirs, files in os.walk(directory):
        for name in files:
            newest = max(newest, os.path.getmtime(os.path.join(parent, name)))
    return newest


def stale(
    root: str, *, older_than_s: float = DEFAULT_STALE_AFTER_S, now: float | None = None
) -> list[str]:
    """Ids of staging folders that no running build holds.

    A folder is stale when its heartbeat is older than ``older_than_s``, or when it has
    none (a build of an older evidex, or one killed between its cleanup steps) and,
    on a local root, nothing in it changed for that long.
    """
    now = time.time() if now is None else now
    found = []
    for bundle_id in _staged_ids(root):
        beat = _last_beat(root, bundle_id)
        if beat is None and not storage.is_remote(root):
            beat = _newest_change(os.path.join(staging_dir(root), bundle_id))
        if beat is None or now - beat > older_than_s:
            found.append(bundle_id)
    return found


def collect(
    root: str,
    *,
    older_than_s: float = DEFAULT_STALE_AFTER_S,
    dry_run: bool = False,
    now: float | None = None,
) -> list[str]:
    """Delete stale staging folders (see :func:`stale`) and their heartbeats.

    Returns:
        Ids of the staging folders deleted (or that would be, with ``dry_run``).
    """
    doomed = stale(root, older_than_s=older_than_s, now=now)
    for bundle_id in doomed if not dry_run else []:
        discard(root, bundle_id)
        storage.delete_file(heartbeat_path(root, bundle_id))
        logger.info("deleted stale staging folder %s", bundle_id)
    return doomed
