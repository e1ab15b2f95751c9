"""Tables of bundle files kept in memory by a process that reads them again: a stream's
windows, each of which reads the knowledge tables and segment rows that the window
before it wrote and validated.

Bundle files are immutable once written (a new generation writes new files), so a table
read from one is keyed by the file's identity: path, device, inode, size and modification
time. A rewritten file misses; a hard link of a file read before (a table a generation
keeps unchanged from its parent) is found under its new path. A table this process has
just written is kept as that file's (:func:`written`), and follows its staging folder when
that is published (:func:`moved`), so validating a window's knowledge tables does not
decode them again. The cache is off unless a process turns it on (:func:`enable`;
``evidex stream`` does), so one-off builds, validations and servers read from disk as
before. Object-store paths are never cached. What it holds is bounded by bytes, least
recently used first out.

Example:
    >>> enable(512 << 20)
    >>> table = read(path, None, lambda: pq.read_table(path))   # from disk
    >>> table = read(path, None, lambda: pq.read_table(path))   # from memory
"""

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from store import storage

DEFAULT_MAX_BYTES = 512 << 20
"""Enough for the knowledge tables of two SciFact-size generations (~210 MiB each in
memory): a window's parent, and its own, which the next window reads as its parent."""

_Identity = tuple[str, int, int, int, int]
"""A file's real path, device, inode, size and modification time."""
_Key = tuple[_Identity, Hashable]
"""(file identity; what was read of it)"""
_LOCK = threading.Lock()
_entries: "OrderedDict[_Key, tuple[Any, int]]" = OrderedDict()
_state = {"max_bytes": 0, "bytes": 0, "hits": 0, "misses": 0}
MAX_DIGESTS = 4096
"""Content hashes remembered (64 bytes each; least recently used first out)."""
_digests: "OrderedDict[tuple[int, int, int, int], str]" = OrderedDict()


