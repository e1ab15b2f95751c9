"""Cold start: a one-shot ``evidex query`` and the first answer of ``evidex serve``.

Usage:
    python -m benchmarks.cold_start --root ROOT [--runs 5] [--workers 0]

Each ``evidex query`` is a new process (the bundle's files in the page cache and the
modules' bytecode written by a first run, which is not counted): wall time from start
to exit, p50 and all runs.
Then ``evidex serve`` is started ``--runs`` times and timed from the process start
to the first 200 answer of ``POST /retrieve`` (the client retries every 20 ms until
the port answers). Both print which modules the query process imported, to show
that PyTorch stayed out (and, for a lookup, scipy and bm25s).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from benchmarks.query import free_port

QUERY = "How do I read a gzip-compressed file?"
HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "pandas", "scipy", "bm25s")


def _env(write_bytecode: bool = False) -> dict[str, str]:
    """The runs' environment; ``write_bytecode`` lets the warm-up run cache the modules'
    bytecode even where ``PYTHONDONTWRITEBYTECODE`` is set (as on the CI machines), so the
    timed runs do not compile evidex from source, which no installed evidex does."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if write_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cold_query(root: str, runs: int) -> dict:
    command = [sys.executable, "-m", "evidex.cli", "query", "--root", root, QUERY, "--k", "3"]
    # page cache and bytecode
    subprocess.run(command, env=_env(write_bytecode=True), capture_output=True, check=True)
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=_env(), capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['evidex', 'query', '--root', {root!r}, {QUERY!r}, '--k', '3']\n"
        "from evidex.cli import main\n"
        "main()\n"
        f"print('IMPORTED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, check=True
    )
    imported = out.stdout.rsplit("IMPORTED", 1)[-1].strip()
    return {
        "runs_s": [round(w, 2) for w in walls],
        "p50_s": round(statistics.median(walls), 2),
        "imported_by_the_query_process": imported,
    }


def first_answer(root: str, runs: int, workers: int) -> dict:
    body = json.dumps({"query": QUERY, "k": 3}).encode()
    walls = []
    for _ in range(runs):
        port = free_port()
        command = [sys.executable, "-m", "evidex.cli", "serve", "--root", root]
        command += ["--port", str(port), "--workers", str(workers)]
        started = time.perf_counter()
        server = subprocess.Popen(
            command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"evidex serve exited with {server.returncode}")
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/retrieve",
                    data=body,
                    headers={"content-type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        if response.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.02)
            walls.append(time.perf_counter() - started)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    return {
        "workers": workers or "one per core",
        "runs_s": [round(w, 2) for w in walls],
        "p50_s": round(statistics.median(walls), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="bundle root with an active bundle")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each")
    parser.add_argument(
        "--workers", type=int, default=0, help="evidex serve --workers (0: one per core)"
    )
    args = parser.parse_args(argv)
    report = {
        "load_average": os.getloadavg(),
        "query": cold_query(args.root, args.runs),
        "serve_first_answer": first_answer(args.root, args.runs, args.workers),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
