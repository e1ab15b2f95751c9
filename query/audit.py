"""The audit trail of ``evidex serve --audit-log PATH``: one JSON line per request.

Each line holds the time (UTC), the principal (``null`` when anonymous or refused), how
it authenticated, the client address, the worker's pid, the method, the route (the path
alone: a query string is never written), the status, the bundle that answered, the access
classes the answer was drawn from, and for ``/retrieve`` the ``(doc_id, revision, start,
end)`` of every evidence item returned and the ids of the derived rows (relation
summaries, community reports) shown; the query text only with ``--audit-queries``.

Several worker processes append to the same file: each line is one ``write(2)`` on a
descriptor opened with ``O_APPEND``, which Linux applies whole to a regular file, so lines
never interleave. Rotation is by size: the process whose write takes the file past
``max_bytes`` renames ``PATH`` to ``PATH.1`` (``PATH.1`` to ``PATH.2``, ... up to
``backups``) under a POSIX lock on ``PATH.lock``; every process stats ``PATH`` before it
writes and reopens it when it has been renamed, so no line is lost (a line racing the
rename lands at the end of ``PATH.1``). Lines are not fsynced one by one.

Example:
    >>> log = AuditLog("/var/log/evidex/audit.jsonl", max_bytes=10 * 2**20, backups=5)
    >>> log.write({"route": "/health", "status": 200})
"""

import datetime as dt
import fcntl
import json
import os
import threading
from typing import Any

DEFAULT_MAX_BYTES = 10 * 2**20
DEFAULT_BACKUPS = 5


def now_utc() -> str:
    """The time of an audit line: ISO 8601, UTC, milliseconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AuditLog:
    """An append-only JSON-lines file rotated by size, safe across worker processes.

    Args:
        path: the log file (created with mode 0600 if missing).
        max_bytes: size past which the file is rotated (at least 1 KiB).
        backups: rotated files kept (``PATH.1`` ... ``PATH.<backups>``, at least 1).

    Raises:
        ValueError: limits out of range.
        OSError: the file cannot be opened for appending.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backups: int = DEFAULT_BACKUPS,
    ) -> None:
        if max_bytes < 1024 or backups < 1:
            raise ValueError(
                f"audit log: max_bytes >= 1024 and backups >= 1 ({max_bytes}, {backups})"
            )
        self.path = os.fspath(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._fd = -1
        self._inode = -1
        self._open()

    def _open(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._inode = os.fstat(self._fd).st_ino

    def _current(self) -> None:
        """Reopen when another process rotated (or someone removed) the file."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = -1
        if inode != self._inode:
            self._open()

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one JSON line, rotating the file when it is full."""
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self._current()
            os.write(self._fd, data)
            if os.fstat(self._fd).st_size >= self.max_bytes:
                self._rotate()

    def _rotate(self) -> None:
        with open(self.path + ".lock", "a") as lock:
            fcntl.lockf(lock.fileno(), fcntl.LOCK_EX)  # released when the file closes
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                st = None
            if st is not None and st.st_ino == self._inode and st.st_size >= self.max_bytes:
                for i in range(self.backups - 1, 0, -1):
                    older = f"{self.path}.{i}"
                    if os.path.exists(older):
                        os.replace(older, f"{self.path}.{i + 1}")
                os.replace(self.path, f"{self.path}.1")
            self._open()  # ours was renamed, by us or by another process

    def close(self) -> None:
        """Close the descriptor (a later write reopens it)."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
            self._fd, self._inode = -1, -1
