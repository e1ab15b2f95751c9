"""``evidex serve --workers N``: one loaded app, N forked worker processes, one socket.

The parent binds the socket and builds the app once (bundle files memory-mapped, the
ONNX encoder and spaCy loaded), then forks the workers: each serves the shared socket
with its own uvicorn event loop and its own interpreter lock, so N workers use N
cores, start in milliseconds, and share the loaded pages copy-on-write. Each worker
still follows ``ACTIVE`` on its own (see :mod:`query.server`). A worker that dies is
replaced; SIGINT or SIGTERM stops them all.

Forking after loading is safe because nothing loaded starts threads: the encoder runs
ONNX Runtime with ``cores // workers`` intra-op threads, created per call only when
above one (see :func:`encoder_threads`), and prometheus_client reopens its per-process
files in each child.
"""

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

RESTART_PAUSE_S = 1.0
"""Wait before replacing a worker that died, so a crash loop does not spin."""
QUICK_DEATH_S = 10.0
MAX_QUICK_DEATHS = 5
"""Workers that die within ``QUICK_DEATH_S`` of their start this many times in a row
stop the server (exit 1) instead of being replaced forever."""


class Balancer:
    """Spreads keep-alive connections over the workers.

    The workers share one listening socket, so a connection is served by whichever
    worker accepts it, and a keep-alive connection stays there: a few clients that
    connect at once can all land on one worker while another sits idle. Each worker
    counts its requests in flight in a slot of a shared array; a worker that answers
    while it holds more than one request beyond the least busy worker's count adds
    ``Connection: close`` to the response, and the client's next connection goes to
    whichever worker accepts it first, usually an idle one. Balanced workers keep their
    connections open.
    """

    def __init__(self, workers: int) -> None:
        import multiprocessing

        self._counts = multiprocessing.RawArray("i", workers)  # shared across forks
        self.slot = 0

    def __call__(self, app: Any) -> Any:
        """``app`` wrapped (an ASGI app)."""
        counts = self._counts

        async def balanced(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            slot = self.slot
            counts[slot] += 1

            async def send_balanced(message: Any) -> None:
                if message["type"] == "http.response.start" and counts[slot] > min(counts) + 1:
                    headers = [
                        h for h in message.get("headers", []) if h[0].lower() != b"connection"
                    ]
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
                await send(message)

            try:
                await app(scope, receive, send_balanced)
            finally:
                counts[slot] -= 1

        return balanced

    def reset(self, slot: int) -> None:
        """Forget a dead worker's requests in flight (its replacement takes the slot)."""
        self._counts[slot] = 0


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` is an IPv6 address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # connections whose socket says TCP; without it every keep-alive answer waited ~40 ms
    # for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def serve(
    app_factory: Callable[[], Any],
    *,
    host: str,
    port: int,
    workers: int,
    log_level: str = "warning",
    ready: Callable[[socket.socket], None] | None = None,
    after_fork: Callable[[Any], None] | None = None,
) -> int:
    """Serve the app from ``app_factory`` with ``workers`` processes until a signal.

    ``ready`` is called with the bound socket once the app is built and before the
    workers start (the CLI prints the address there); ``after_fork`` is called with the
    app in each worker before it serves.
    """
    import uvicorn

    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers > 1 and not hasattr(os, "fork"):
        logger.warning("this platform cannot fork worker processes: serving with one")
        workers = 1
    sock = bind(host, port)
    app = app_factory()
    config = uvicorn.Config(app, log_level=log_level, lifespan="off")
    if ready is not None:
        ready(sock)
    if workers == 1:
        uvicorn.Server(config).run(sockets=[sock])
        return 0
    balancer = Balancer(workers)
    config = uvicorn.Config(balancer(app), log_level=log_level, lifespan="off")
    return _supervise(config, sock, workers, after_fork, app, balancer)


def _supervise(
    config: Any,
    sock: socket.socket,
    workers: int,
    after_fork: Callable[[Any], None] | None,
    app: Any,
    balancer: Balancer,
) -> int:
    stopping = False
    children: dict[int, float] = {}  # pid -> start time

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            _signal(pid, signal.SIGTERM)

    quick_deaths = 0
    failed = False
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        slots: dict[int, int] = {}  # pid -> its slot in the balancer

        def start(slot: int) -> None:
            balancer.slot = slot
            pid = _fork_worker(config, sock, previous, after_fork, app)
            children[pid], slots[pid] = time.monotonic(), slot

        for slot in range(workers):
            start(slot)
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            born = children.pop(pid, time.monotonic())
            slot = slots.pop(pid, 0)
            _mark_dead(pid)
            if stopping:
                continue
            quick_deaths = quick_deaths + 1 if time.monotonic() - born < QUICK_DEATH_S else 0
            if quick_deaths >= MAX_QUICK_DEATHS:
                logger.error(
                    "workers keep dying at start (%d in a row, the last by %s); stopping",
                    quick_deaths,
                    _describe(status),
                )
                failed = True
                stop(signal.SIGTERM, None)
                continue
            logger.warning("worker %d exited (%s); starting another", pid, _describe(status))
            time.sleep(RESTART_PAUSE_S)
            if not stopping:
                balancer.reset(slot)
                start(slot)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sock.close()
    return 1 if failed else 0


def _fork_worker(
    config: Any,
    sock: socket.socket,
    handlers: dict[Any, Any],
    after_fork: Callable[[Any], None] | None,
    app: Any,
) -> int:
    import uvicorn

    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the worker: it never returns into the supervisor's code
        for s, handler in handlers.items():
            signal.signal(s, handler)
        if after_fork is not None:
            after_fork(app)
        uvicorn.Server(config).run(sockets=[sock])
        code = 0
    except BaseException:
        logger.exception("worker %d failed", os.getpid())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _mark_dead(pid: int) -> None:
    """Let prometheus_client forget a dead worker's live gauges (counters stay summed)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"signal {-code}" if code < 0 else f"exit code {code}"


def encoder_threads(workers: int) -> int:
    """ONNX Runtime intra-op threads per worker: the cores shared out, at least one."""
    return max(1, default_workers() // max(1, workers))
