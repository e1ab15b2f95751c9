"""Query latency, PyTorch parity and HTTP throughput on a built bundle.

Usage:
    python -m benchmarks.query --root ROOT --queries ../shared/data/scifact/queries.jsonl \\
        [--limit 300] [--clients 4,8] [--workers 1,0] [--requests 400] [--auth off,on]

Reports p50/p95/p99 of (a) query embedding alone, by the bundle's own ONNX encoder and,
for the ratio, by PyTorch, (b) spaCy query NER alone (the router's input, when the
bundle has a spaCy pipeline), (c) ``retrieve`` with the vector given (arms + fusion
only) and (d) with embedding included, (e) ``answer`` (route + retrieve + admission)
overall, for queries routed as ``lookup`` and for queries whose route ran the graph arm
(the multi-hop route: comparisons and questions with a multi-hop cue); how many queries
get the same top-k evidence from the bundled encoder as from PyTorch; then requests/s of a real
``evidex serve --workers W`` process under N concurrent closed-loop HTTP clients on
loopback, for each W and N, with authentication off (anonymous callers) and on (a
principals file, every request with a bearer token, an audit line per request), each
setting run ``--repeats`` times, alternating. Single-threaded timings run first.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    values = np.asarray(samples_ms)
    return {f"p{p}": round(float(np.percentile(values, p)), 2) for p in (50, 95, 99)} | {
        "mean": round(float(statistics.fmean(values)), 2),
        "n": len(values),
    }


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _auth_setup(folder: str) -> tuple[list[str], dict[str, str]]:
    """A principals file with one principal that sees every class, and an audit log:
    the server flags and the header every request sends."""
    from query.credentials import hash_token, new_token

    token = new_token("bench")
    path = os.path.join(folder, "principals.toml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            f'[[principals]]\nid = "bench"\nsecret_hash = "{hash_token(token)}"\n'
            'access = ["public", "internal", "confidential", "restricted"]\n'
        )
    flags = ["--principals", path, "--audit-log", os.path.join(folder, "audit.jsonl")]
    return flags, {"authorization": f"Bearer {token}"}


def http_throughput(
    root: str,
    queries: list[str],
    *,
    workers: int,
    clients: int,
    requests: int,
    close: bool,
    auth: bool = False,
) -> dict:
    """Requests/s of ``evidex serve --workers W`` (a real process) under ``clients``
    closed-loop clients, each sending its next request when the last one is answered,
    and the CPU seconds the server's processes used (to show how many cores it kept busy).
    With ``auth`` the server reads a principals file and writes an audit log, and every
    request carries a bearer token."""
    import signal
    import subprocess
    import sys
    import tempfile

    port = free_port()
    command = [sys.executable, "-m", "evidex.cli", "serve", "--root", root]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    folder = tempfile.TemporaryDirectory(prefix="evidex-bench-auth-")
    flags, auth_header = _auth_setup(folder.name) if auth else ([], {})
    server = subprocess.Popen(
        [*command, "--port", str(port), "--workers", str(workers), *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port, server)
        latencies: list[float] = []
        statuses: list[int] = []
        lock = threading.Lock()
        headers = {"content-type": "application/json", **auth_header}
        if close:
            headers["connection"] = "close"

        def client(worker: int) -> None:
            connection = _NoDelay("127.0.0.1", port, timeout=60)
            for i in range(worker, requests, clients):
                body = json.dumps({"query": queries[i % len(queries)], "k": 10})
                start = time.perf_counter()
                connection.request("POST", "/retrieve", body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                took = (time.perf_counter() - start) * 1000
                if close:
                    connection.close()
                with lock:
                    latencies.append(took)
                    statuses.append(response.status)
            connection.close()

        threads = [threading.Thread(target=client, args=(w,)) for w in range(clients)]
        cpu_before = _server_cpu(server.pid)
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        cpu = _server_cpu(server.pid) - cpu_before
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        folder.cleanup()
    return {
        "auth": "on" if auth else "off",
        "workers": workers,
        "clients": clients,
        "requests": requests,
        "non_200": sum(s != 200 for s in statuses),
        "requests_per_s": round(len(statuses) / elapsed, 1),
        "server_cores_busy": round(cpu / elapsed, 2),
        "latency_ms": percentiles(latencies),
    }


def _server_cpu(pid: int) -> float:
    """CPU seconds used so far by the server process and its workers (Linux /proc)."""

    def used(p: int) -> float:
        with open(f"/proc/{p}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
        children = [int(p) for p in handle.read().split()]
    return used(pid) + sum(used(p) for p in children)


class _NoDelay(http.client.HTTPConnection):
    """Nagle's algorithm off, as urllib3 (requests) sets it by default."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _wait_for(port: int, server) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"evidex serve exited with {server.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                connection.close()
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("evidex serve did not answer within 120 s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="bundle root with an active bundle")
    parser.add_argument("--queries", required=True, help="BEIR queries.jsonl")
    parser.add_argument("--limit", type=int, default=300, help="queries to time")
    parser.add_argument(
        "--clients", default="4,8", help="concurrent HTTP clients, comma-separated (4,8)"
    )
    parser.add_argument(
        "--requests", type=int, default=400, help="HTTP requests per client count and worker count"
    )
    parser.add_argument(
        "--workers",
        default="1,0",
        help="evidex serve --workers values to compare, comma-separated (0: one per core)",
    )
    parser.add_argument(
        "--connection-close",
        action="store_true",
        help="clients open a new connection per request (default: keep-alive)",
    )
    parser.add_argument(
        "--auth",
        default="off,on",
        help="authentication settings to compare, comma-separated: off (anonymous) and "
        "on (principals file, bearer token, audit log) (default off,on)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs of each HTTP setting, alternating"
    )
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP part")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)

    from store.models import force_offline

    force_offline()
    from query import answer, load_bundle, retrieve

    with open(args.queries, encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for line in handle if line.strip()][: args.limit]
    bundle = load_bundle(args.root)
    torch_bundle = load_bundle(args.root, encoder="torch")
    for q in queries[:5]:  # warm-up
        answer(bundle, q, k=args.k)
    embed = [_time(lambda q=q: bundle.embed(q)) for q in queries]
    torch_embed = [_time(lambda q=q: torch_bundle.embed(q)) for q in queries]
    same = sum(
        [e.chunk_id for e in answer(bundle, q, k=args.k).evidence]
        == [e.chunk_id for e in answer(torch_bundle, q, k=args.k).evidence]
        for q in queries
    )
    deviation = max(float(np.abs(bundle.embed(q) - torch_bundle.embed(q)).max()) for q in queries)
    recognizer = bundle.recognizer()
    ner = [_time(lambda q=q: recognizer(q)) for q in queries] if recognizer else []
    vectors = {q: bundle.embed(q) for q in queries}
    arms = [_time(lambda q=q: retrieve(bundle, q, k=args.k, vector=vectors[q])) for q in queries]
    fused = [_time(lambda q=q: retrieve(bundle, q, k=args.k)) for q in queries]
    answered, lookup, walked = [], [], []
    for q in queries:
        start = time.perf_counter()
        result = answer(bundle, q, k=args.k)
        ms = (time.perf_counter() - start) * 1000
        answered.append(ms)
        if result.route.operation == "lookup":
            lookup.append(ms)
        if result.walk is not None:
            walked.append(ms)
    report = {
        "load_average": os.getloadavg(),
        "bundle_id": bundle.bundle_id,
        "chunks": len(bundle.chunk_ids),
        "query_encoder": bundle.encoder.backend,
        "same_top_k_as_pytorch": f"{same}/{len(queries)}",
        "largest_vector_difference_from_pytorch": deviation,
        "embed_ms": percentiles(embed),
        "embed_torch_ms": percentiles(torch_embed),
        "ner_ms": percentiles(ner) if ner else None,
        "retrieve_given_vector_ms": percentiles(arms),
        "retrieve_ms": percentiles(fused),
        "answer_ms": percentiles(answered),
        "answer_lookup_ms": percentiles(lookup) if lookup else None,
        "answer_graph_walk_ms": percentiles(walked) if walked else None,
    }
    if not args.no_http:
        from query.workers import default_workers

        report["http"] = [
            http_throughput(
                args.root,
                queries,
                workers=int(w) or default_workers(),
                clients=int(c),
                requests=args.requests,
                close=args.connection_close,
                auth=a == "on",
            )
            for c in args.clients.split(",")
            for w in args.workers.split(",")
            for _ in range(args.repeats)
            for a in args.auth.split(",")
        ]
    report["load_average_end"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
