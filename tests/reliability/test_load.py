"""Load (issue 9, item 8): 16 concurrent HTTP clients against a real
uvicorn server on loopback for LOAD_SECONDS while ``b2`` is activated and then
rolled back to ``b1``; zero 5xx, every answer from one whole bundle, p99 recorded.

The figure for docs/benchmarks.md is printed (``-s``) as ``load: ...``.
"""

import json
import threading
import time

import httpx
import numpy as np
import pytest
import uvicorn

from query.server import create_app
from store.activation import activate, rollback
from tests.conftest import free_port

CLIENTS = 16
LOAD_SECONDS = 60.0
QUERIES = ["How is green tea made?", "Which river reaches the Black Sea?", "barn owls", "rust"]


@pytest.mark.slow
def test_sixteen_clients_see_no_5xx_across_an_activation(two_bundle_root, query_encoder):
    root = str(two_bundle_root)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(root, model=query_encoder),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            workers=1,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    deadline = time.monotonic() + LOAD_SECONDS
    latencies: list[float] = []
    statuses: list[int] = []
    bundles_seen: set[str] = set()
    lock = threading.Lock()

    def client(i: int) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            n = 0
            while time.monotonic() < deadline:
                started = time.perf_counter()
                r = http.post("/retrieve", json={"query": QUERIES[(i + n) % 4], "k": 3})
                took = time.perf_counter() - started
                body = r.json() if r.status_code == 200 else {}
                with lock:
                    latencies.append(took)
                    statuses.append(r.status_code)
                    if body:
                        bundles_seen.add(body["bundle_id"])
                        if not 0 < len(body["evidence"]) <= 3:
                            statuses.append(-1)  # a malformed answer counts as a failure
                n += 1

    workers = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for w in workers:
        w.start()
    time.sleep(LOAD_SECONDS / 3)
    activate(root, "b2")
    time.sleep(LOAD_SECONDS / 3)
    rollback(root)
    for w in workers:
        w.join()
    server.should_exit = True
    thread.join(timeout=10)

    assert statuses and all(s == 200 for s in statuses), sorted(set(statuses))
    assert bundles_seen == {"b1", "b2"}
    ms = np.array(latencies) * 1000
    figures = {
        "clients": CLIENTS,
        "seconds": LOAD_SECONDS,
        "requests": len(ms),
        "rps": round(len(ms) / LOAD_SECONDS, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "max_ms": round(float(ms.max()), 1),
        "non_200": sum(s != 200 for s in statuses),
    }
    print("load:", json.dumps(figures))
