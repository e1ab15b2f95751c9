"""The knowledge layer at scale: every knowledge step, its tables and its readers over a
synthetic workload fitted to SciFact (``benchmarks.knowledge_workload``), per corpus size.

Usage::

    python -m benchmarks.knowledge_scale --docs 10000 100000 --json OUT [--work DIR]

For each size the steps run one after the other, each in its own process (a worker):
``generate`` (the workload's extraction rows, written as one segment's ``extraction/``
tables), ``canonicalize`` (the keyed steps of ``transforms/canonicalize.py``,
``algorithms.canonical_blocks``, then the mentions and entities tables), ``relations``
(the keyed joins and aggregation of ``transforms/summaries.py``, the relations table and
its HNSW file), ``communities`` (``algorithms.communities.
detect_communities`` with the configured engine, the communities table and its HNSW
file), ``maps`` (``store.knowledge_maps.write_maps``: the map files readers open the
tables from), ``open`` (``query.knowledge.load_knowledge`` on the written generation,
cold; then lookups on it; then the layer built from every row, as without map files) and
``window`` (one new document: the stream committer's in-memory update,
``transforms.knowledge_update.apply_update`` and the window's map files, then the
reader's reopen of the new generation). Each step reports its wall time, the peak RSS
of its process (and of any process it started) and the bytes it wrote. The steps
(``benchmarks.knowledge_steps``) call the same functions the Beam transforms
(``transforms/canonicalize.py``, ``summaries.py``, ``communities.py``) call on their
keys or gathered inputs and the same table writers; the Beam pipeline of
``pipelines/knowledge.py`` itself starts from spaCy over chunk text, which a synthetic
workload does not have. The two keyed steps run as ``--segments K`` worker processes a
stage (``benchmarks.knowledge_shards``: each holds the keys of one shard, and hands the
next stage its keyed output through files, as a runner's shuffle would), so their peak
RSS is what one of ``K`` workers holds; the steps that meet on one worker in the product
(the edges between blocks, the table writers) meet on one process here too.

No embedding model is loaded anywhere. Relation and community vectors are off
(``surface_vectors`` false, the default), and canonicalization's spelling-variant merge,
which compares names with the MiniLM name encoder in the product, gets
:class:`HashNameEncoder` instead: fixed unit vectors from a hash of each name. That
encoder exists only in this benchmark; its vectors almost never reach the merge
threshold, so the variant merge costs what it costs (blocking, comparisons) and merges
what an unrelated pair of names would.

``--json OUT`` writes one JSON object per size (a list), with ``window_update_s``,
``window_bytes_written``, ``reader_reopen_s``, ``reader_open_s`` (cold, from map files),
``reader_open_rows_s`` (from every row), ``first_walk_median_s`` and ``first_walk_max_s``
(the graph arm's first walk on the opened layer, read node by node), ``whole_walk_graph_s``
(the whole walk graph's build, for comparison), ``peak_rss_mb`` (the largest of any step's
process) and ``steps`` (per step: ``wall_s``, ``peak_rss_mb``, ``bytes_written`` and the
step's own figures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.knowledge_shards import SHUFFLE, step_canonicalize, step_relations
from benchmarks.knowledge_steps import (
    DIMENSION,
    GENERATION,
    SEGMENT,
    HashNameEncoder,
    bytes_under,
    peak_rss_mb,
    step_communities,
    step_generate,
)

__all__ = ["HashNameEncoder", "main", "reopen", "run_size", "window_update"]

STEPS = ("generate", "canonicalize", "relations", "communities", "maps", "open", "window")
WINDOW = "window"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository


def knowledge_config(engine: str | None = None) -> Any:
    """The default ``KnowledgeConfig``, with ``engine`` as its community engine if given."""
    from store.config import KnowledgeConfig

    if engine is None:
        return KnowledgeConfig()
    return KnowledgeConfig(community_engine=engine)


def window_update(
    work: str,
    rows: dict[str, list[Any]],
    unchanged: Sequence[str],
    *,
    seed: int,
    config: Any,
    folder: str = WINDOW,
) -> tuple[float, int]:
    """One window's knowledge update, as the stream committer runs it
    (``pipelines.commit``: the window's extraction, then ``apply_update``), into
    ``work/<folder>``; returns ``(seconds, bytes written)`` (a hard link of the parent's
    base writes none)."""
    import transforms.knowledge_update as update
    from algorithms.normalize import normalize_surface
    from store.config import AnnConfig
    from store.knowledge_maps import write_maps
    from transforms.segments import write_extraction

    staging = os.path.join(work, folder)
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    real = update.NameEncoder
    update.NameEncoder = HashNameEncoder  # type: ignore[misc,assignment]  # no model here
    started = time.perf_counter()
    try:
        _ = list(write_extraction(staging, rows))
        parent = os.path.join(work, GENERATION)
        update.apply_update(
            rows,
            unchanged,
            dropped=[],  # the window adds a document
            parent=parent,
            segments=[os.path.join(work, SEGMENT)],
            staging=staging,
            model="benchmark-hash-encoder",
            config=config,
            changed_since=0.0,
            seed=seed,
            dimension=DIMENSION,
            ann=AnnConfig(),
            embed=lambda texts: np.ones((len(texts), DIMENSION), np.float32) / DIMENSION**0.5,
        )
        write_maps(staging, parent, normalize_surface)  # as the committer does
    finally:
        update.NameEncoder = real  # type: ignore[misc]
    return time.perf_counter() - started, bytes_under(staging, own_only=True)


def reopen(path: str) -> tuple[Any, float]:
    """The knowledge layer at ``path`` as a reader opens it, and the seconds it took."""
    from query.knowledge import load_knowledge

    started = time.perf_counter()
    layer = load_knowledge(path)
    return layer, time.perf_counter() - started


def step_maps(work: str) -> dict[str, Any]:
    """The map files readers open the generation's knowledge tables from
    (``store.knowledge_maps.write_maps``, as every generation's writer runs it)."""
    from algorithms.normalize import normalize_surface
    from store.knowledge_maps import write_maps

    started = time.perf_counter()
    built = write_maps(os.path.join(work, GENERATION), normalize=normalize_surface)
    return {"maps_s": round(time.perf_counter() - started, 3), "maps": built}


LOOKUPS = 200
"""Anchors resolved and expanded on the cold layer (``lookups_s``)."""


def _lookups(layer: Any, names: list[str]) -> tuple[float, list[str]]:
    """Seconds to resolve each name and expand it two hops, and the relations reached."""
    started = time.perf_counter()
    reached = []
    for name in names:
        found = layer.resolve(name, lambda chunks: True)
        rows = layer.expand(found, lambda chunks: True, hops=2, fan_out=4, limit=20)
        reached += [layer.relations.ids[r] for r in rows]
    return time.perf_counter() - started, reached


def step_open(work: str) -> dict[str, Any]:
    """A cold reader's open of the generation's knowledge layer from its map files
    (``open_s``), then :data:`LOOKUPS` anchors resolved and expanded two hops on it
    (``lookups_s``: the pages they touch are read then); and the same layer built from
    every row of the tables, as a reader without map files does (``open_rows_s``), with
    the same lookups on it (``lookups_rows_s``; they must reach the same relations).
    ``first_walk_s``: the graph arm's first walk on the opened layer
    (:data:`WALKS` queries, each an entity's name, each on a walk graph read node by node
    made afresh, as the first walking query of a generation makes it past
    ``query.graph.LOCAL_FROM`` nodes: ``query.local_graph.LocalGraph``, then
    ``graph_arm``), the first of them and the median, and the nodes whose edges they
    read, and those counted at build time, not read (``store.walk_counts``);
    ``whole_walk_median_s`` / ``whole_walk_max_s``: the same walks on the whole graph once
    built (the walk's own work); ``walk_graph_s``: the whole graph over every chunk, as
    the first walk built it before it read node by node (``query.graph.build_whole``;
    the walks on it must rank the same chunks)."""
    import pyarrow.parquet as pq

    from query.knowledge import whole_layer
    from query.whole_graph import build_whole

    layer, seconds = reopen(os.path.join(work, GENERATION))
    names = [layer.entity_names[i] for i in range(0, len(layer.entity_ids), 97)][:LOOKUPS]
    lookups, reached = _lookups(layer, names)
    chunk_ids = pq.read_table(os.path.join(work, SEGMENT, "chunks.parquet"))["chunk_id"]
    chunk_ids = chunk_ids.to_pylist()
    walks = _first_walks(layer, chunk_ids, names[1 :: max(1, len(names) // WALKS)][:WALKS])
    started = time.perf_counter()
    graph = build_whole(layer, chunk_ids, {c: i for i, c in enumerate(chunk_ids)}, None)
    walk_s = time.perf_counter() - started
    started = time.perf_counter()
    whole = whole_layer(os.path.join(work, GENERATION))
    rows_s = time.perf_counter() - started
    lookups_rows, reached_rows = _lookups(whole, names)
    if reached_rows != reached:
        raise RuntimeError(
            f"the layers reach different relations: {len(reached)}, {len(reached_rows)}"
        )
    return {
        "open_s": round(seconds, 4),
        "open_rows_s": round(rows_s, 3),
        "lookups_s": round(lookups, 4),
        "lookups_rows_s": round(lookups_rows, 4),
        "lookups": len(names),
        "walk_graph_s": round(walk_s, 3),
        "walk_graph_edges": int(graph.adjacency.nnz),
        **_walk_figures(walks, graph),
        "relations_reached": len(reached),
        "entities": len(layer.entity_ids),
    }


WALKS = 20
"""First walks timed in the open step."""


def _first_walks(layer: Any, chunk_ids: list[str], names: list[str]) -> list[dict[str, Any]]:
    """Each name walked from a walk graph made afresh: seconds, nodes read, chunks ranked."""
    import scipy.sparse  # noqa: F401  (imported by a process's first walk: not the layer's work)

    from query.graph import graph_arm
    from query.local_graph import LocalGraph

    rows = {c: i for i, c in enumerate(chunk_ids)}
    walks = []
    for name in names:
        started = time.perf_counter()
        graph = LocalGraph(layer, chunk_ids, rows, None)  # at any size (see LOCAL_FROM)
        walk = graph_arm(layer, graph, name, [], 10)
        seconds = time.perf_counter() - started
        walks.append(
            {
                "name": name,
                "s": seconds,
                "nodes_read": graph.nodes_read,
                "nodes_counted": graph.nodes_counted,
                "seeds": len(walk.seeds),
                "hits": [chunk_ids[h.row] for h in walk.hits],
            }
        )
    return walks


def _walk_figures(walks: list[dict[str, Any]], whole: Any) -> dict[str, Any]:
    """The first walks' figures, beside the same walks on the whole graph once it is
    built (``whole_walk_*``: what the query itself costs, nothing read); raises when
    the whole graph ranks other chunks."""
    from query.graph import graph_arm

    if walks:
        graph_arm(whole.layer, whole, walks[0]["name"], [], 10)  # its first walk
    on_whole = []
    for walk in walks:
        started = time.perf_counter()
        theirs = graph_arm(whole.layer, whole, walk["name"], [], 10)
        on_whole.append(time.perf_counter() - started)
        if [whole.chunk_ids[h.row] for h in theirs.hits] != walk["hits"]:
            raise RuntimeError(f"the whole graph ranks other chunks for {walk['name']!r}")
    seconds = [w["s"] for w in walks]
    return {
        "first_walk_s": round(seconds[0], 4) if seconds else None,
        "first_walk_median_s": round(float(np.median(seconds)), 4) if seconds else None,
        "first_walk_max_s": round(max(seconds), 4) if seconds else None,
        "first_walk_nodes_read_median": int(np.median([w["nodes_read"] for w in walks])),
        "first_walk_nodes_read_max": max(w["nodes_read"] for w in walks),
        "first_walk_nodes_counted_median": int(np.median([w["nodes_counted"] for w in walks])),
        "whole_walk_median_s": round(float(np.median(on_whole)), 4) if on_whole else None,
        "whole_walk_max_s": round(max(on_whole), 4) if on_whole else None,
        "first_walks": len(walks),
        "first_walks_seeded": sum(1 for w in walks if w["seeds"]),
    }


WARM = "window-warm"
FIRST = "window-first"
WARM_WINDOWS = 5
"""Warm windows timed; ``window_update_s`` is their median."""


def step_window(work: str, config: Any, seed: int) -> dict[str, Any]:
    """One new document's knowledge update and the reopen of its generation, twice:

    - *cold*: nothing in memory (a one-off refresh, a reader that opens it first);
    - *warm*: as a stream runs it: the process holds the parent generation's tables (its
      last window wrote and validated them) and the segment rows every window reads
      (``pipelines.stream_windows.ROWS``; :mod:`store.table_cache`, here bounded only by
      the machine), and the reader holds the parent's layer, so the update and the
      reopen read what changed and find the unchanged base by its hard link. The
      stream's first window over a base builds the base's indexes (timed as
      ``window_update_first_s``); the window is then run :data:`WARM_WINDOWS` times
      more, and ``window_update_s`` is the median of those.

    ``window_update_s``, ``window_bytes_written`` and ``reader_reopen_s`` are the warm
    figures; ``*_cold_s`` the cold ones."""
    from benchmarks.knowledge_steps import read_window
    from store import knowledge_layers, table_cache
    from store.bundles import CHUNKS, KNOWLEDGE_TABLES, TABLES
    from store.segments import EXTRACTED_STATEMENTS

    rows, unchanged = read_window(work)
    parent = os.path.join(work, GENERATION)
    cold_s, _ = window_update(work, rows, unchanged, seed=seed, config=config)
    _, reopen_cold = reopen(os.path.join(work, WINDOW))
    table_cache.enable(1 << 40)
    for table in KNOWLEDGE_TABLES:  # what the stream's last window wrote and validated
        knowledge_layers.read_table(parent, TABLES[table])
    for rel in (EXTRACTED_STATEMENTS, CHUNKS):  # the segment rows a stream keeps (ROWS)
        knowledge_layers.read_file(os.path.join(work, SEGMENT, rel))
    _, parent_open = reopen(parent)
    # The stream's first window over this base builds the base's indexes
    # (store.row_index); every later one looks its rows up in them.
    first_s, _ = window_update(work, rows, unchanged, seed=seed, config=config, folder=FIRST)
    runs = [
        window_update(work, rows, unchanged, seed=seed, config=config, folder=WARM)
        for _ in range(WARM_WINDOWS)
    ]  # the same window again each time (its folder rewritten): a stream's steady state
    seconds, written = float(np.median([s for s, _ in runs])), runs[-1][1]
    _, reopen_s = reopen(os.path.join(work, WARM))
    table_cache.disable()
    warm = os.path.join(work, WARM)
    layered = [t for t in KNOWLEDGE_TABLES if knowledge_layers.is_layered(warm, TABLES[t])]
    linked = [  # unchanged by the window: its parent's file, hard-linked
        t
        for t in KNOWLEDGE_TABLES
        if t not in layered
        and os.path.samefile(os.path.join(warm, TABLES[t]), os.path.join(parent, TABLES[t]))
    ]
    return {
        "parent_open_s": round(parent_open, 3),
        "window_update_s": round(seconds, 4),
        "window_update_warm_runs_s": [round(s, 4) for s, _ in runs],
        "window_update_cold_s": round(cold_s, 3),
        "window_update_first_s": round(first_s, 3),
        "window_bytes_written": written,
        "reader_reopen_s": round(reopen_s, 4),
        "reader_reopen_cold_s": round(reopen_cold, 4),
        "window_mentions": sum(len(b) for b in rows["mentions"]),
        "window_statements": sum(len(b) for b in rows["statements"]),
        "layered_tables": layered,
        "linked_tables": linked,
    }


def _output_bytes(work: str) -> int:
    """Bytes of the files under ``work`` but those of the keyed steps' exchanges (the
    runner's shuffle, not the step's output)."""
    return bytes_under(work) - bytes_under(os.path.join(work, SHUFFLE))


def _run_step(
    step: str, work: str, docs: int, seed: int, engine: str | None, segments: int = 1
) -> dict[str, Any]:
    """Run ``step`` in its own process; its figures plus wall time, peak RSS, bytes."""
    out = os.path.join(work, "steps", f"{step}.json")
    argv = [sys.executable, "-m", "benchmarks.knowledge_scale", "--step", step, "--work", work]
    argv += ["--docs", str(docs), "--seed", str(seed), "--segments", str(segments)]
    argv += ["--engine", engine] if engine else []
    before = _output_bytes(work)
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=ROOT)
    _, status, _ = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"step {step} at {docs} documents failed ({status})")
    with open(out) as handle:
        figures = json.load(handle)
    figures.update(
        wall_s=round(wall, 2),
        bytes_written=max(0, _output_bytes(work) - before - os.path.getsize(out)),
    )
    return figures


def run_size(
    docs: int, work: str, *, seed: int, engine: str | None, segments: int = 1
) -> dict[str, Any]:
    """Every step at ``docs`` documents; the size's JSON object."""
    os.makedirs(os.path.join(work, "steps"), exist_ok=True)
    steps: dict[str, Any] = {}
    for number, step in enumerate(STEPS, 1):
        print(
            f"[{docs:,} docs] step {number}/{len(STEPS)}: {step} ...", file=sys.stderr, flush=True
        )
        steps[step] = _run_step(step, work, docs, seed, engine, segments)
        print(
            f"[{docs:,} docs] {step}: {steps[step]['wall_s']} s, "
            f"{steps[step]['peak_rss_mb']} MB peak RSS",
            file=sys.stderr,
            flush=True,
        )
    window = steps["window"]
    return {
        "docs": docs,
        "seed": seed,
        "load_average": list(os.getloadavg()),
        "window_update_s": window["window_update_s"],
        "window_update_cold_s": window["window_update_cold_s"],
        "window_update_first_s": window["window_update_first_s"],
        "window_bytes_written": window["window_bytes_written"],
        "reader_reopen_s": window["reader_reopen_s"],
        "reader_reopen_cold_s": window["reader_reopen_cold_s"],
        "reader_open_s": steps["open"]["open_s"],
        "reader_open_rows_s": steps["open"]["open_rows_s"],
        "reader_lookups_s": steps["open"]["lookups_s"],
        "first_walk_median_s": steps["open"]["first_walk_median_s"],
        "first_walk_max_s": steps["open"]["first_walk_max_s"],
        "whole_walk_graph_s": steps["open"]["walk_graph_s"],
        "whole_walk_median_s": steps["open"]["whole_walk_median_s"],
        "whole_walk_max_s": steps["open"]["whole_walk_max_s"],
        "peak_rss_mb": max(s["peak_rss_mb"] for s in steps.values()),
        "workload": steps["generate"].get("workload", {}),
        "steps": steps,
    }


def _table(results: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'docs':>9} {'step':<13} {'wall s':>8} {'peak MB':>8} {'written MB':>10}"]
    for result in results:
        for step, s in result["steps"].items():
            mb, rss = s["bytes_written"] / 1e6, s["peak_rss_mb"]
            lines.append(f"{result['docs']:>9,} {step:<13} {s['wall_s']:>8} {rss:>8} {mb:>10.1f}")
        lines.append(
            f"{result['docs']:>9,} window: update {result['window_update_s']} s "
            f"(cold {result['window_update_cold_s']} s, "
            f"first over its base {result['window_update_first_s']} s), "
            f"{result['window_bytes_written'] / 1e6:.2f} MB written, "
            f"reopen {result['reader_reopen_s']} s (cold {result['reader_reopen_cold_s']} s)"
        )
        lines.append(
            f"{result['docs']:>9,} open: {result['reader_open_s']} s from map files "
            f"({result['reader_open_rows_s']} s from every row), "
            f"{result['steps']['open']['lookups']} lookups {result['reader_lookups_s']} s "
            f"({result['steps']['open']['lookups_rows_s']} s on the layer from every row)"
        )
        lines.append(
            f"{result['docs']:>9,} first walks: median {result['first_walk_median_s']} s, "
            f"slowest {result['first_walk_max_s']} s (the whole walk graph: "
            f"{result['whole_walk_graph_s']} s to build, then walks of median "
            f"{result['whole_walk_median_s']} s, slowest {result['whole_walk_max_s']} s)"
        )
    return "\n".join(lines)


def _step_main(args: argparse.Namespace) -> None:
    config = knowledge_config(args.engine)
    runners = {
        "generate": lambda: step_generate(args.work, args.docs[0], args.seed),
        "canonicalize": lambda: step_canonicalize(args.work, config, args.segments),
        "relations": lambda: step_relations(args.work, args.segments),
        "communities": lambda: step_communities(args.work, config, args.seed),
        "maps": lambda: step_maps(args.work),
        "open": lambda: step_open(args.work),
        "window": lambda: step_window(args.work, config, args.seed),
    }
    figures = runners[args.step]()
    figures["peak_rss_mb"] = peak_rss_mb()
    with open(os.path.join(args.work, "steps", f"{args.step}.json"), "w") as handle:
        json.dump(figures, handle)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[10_000])
    parser.add_argument("--json", help="write the per-size JSON objects (a list) here")
    parser.add_argument("--work", help="scratch folder (default: a temporary one, removed)")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--engine", help="community engine (default: the configured one)")
    parser.add_argument(
        "--segments",
        type=int,
        default=1,
        help="worker processes each keyed step runs as (a build's --segments K): each "
        "holds 1/K of the keys",
    )
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:
        _step_main(args)
        return 0
    results = []
    root = args.work or tempfile.mkdtemp(prefix="knowledge-scale-")
    try:
        for docs in args.docs:
            work = os.path.join(root, str(docs))
            shutil.rmtree(work, ignore_errors=True)
            results.append(
                run_size(docs, work, seed=args.seed, engine=args.engine, segments=args.segments)
            )
            if args.json:
                with open(args.json, "w") as handle:
                    json.dump(results, handle, indent=2)
    finally:
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)
    print(_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
