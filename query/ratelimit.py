"""Per-principal request rates: token buckets shared by every worker process.

A principal with ``rate`` r and ``burst`` b holds a bucket of at most b tokens that
refills at r tokens a second; a request takes one, and a request that finds less than one
is refused (429) with the seconds until one is there (``Retry-After``).

The buckets live in shared memory created before ``evidex serve --workers N`` forks
(``multiprocessing.RawArray``), so N workers enforce one rate, not N; a POSIX record lock
(``fcntl.lockf``) guards each update across processes and is released by the kernel if a
worker dies holding it. Principals map to slots by a hash of their id with a short
linear probe; when every probed slot is taken, the one idle longest is reused (its
principal starts again from a full bucket, never from an empty one).

Example:
    >>> buckets = TokenBuckets(clock=lambda: now)
    >>> buckets.take("support-bot", rate=5, burst=10)
    0.0
"""

import contextlib
import fcntl
import hashlib
import math
import multiprocessing
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

SLOTS = 4096
PROBES = 16
_EMPTY = 0


class Bucket(NamedTuple):
    """A bucket's level and when it was last filled up to date (monotonic seconds)."""

    tokens: float
    stamp: float


def take(bucket: Bucket | None, now: float, *, rate: float, burst: float) -> tuple[Bucket, float]:
    """Take one token from ``bucket`` at time ``now``.

    Args:
        bucket: its state, or ``None`` for a principal not seen yet (a full bucket).
        now: monotonic seconds.
        rate: tokens added per second (> 0).
        burst: the bucket's size (>= 1).

    Returns:
        The new state and ``0.0`` when the request may pass, else the seconds until a
        token is there (the state then unchanged but brought up to ``now``).
    """
    if bucket is None:
        level = burst
    else:
        level = min(burst, bucket.tokens + max(0.0, now - bucket.stamp) * rate)
    if level >= 1.0:
        return Bucket(level - 1.0, now), 0.0
    return Bucket(level, now), (1.0 - level) / rate


def retry_after(wait_s: float) -> str:
    """A ``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait_s)))


def _slot_key(name: str) -> int:
    key = int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big")
    return key or 1


class TokenBuckets:
    """Token buckets by principal id, in memory shared across forked processes.

    Args:
        clock: monotonic seconds (``time.monotonic``; a test passes its own).
        slots: how many principals can hold a bucket at once.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, slots: int = SLOTS) -> None:
        self._clock = clock
        self._slots = slots
        self._keys = multiprocessing.RawArray("Q", slots)
        self._levels = multiprocessing.RawArray("d", slots)
        self._stamps = multiprocessing.RawArray("d", slots)
        # its fd is inherited by forked workers; lockf locks are per process
        self._file = tempfile.TemporaryFile()  # noqa: SIM115  # held for the object's life
        self._thread_lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            fcntl.lockf(self._file.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self._file.fileno(), fcntl.LOCK_UN)

    def _slot(self, key: int) -> int:
        start = key % self._slots
        oldest, oldest_stamp = start, math.inf
        for i in range(PROBES):
            slot = (start + i) % self._slots
            held = self._keys[slot]
            if held == key:
                return slot
            stamp = self._stamps[slot] if held != _EMPTY else -math.inf
            if stamp < oldest_stamp:
                oldest, oldest_stamp = slot, stamp
        self._keys[oldest] = key
        self._stamps[oldest] = -math.inf  # a new principal: a full bucket
        return oldest

    def take(self, name: str, *, rate: float, burst: float | None = None) -> float:
        """Take a token from ``name``'s bucket: ``0.0`` if the request may pass, else the
        seconds to wait. ``burst`` defaults to ``max(1, rate)``."""
        size = max(1.0, rate) if burst is None else float(burst)
        key = _slot_key(name)
        now = self._clock()
        with self._locked():
            slot = self._slot(key)
            stamp = self._stamps[slot]
            state = None if stamp == -math.inf else Bucket(self._levels[slot], stamp)
            state, wait = take(state, now, rate=rate, burst=size)
            self._levels[slot], self._stamps[slot] = state.tokens, state.stamp
        return wait