def enable(max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Keep up to ``max_bytes`` of tables read through :func:`read` and values made by
    :func:`remember` in this process."""
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    with _LOCK:
        _state["max_bytes"] = max_bytes
        _evict()


def disable() -> None:
    """Stop caching, drop everything held and zero the hit and miss counts."""
    with _LOCK:
        _state.update(max_bytes=0, bytes=0, hits=0, misses=0)
        _entries.clear()  # eviction by size would keep empty tables (0 bytes)
        _digests.clear()


def retain(keep: Callable[[str], bool]) -> None:
    """Drop what was read from files whose real path ``keep`` refuses (a stream keeps
    the active generation's tables and its segments' rows, which the next window reads,
    and lets older generations' go)."""
    with _LOCK:
        for key in [k for k in _entries if not keep(k[0][0])]:
            _state["bytes"] -= _entries.pop(key)[1]


def enabled() -> bool:
    """Whether this process keeps what it reads (:func:`enable`)."""
    return bool(_state["max_bytes"])


def stats() -> dict[str, int]:
    """Hits, misses, bytes held and the bound (for progress lines and tests)."""
    with _LOCK:
        return {**_state, "entries": len(_entries)}


def _identity(path: str) -> _Identity | None:
    if storage.is_remote(path):
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    real = os.path.realpath(path)
    return (real, status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def read(path: str, columns: list[str] | None, load: Callable[[], pa.Table]) -> pa.Table:
    """The table ``load`` reads from ``path`` (``columns`` of it, ``None``: all), from
    memory when this file was read before; a cached whole table also serves any subset
    of its columns."""
    identity = _identity(path) if _state["max_bytes"] else None
    if identity is None:
        return load()
    wanted = None if columns is None else tuple(columns)
    found = _lookup((identity, wanted), (identity, None), count=False) or _linked(
        identity, (wanted, None)
    )
    with _LOCK:
        _state["hits" if found is not None else "misses"] += 1
    if found is not None:
        key, table = found
        return table if key[1] == wanted or wanted is None else table.select(wanted)
    table = load()
    _put((identity, wanted), table, table.nbytes)
    return table


def _linked(identity: _Identity, accepted: tuple[Hashable, ...]) -> tuple[_Key, Any] | None:
    """A value kept for another link of the same file (same device, inode, size and
    modification time) under one of ``accepted`` (what was read or made of it), now kept
    under ``identity``'s path too (its bytes counted under each path, until
    :func:`retain` lets the old one go)."""
    with _LOCK:
        found = next(
            (
                (key, entry)
                for key, entry in reversed(_entries.items())
                if key[0][1:] == identity[1:] and key[1] in accepted
            ),
            None,
        )
    if found is None:
        return None
    (_, what), (value, size) = found
    _put((identity, what), value, size)
    return (identity, what), value


def written(path: str, table: pa.Table) -> None:
    """Keep ``table``, just written whole to ``path`` by this process, as what reading
    that file returns: the validation that follows a stream's window, and the window
    after it, then take the knowledge tables from memory instead of decoding them again.
    Nothing is kept if the file's schema is not the table's."""
    identity = _identity(path) if _state["max_bytes"] else None
    if identity is None or not pq.read_schema(path).equals(table.schema):
        return
    _put((identity, None), table, table.nbytes)


def moved(source: str, target: str) -> None:
    """The directory ``source`` was renamed to ``target`` (a staging folder published):
    what was kept for the files under it is kept under their new paths."""
    old = os.path.join(os.path.realpath(source), "")
    new = os.path.join(os.path.realpath(target), "")
    with _LOCK:
        for key in [k for k in _entries if k[0][0].startswith(old)]:
            (path, device, inode, size, mtime), what = key
            renamed = (new + path[len(old) :], device, inode, size, mtime)
            _entries[(renamed, what)] = _entries.pop(key)


def digest(path: str, compute: Callable[[str], str]) -> str:
    """``compute(path)``, a hash of the file's content, remembered by the file's content
    identity (device, inode, size, modification time), so a file this process hashed
    before is not read again, under its own path or another one: a generation's files
    hashed when its manifest was written, then again when it is validated, or a table
    hard-linked unchanged into the next generation. Like the rest of the cache, only
    while it is on; a file rewritten in place gets a new modification time and misses."""
    if not _state["max_bytes"] or storage.is_remote(path):
        return compute(path)
    status = os.stat(path)
    key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    with _LOCK:
        found = _digests.get(key)
        if found is not None:
            _digests.move_to_end(key)
            return found
    value = compute(path)
    with _LOCK:
        _digests[key] = value
        while len(_digests) > MAX_DIGESTS:
            _digests.popitem(last=False)
    return value


def remember(path: str, tag: str, make: Callable[[], Any], size: int) -> Any:
    """``make()``, a value derived from the file at ``path`` alone, kept under ``tag``
    while that file is unchanged (and found under any hard link of it); ``size`` is its
    rough size in bytes."""
    identity = _identity(path) if _state["max_bytes"] else None
    if identity is None:
        return make()
    found = _lookup((identity, tag), count=False) or _linked(identity, (tag,))
    with _LOCK:
        _state["hits" if found is not None else "misses"] += 1
    if found is not None:
        return found[1]
    value = make()
    _put((identity, tag), value, size)
    return value


def _lookup(*keys: _Key, count: bool = True) -> tuple[_Key, Any] | None:
    """The first of ``keys`` held, and its value (counted as a hit), or None (a miss;
    ``count=False``: the caller counts)."""
    with _LOCK:
        for key in keys:
            found = _entries.get(key)
            if found is not None:
                _entries.move_to_end(key)
                _state["hits"] += count
                return key, found[0]
        _state["misses"] += count
        return None


def _put(key: _Key, value: Any, size: int) -> None:
    with _LOCK:
        if not _state["max_bytes"] or size > _state["max_bytes"]:
            return
        previous = _entries.pop(key, None)
        if previous is not None:
            _state["bytes"] -= previous[1]
        _entries[key] = (value, size)
        _state["bytes"] += size
        _evict()


def _evict() -> None:
    while _entries and _state["bytes"] > _state["max_bytes"]:
        _, (_, size) = _entries.popitem(last=False)
        _state["bytes"] -= size
