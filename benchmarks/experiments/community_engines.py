"""Community engines on the same graph: modularity, time and peak memory.

Usage::

    python -m benchmarks.experiments.community_engines RELATIONS.parquet [...] \\
        [--engines python-louvain leiden leiden-2] [--json OUT]

Each ``RELATIONS.parquet`` is a generation's relations table (a built bundle's, or the
``generation/`` of a ``benchmarks.knowledge_scale --work`` run). Its entity graph
(``algorithms.graph.weighted_edges``) is clustered by each engine in its own process:
``python-louvain`` (the reference: networkx + python-louvain), ``leiden`` (leidenalg's
local moving, part by part, one process) and ``leiden-2`` (the same with two worker
processes); and, for comparison only (not an engine of the product: one level, and not
reproducible with more than one thread), ``networkit-plm``, networkit's parallel Louvain
on two threads. Reported per engine: the levels' count, the modularity of the finest and
the last level (weighted, resolution 1, computed by igraph on the whole graph for every
engine alike), the seconds the engine took (the graph built from the edges included)
and the peak RSS of its process (its own high-water mark, or that of a worker it
started if larger).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

ENGINES = ("python-louvain", "leiden", "leiden-2", "networkit-plm")


def load_edges(path: str) -> list[tuple[str, str, float]]:
    """The weighted entity edges of a relations table."""
    import pyarrow.parquet as pq

    from algorithms.graph import weighted_edges
    from schemas import Relation

    columns = ["subject_id", "object_id", "category", "support"]
    table = pq.read_table(path, columns=columns)
    rows = zip(*(table.column(c).to_pylist() for c in columns), strict=True)
    stubs = [
        Relation("", s, "", o, "", category, 0.0, support, [], [], [], [], "")
        for s, o, category, support in rows
    ]
    return weighted_edges(stubs)


def _cluster(path: str, engine: str, seed: int, out: str) -> None:
    """Child process: cluster and save each level's membership in sorted node order."""
    from algorithms.graph import graph_of, louvain_levels
    from algorithms.leiden import leiden_levels
    from benchmarks.knowledge_steps import peak_rss_mb

    edges = load_edges(path)
    started = time.perf_counter()
    if engine == "python-louvain":
        levels = louvain_levels(graph_of(edges), seed=seed)
    elif engine == "networkit-plm":
        levels = [_plm(edges, seed)]
    else:
        levels = leiden_levels(edges, seed=seed, workers=2 if engine == "leiden-2" else 1)
    seconds = time.perf_counter() - started
    nodes = sorted({n for a, b, _ in edges for n in (a, b)})
    matrix = np.asarray([[level[n] for n in nodes] for level in levels], dtype=np.int64)
    np.save(out, matrix)
    with open(out + ".json", "w") as handle:
        json.dump({"seconds": seconds, "peak_rss_mb": peak_rss_mb()}, handle)


def _plm(edges: Sequence[tuple[str, str, float]], seed: int) -> dict[str, int]:
    """networkit's parallel Louvain (two threads): its one partition."""
    import networkit as nk

    nodes = sorted({n for a, b, _ in edges for n in (a, b)})
    number = {n: i for i, n in enumerate(nodes)}
    graph = nk.Graph(len(nodes), weighted=True)
    for a, b, w in edges:
        graph.addEdge(number[a], number[b], w)
    nk.setNumberOfThreads(2)
    nk.setSeed(seed, False)
    plm = nk.community.PLM(graph, refine=False, par="balanced")
    plm.run()
    membership = plm.getPartition().getVector()
    return {n: int(membership[i]) for i, n in enumerate(nodes)}


def modularity(edges: Sequence[tuple[str, str, float]], membership: Sequence[int]) -> float:
    """Weighted modularity (resolution 1) of a membership in sorted node order."""
    import igraph as ig

    nodes = sorted({n for a, b, _ in edges for n in (a, b)})
    number = {n: i for i, n in enumerate(nodes)}
    graph = ig.Graph(n=len(nodes), edges=[(number[a], number[b]) for a, b, _ in edges])
    return float(graph.modularity(list(membership), weights=[w for _, _, w in edges]))


def compare(path: str, engines: Sequence[str], seed: int) -> dict[str, Any]:
    """Every engine on the graph of ``path``: the figures of each."""
    edges = load_edges(path)
    result: dict[str, Any] = {"relations": path, "edges": len(edges), "engines": {}}
    result["nodes"] = len({n for a, b, _ in edges for n in (a, b)})
    with tempfile.TemporaryDirectory() as scratch:
        for engine in engines:
            out = os.path.join(scratch, f"{engine}.npy")
            argv = [sys.executable, "-m", "benchmarks.experiments.community_engines", path]
            argv += ["--child", engine, "--out", out, "--seed", str(seed)]
            process = subprocess.Popen(argv)
            _, status, _ = os.wait4(process.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"{engine} failed on {path}")
            levels = np.load(out)
            with open(out + ".json") as handle:
                measured = json.load(handle)
            result["engines"][engine] = {
                "seconds": round(measured["seconds"], 2),
                "peak_rss_mb": measured["peak_rss_mb"],
                "levels": len(levels),
                "finest_modularity": round(modularity(edges, levels[0]), 4),
                "modularity": round(modularity(edges, levels[-1]), 4),
                "communities": len(set(levels[-1].tolist())),
            }
            print(path, engine, result["engines"][engine], file=sys.stderr, flush=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("relations", nargs="+")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _cluster(args.relations[0], args.child, args.seed, args.out)
        return 0
    results = [compare(path, args.engines, args.seed) for path in args.relations]
    results[0]["load_average"] = list(os.getloadavg())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
