"""Where ``ACTIVE`` lives: one small interface, a local and an object-store implementation.

On an object store ``ACTIVE`` is one object replaced by a single write, which
readers see whole. On S3 the write is conditional on the ETag that was read
(``If-Match``; ``If-None-Match: *`` for a first activation), so of two racing
activators exactly one wins. Beam's ``FileSystems`` offers no conditional write
for other stores (e.g. GCS generation match), so there the compare step is a read
just before the write: it catches a stale caller but not two activators racing
within that gap, and a warning says so. Run one activator per such root.
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from store import storage
from store.bundles import fsync_dir

ACTIVE = "ACTIVE"
_LOCK = ".activation.lock"


class PointerConflictError(RuntimeError):
    """The pointer no longer holds the value the caller expected."""


class PointerStore(Protocol):
    """Holds the id of the active bundle."""

    def read(self) -> str | None:
        """The current value, or ``None`` when unset."""
        ...

    def compare_and_swap(self, expected: str | None, new: str) -> None:
        """Set the value to ``new`` only if it is still ``expected``.

        Raises:
            PointerConflictError: it held something else.
        """
        ...


class LocalPointerStore:
    """``<root>/ACTIVE`` replaced by temp file + fsync + rename + directory fsync under flock.

    Example:
        >>> store = LocalPointerStore("/srv/evidex")
        >>> store.compare_and_swap(store.read(), "20261130T031100.000000Z")
    """

    def __init__(self, root: str) -> None:
        self._root = root
        self._path = os.path.join(root, ACTIVE)

    def read(self) -> str | None:
        try:
            with open(self._path, encoding="utf-8") as handle:
                value = handle.read().strip()
        except FileNotFoundError:
            return None
        return value or None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the root's exclusive activation lock (also across processes)."""
        os.makedirs(self._root, exist_ok=True)
        with open(os.path.join(self._root, _LOCK), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def compare_and_swap(self, expected: str | None, new: str) -> None:
        with self.locked():
            self.swap_locked(expected, new)

    def swap_locked(self, expected: str | None, new: str) -> None:
        """``compare_and_swap`` for a caller already holding :meth:`locked`."""
        current = self.read()
        if current != expected:
            raise PointerConflictError(f"ACTIVE is {current!r}, expected {expected!r}")
        temp = f"{self._path}.{os.getpid()}.tmp"
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(new + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self._path)
        fsync_dir(self._root)


class ObjectPointerStore:
    """``<root>/ACTIVE`` as one object on a Beam filesystem (``gs://``, ``s3://``, ...).

    Example:
        >>> store = ObjectPointerStore("gs://bucket/evidex")
        >>> store.compare_and_swap(store.read(), "20261130T031100.000000Z")
    """

    def __init__(self, root: str) -> None:
        self._path = storage.join(root, ACTIVE)

    def read(self) -> str | None:
        try:
            value = storage.read_bytes(self._path).decode("utf-8").strip()
        except FileNotFoundError:
            return None
        return value or None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """No cross-process lock exists on an object store (see the module notes)."""
        yield

    def compare_and_swap(self, expected: str | None, new: str) -> None:
        self.swap_locked(expected, new)

    def swap_locked(self, expected: str | None, new: str) -> None:
        content, version = storage.read_versioned(self._path)
        current = (content or b"").decode("utf-8").strip() or None
        if current != expected:
            raise PointerConflictError(f"ACTIVE is {current!r}, expected {expected!r}")
        try:
            storage.write_if_version(self._path, (new + "\n").encode("utf-8"), version)
        except storage.PreconditionFailedError as exc:
            raise PointerConflictError(
                f"ACTIVE changed while activating {new!r} (it was {current!r})"
            ) from exc


def pointer_store(root: str) -> LocalPointerStore | ObjectPointerStore:
    """The pointer store for ``root``: local file or object-store object."""
    return ObjectPointerStore(root) if storage.is_remote(root) else LocalPointerStore(root)
