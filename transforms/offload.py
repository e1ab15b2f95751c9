"""Offload: run one batch of CPU-bound work on this process and helper processes at once.

Beam's in-process runner executes a stage on one Python thread, so a CPU-bound
step such as the spaCy parse leaves the machine's other cores idle. A
:class:`SplitRunner` splits each batch into contiguous parts: the first runs
here, the others in spawned helper processes (each initialized once, e.g. with
its own spaCy pipeline), and the results come back in input order.

Helpers start only after ``start_after`` items, so small builds never pay for
spawning them, and get work only once they are ready: until every helper has
run its initializer (importing and loading a model takes seconds), whole
batches keep running here instead of waiting. A helper that dies or fails is
not retried: its part runs here, the helpers are shut down and the rest of the
work stays in this process.
"""

import importlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from typing import Any

logger = logging.getLogger(__name__)


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """``items`` in at most ``parts`` contiguous, near-equal, non-empty pieces."""
    if parts <= 0:
        raise ValueError(f"parts must be positive, got {parts}")
    size, extra = divmod(len(items), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            pieces.append(list(items[start:end]))
        start = end
    return pieces


_IMPORT_NOISE = ("apitools not found",)


class DropImportNoise(logging.Filter):
    """Drop the warning Beam logs at import when optional GCP clients are absent."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_IMPORT_NOISE)


def _initialize_helper(module: str, name: str, args: tuple[Any, ...]) -> None:
    """Set up a spawned helper's logging, then import and run its real initializer.

    A spawned process starts with no logging handlers, so the first module-level
    ``logging.warning`` (Beam's note that optional GCP clients are absent, emitted on
    import) would call ``basicConfig`` and print ``WARNING:root:...`` into the build's
    output. This module imports no Beam, so the handler is in place before the
    initializer's module (which may) is imported.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("evidex: %(message)s"))
    handler.addFilter(DropImportNoise())
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    target(*args)


class SplitRunner:
    """Runs ``local`` here and ``remote`` in helper processes over parts of each batch.

    Example:
        >>> runner = SplitRunner(helpers=1, remote=partial(work, size=32),
        ...                      initializer=load, initargs=("en_core_web_sm",))
        >>> results = runner.run(batch, local=lambda part: work_here(part))
        >>> runner.close()

    Args:
        helpers: helper processes (0: everything runs here).
        remote: picklable function ``list -> list`` run in a helper (one result per item).
        initializer: picklable function run once in each helper before any work.
        initargs: its arguments.
        start_after: items run here alone before the helpers are started.
    """

    def __init__(
        self,
        *,
        helpers: int,
        remote: Callable[[list[Any]], list[Any]],
        initializer: Callable[..., None],
        initargs: tuple[Any, ...] = (),
        start_after: int = 0,
    ) -> None:
        if helpers < 0:
            raise ValueError(f"helpers must be zero or more, got {helpers}")
        self._helpers = helpers
        self._remote = remote
        self._initializer = initializer
        self._initargs = initargs
        self._start_after = start_after
        self._seen = 0
        self._executor: ProcessPoolExecutor | None = None
        self._ready: list[Future[int]] = []
        self._failed = False

    @property
    def active(self) -> bool:
        """Whether helper processes are running."""
        return self._executor is not None

    def run(self, items: Sequence[Any], local: Callable[[list[Any]], list[Any]]) -> list[Any]:
        """Results of ``items`` in order, one per item."""
        self._seen += len(items)
        if (
            self._executor is None
            and self._helpers
            and not self._failed
            and self._seen > self._start_after
        ):
            self._start()
        executor = self._executor
        if executor is None or len(items) < 2 or not self._helpers_ready():
            return local(list(items))
        mine, *theirs = split(items, self._helpers + 1)
        futures: list[Future[list[Any]]] = [executor.submit(self._remote, part) for part in theirs]
        results = local(mine)
        for part, future in zip(theirs, futures, strict=True):
            try:
                done = future.result()
            except Exception as exc:  # a helper died or failed: this process does the rest
                logger.warning(
                    "helper process failed (%s: %s); continuing in-process",
                    type(exc).__name__,
                    exc,
                )
                self._failed = True
                self.close()
                done = local(part)
            if len(done) != len(part):
                raise RuntimeError(f"helper returned {len(done)} results for {len(part)} items")
            results.extend(done)
        return results

    def _start(self) -> None:
        logger.info("starting %d helper process(es)", self._helpers)
        target = (self._initializer.__module__, self._initializer.__qualname__)
        self._executor = ProcessPoolExecutor(
            max_workers=self._helpers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_initialize_helper,
            initargs=(*target, self._initargs),
        )
        # Probes, one per helper: a probe returns only after the helper that took it has
        # run its initializer (with several helpers one may take two; that only delays).
        self._ready = [self._executor.submit(os.getpid) for _ in range(self._helpers)]

    def _helpers_ready(self) -> bool:
        """Whether every helper has started; a helper that failed to start stops them all."""
        if not all(probe.done() for probe in self._ready):
            return False
        for probe in self._ready:
            exc = probe.exception()
            if exc is not None:
                logger.warning(
                    "helper process failed to start (%s: %s); continuing in-process",
                    type(exc).__name__,
                    exc,
                )
                self._failed = True
                self.close()
                return False
        return True

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the helpers have started (or failed to); whether they are ready."""
        if self._executor is None:
            return False
        wait(self._ready, timeout=timeout)
        return self._helpers_ready()

    def close(self) -> None:
        """Stop the helpers (idempotent)."""
        executor, self._executor = self._executor, None
        self._ready = []
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
