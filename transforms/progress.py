"""Progress lines for long stages, logged per worker at a fixed interval of items."""

import logging
import time


class Progress:
    """Counts items and logs ``<verb> N <noun> (R/s)`` every ``every`` items.

    Example:
        >>> progress = Progress(logging.getLogger(__name__), "read", "documents", every=100)
        >>> progress.add(1)
    """

    def __init__(self, logger: logging.Logger, verb: str, noun: str, *, every: int) -> None:
        if every <= 0:
            raise ValueError(f"every must be positive, got {every}")
        self._logger = logger
        self._verb = verb
        self._noun = noun
        self._every = every
        self._count = 0
        self._started: float | None = None

    def add(self, n: int = 1) -> None:
        if self._started is None:
            self._started = time.monotonic()
        before, self._count = self._count, self._count + n
        if before // self._every != self._count // self._every:
            rate = self._count / max(time.monotonic() - self._started, 1e-6)
            self._logger.info("%s %d %s (%.1f/s)", self._verb, self._count, self._noun, rate)
