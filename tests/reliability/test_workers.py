"""Issue 30: ``evidex serve --workers 2`` as a real process on loopback.

Sixteen clients across an activation and a rollback see no non-200 answer and no
mixed bundle; every worker picks the activation up within a second; ``/metrics``
adds up the workers' counters; a killed worker is replaced; SIGTERM stops the
supervisor and every worker.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from store.activation import activate, rollback
from tests.conftest import free_port
from tests.reliability.test_load import CLIENTS, QUERIES

LOAD_SECONDS = 20.0


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
        return [int(p) for p in handle.read().split()]


def _fresh_health(base: str) -> str:
    """The bundle id of one request on a new connection (any worker may take it)."""
    return httpx.get(f"{base}/health", timeout=10, headers={"connection": "close"}).json()[
        "bundle_id"
    ]


@pytest.mark.slow
def test_two_workers_share_the_load_and_follow_activations(two_bundle_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(two_bundle_root, root)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "evidex.cli", "serve", "--root", str(root)]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                if _fresh_health(base) == "b1":
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        workers = _children(server.pid)
        assert len(workers) == 2

        statuses: list[int] = []
        seen: set[str] = set()
        lock = threading.Lock()
        stop_at = time.monotonic() + LOAD_SECONDS

        def client(i: int) -> None:
            n = 0
            while time.monotonic() < stop_at:
                try:
                    r = httpx.post(
                        f"{base}/retrieve",
                        json={"query": QUERIES[(i + n) % 4], "k": 3},
                        timeout=60,
                        headers={"connection": "close"},  # spread over both workers
                    )
                except httpx.TransportError:  # a dropped connection fails the test too
                    with lock:
                        statuses.append(-2)
                    n += 1
                    continue
                with lock:
                    statuses.append(r.status_code)
                    if r.status_code == 200:
                        body = r.json()
                        seen.add(body["bundle_id"])
                        if not 0 < len(body["evidence"]) <= 3:
                            statuses.append(-1)
                n += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(LOAD_SECONDS / 3)
        activate(str(root), "b2")
        time.sleep(1.0)
        assert {_fresh_health(base) for _ in range(20)} == {"b2"}  # every worker moved
        time.sleep(LOAD_SECONDS / 3)
        rollback(str(root))
        for t in threads:
            t.join()
        time.sleep(1.0)
        assert {_fresh_health(base) for _ in range(20)} == {"b1"}

        assert statuses and all(s == 200 for s in statuses), sorted(set(statuses))
        assert seen == {"b1", "b2"}
        text = httpx.get(f"{base}/metrics", timeout=10).text
        line = next(
            ln
            for ln in text.splitlines()
            if ln.startswith('evidex_http_requests_total{method="POST",path="/retrieve"')
        )
        assert float(line.rpartition(" ")[2]) == statuses.count(200)  # both workers' counts

        os.kill(workers[0], signal.SIGKILL)  # a worker that dies is replaced
        replaced_by = time.monotonic() + 15
        while time.monotonic() < replaced_by:
            now = _children(server.pid)
            if len(now) == 2 and workers[0] not in now:
                break
            time.sleep(0.1)
        assert len(now) == 2 and workers[0] not in now, now
        assert {_fresh_health(base) for _ in range(10)} == {"b1"}
        workers = now
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        finally:
            server.kill()
    assert server.returncode == 0, server.stdout.read() if server.stdout else ""
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid), f"worker {pid} still runs"


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True
