"""How soon a loaded ``evidex serve`` stops answering from the bundle it has left.

Usage:
    python -m benchmarks.activation_follow --root ROOT --bundles OLD NEW
        [--workers 2] [--clients 16] [--swaps 6] [--work /tmp/activation_follow]

``ROOT`` holds two validated bundles; it is copied to ``--work`` so its ``ACTIVE`` and
history stay as they were. ``evidex serve`` starts on the copy with ``OLD`` active while
``--clients`` threads post ``/retrieve`` on new connections (so every worker gets its
share); then the benchmark switches ``ACTIVE`` ``--swaps`` times (activate ``NEW``, roll
back, ...), two seconds apart. After each switch a probe sends ``GET /health`` on new
connections until 20 answers in a row name the switched-to bundle, and the figure is the
time from the switch to the receipt of the last answer that still named the other one
(0 when none did). Every ``/retrieve`` answer must be a 200 from one whole bundle.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import httpx

from benchmarks.query import free_port
from store.activation import activate, read_active, rollback

QUERIES = ["How is green tea made?", "Which river reaches the Black Sea?", "barn owls", "rust"]
IN_A_ROW = 20


def _health(base: str) -> str:
    reply = httpx.get(f"{base}/health", timeout=30, headers={"connection": "close"})
    return reply.json()["bundle_id"]


def _start(root: str, workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "evidex.cli", "serve", "--root", root]
    command += ["--port", str(port), "--workers", str(workers)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    server = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"evidex serve exited with {server.returncode}")
        try:
            _health(base)
            return server, base
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError("evidex serve did not answer within 120 s") from None
            time.sleep(0.1)


def _stale_for(base: str, target: str, switched_at: float) -> float:
    """Seconds from the switch to the last answer that named another bundle."""
    last, in_a_row = 0.0, 0
    while in_a_row < IN_A_ROW:
        if _health(base) == target:
            in_a_row += 1
        else:
            last, in_a_row = time.monotonic() - switched_at, 0
    return last


def follow(root: str, old: str, new: str, workers: int, clients: int, swaps: int) -> dict:
    if read_active(root) != old:
        activate(root, old)
    server, base = _start(root, workers)
    statuses: list[int] = []
    stop = threading.Event()
    lock = threading.Lock()

    def client(i: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                reply = httpx.post(
                    f"{base}/retrieve",
                    json={"query": QUERIES[(i + n) % len(QUERIES)], "k": 3},
                    timeout=60,
                    headers={"connection": "close"},
                )
                status = reply.status_code
            except httpx.TransportError:
                status = -1
            with lock:
                statuses.append(status)
            n += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    stale: list[float] = []
    try:
        for thread in threads:
            thread.start()
        time.sleep(3.0)  # every worker busy before the first switch
        for swap in range(swaps):
            target = new if swap % 2 == 0 else old
            switched_at = time.monotonic()
            if target == new:
                activate(root, new)
            else:
                rollback(root)
            stale.append(round(_stale_for(base, target, switched_at), 2))
            print(f"switch {swap + 1} to {target}: last stale answer at {stale[-1]} s", flush=True)
            time.sleep(2.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        server.terminate()
        server.wait(timeout=30)
    bad = sum(1 for s in statuses if s != 200)
    return {
        "workers": workers,
        "clients": clients,
        "retrieve_requests": len(statuses),
        "non_200": bad,
        "stale_after_switch_s": stale,
        "stale_median_s": round(statistics.median(stale), 2),
        "stale_max_s": max(stale),
    }


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="a root with the two bundles")
    parser.add_argument("--bundles", nargs=2, required=True, metavar=("OLD", "NEW"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--swaps", type=int, default=6)
    parser.add_argument("--work", default="/tmp/activation_follow", help="where the copy goes")
    args = parser.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    shutil.copytree(args.root, args.work)
    old, new = args.bundles
    result = follow(args.work, old, new, args.workers, args.clients, args.swaps)
    print("activation_follow:", result, flush=True)
    return result


if __name__ == "__main__":
    main()
