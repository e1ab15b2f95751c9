"""Query latency and HTTP throughput on a built bundle.

Usage:
    python -m benchmarks.query --root ROOT --queries ../shared/data/scifact/queries.jsonl \\
        [--limit 300] [--clients 4] [--requests 200]

Reports p50/p95/p99 of (a) query embedding alone, by the bundle's query encoder
(ONNX Runtime unless it is unavailable) and, for the ratio, by PyTorch, (b) spaCy
query NER alone (the router's input, when the bundle has a spaCy pipeline),
(c) ``retrieve`` with the vector given (arms + fusion only) and (d) with embedding
included, (e) ``answer``
(route + retrieve + admission) overall and for queries routed as ``lookup``; then
requests/s with N concurrent HTTP clients against ``evidex serve`` on loopback.
Single-threaded timings run first.
"""

import argparse
import json
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_throughput(root: str, model, queries: list[str], *, clients: int, requests: int) -> dict:
    import httpx
    import uvicorn

    from query.server import create_app

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(root, model=model), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()

    def client(worker: int) -> None:
        nonlocal errors
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            for i in range(worker, requests, clients):
                start = time.perf_counter()
                response = http.post("/retrieve", json={"query": queries[i % len(queries)]})
                with lock:
                    latencies.append((time.perf_counter() - start) * 1000)
                    errors += response.status_code != 200

    started = time.perf_counter()
    workers = [threading.Thread(target=client, args=(w,)) for w in range(clients)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    server.should_exit = True
    thread.join(timeout=10)
    return {
        "clients": clients,
        "requests": requests,
        "errors": errors,
        "requests_per_s": round(requests / elapsed, 1),
        "latency_ms": percentiles(latencies),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="bundle root with an active bundle")
    parser.add_argument("--queries", required=True, help="BEIR queries.jsonl")
    parser.add_argument("--limit", type=int, default=300, help="queries to time")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    parser.add_argument("--requests", type=int, default=200, help="HTTP requests in total")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)

    from store.models import force_offline

    force_offline()
    from query import answer, load_bundle, retrieve

    with open(args.queries, encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for line in handle if line.strip()][: args.limit]
    bundle = load_bundle(args.root)
    for q in queries[:5]:  # warm-up
        answer(bundle, q, k=args.k)
    embed = [_time(lambda q=q: bundle.embed(q)) for q in queries]
    torch_embed = [
        _time(lambda q=q: bundle.model.encode([q], normalize_embeddings=True)) for q in queries
    ]
    recognizer = bundle.recognizer()
    ner = [_time(lambda q=q: recognizer(q)) for q in queries] if recognizer else []
    vectors = {q: bundle.embed(q) for q in queries}
    arms = [_time(lambda q=q: retrieve(bundle, q, k=args.k, vector=vectors[q])) for q in queries]
    fused = [_time(lambda q=q: retrieve(bundle, q, k=args.k)) for q in queries]
    answered, lookup = [], []
    for q in queries:
        start = time.perf_counter()
        result = answer(bundle, q, k=args.k)
        ms = (time.perf_counter() - start) * 1000
        answered.append(ms)
        if result.route.operation == "lookup":
            lookup.append(ms)
    report = {
        "bundle_id": bundle.bundle_id,
        "chunks": len(bundle.chunk_ids),
        "query_encoder": bundle.encoder.backend,
        "embed_ms": percentiles(embed),
        "embed_torch_ms": percentiles(torch_embed),
        "ner_ms": percentiles(ner) if ner else None,
        "retrieve_given_vector_ms": percentiles(arms),
        "retrieve_ms": percentiles(fused),
        "answer_ms": percentiles(answered),
        "answer_lookup_ms": percentiles(lookup) if lookup else None,
        "http": http_throughput(
            args.root, bundle.model, queries, clients=args.clients, requests=args.requests
        ),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
