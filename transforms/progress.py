"""Progress lines for long stages, logged per worker at a fixed interval of items.

Where the stage knows how many items it has in all (a count taken once its input is
complete, passed as a side input), a line says how far it is and how long is left:
``embedded 5376 of 14439 texts (37%, 7.1/s, about 21 min left)``; elsewhere it says
the rate: ``chunked 300 documents (12.0/s)``.
"""

import logging
import time
from collections.abc import Callable
from typing import Any

from apache_beam.transforms.window import GlobalWindows


def is_global(pcoll: Any) -> bool:
    """Whether ``pcoll`` is in the global window, where a count of it is its total."""
    return isinstance(pcoll.windowing.windowfn, GlobalWindows)


def format_duration(seconds: float) -> str:
    """``"45 s"``, ``"3 min 20 s"``, ``"1 h 05 min"`` (rounded to whole seconds)."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """Counts items and logs a progress line every ``every`` items.

    Example:
        >>> progress = Progress(logging.getLogger(__name__), "read", "documents", every=100)
        >>> progress.add(1)  # a rate: "read 100 documents (12.0/s)"
        >>> progress.add(1, total=5000)  # "read 100 of 5000 documents (2%, 12.0/s, ...)"

    Args:
        logger: where lines go (at INFO).
        verb: what is done to an item (``"embedded"``).
        noun: what an item is, in the plural (``"texts"``).
        every: items between two lines.
        clock: seconds from a monotonic clock (injected by tests).
    """

    def __init__(
        self,
        logger: logging.Logger,
        verb: str,
        noun: str,
        *,
        every: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every <= 0:
            raise ValueError(f"every must be positive, got {every}")
        self._logger = logger
        self._verb = verb
        self._noun = noun
        self._every = every
        self._clock = clock
        self._count = 0
        self._started: float | None = None

    def add(self, n: int = 1, *, total: int | None = None) -> None:
        """Count ``n`` more items (of ``total`` in all, where known); log a line when
        the count crosses a multiple of ``every`` or reaches ``total``."""
        if self._started is None:
            self._started = self._clock()
        before, self._count = self._count, self._count + n
        crossed = before // self._every != self._count // self._every
        finished = total is not None and before < total <= self._count
        if crossed or finished:
            self._logger.info("%s", self.line(total))

    def line(self, total: int | None = None) -> str:
        """The progress line for the items counted so far."""
        elapsed = self._clock() - (self._started if self._started is not None else 0.0)
        rate = self._count / max(elapsed, 1e-6)
        if total is None or total <= 0:
            return f"{self._verb} {self._count} {self._noun} ({rate:.1f}/s)"
        share = min(self._count / total, 1.0)
        left = max(total - self._count, 0)
        eta = format_duration(left / rate) if rate > 0 else "unknown"
        return (
            f"{self._verb} {self._count} of {total} {self._noun} "
            f"({share:.0%}, {rate:.1f}/s, about {eta} left)"
        )
