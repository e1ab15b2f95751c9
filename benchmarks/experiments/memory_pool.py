"""Experiment: Arrow's memory pools on the work a refresh does besides embedding.

Usage:
    python -m benchmarks.experiments.memory_pool --bundle <generation dir> [--repeats 3]
    python -m benchmarks.experiments.memory_pool --root <root> --input <corpus> \\
        [--repeats 2] [-- BUILD OPTIONS]

With ``--bundle``: for each pool, fresh processes (``ARROW_DEFAULT_MEMORY_POOL`` set before
pyarrow starts) read the generation's knowledge tables, sort the mentions as the
knowledge update does and cut the communities to what is live, and report each step's
median seconds. With ``--root`` and ``--input``: for each pool in turn, ``evidex build``
refreshes the root's active generation from ``--input`` (not activated, so every round
builds the same change) and ``evidex validate`` checks it; the medians of the rounds are
printed. Pools alternate within each round, so drift on a shared machine falls on all.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

POOLS = ("mimalloc", "jemalloc", "system")

_STEPS = """
import json, os, sys, time
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from schemas import COMMUNITY_SCHEMA
from store.config import KnowledgeConfig
from transforms.community_cut import cut_communities
path, out = sys.argv[1], {}
def read(name, columns=None):
    with open(os.path.join(path, name), "rb") as handle:
        return pq.read_table(pa.BufferReader(handle.read()), columns=columns)
started = time.perf_counter()
tables = {n: read(n + ".parquet") for n in ("mentions", "entities", "relations", "communities")}
out["read knowledge tables"] = time.perf_counter() - started
started = time.perf_counter()
pa.concat_tables([tables["mentions"].slice(1000), tables["mentions"].slice(0, 1000)]).sort_by(
    "mention_id")
out["sort the mentions"] = time.perf_counter() - started
started = time.perf_counter()
cut_communities(
    tables["communities"].drop_columns(["ann_key", "embedding"]).cast(COMMUNITY_SCHEMA),
    entity_ids=tables["entities"]["entity_id"].combine_chunks(),
    relation_ids=tables["relations"]["relation_id"].combine_chunks(),
    chunk_ids=pc.unique(pc.list_flatten(tables["entities"]["chunk_ids"].combine_chunks())),
    config=KnowledgeConfig(),
)
out["cut the communities"] = time.perf_counter() - started
out["pool"] = pa.default_memory_pool().backend_name
print(json.dumps(out))
"""


def _env(pool: str) -> dict[str, str]:
    return dict(
        os.environ,
        ARROW_DEFAULT_MEMORY_POOL=pool,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        GX_ANALYTICS_ENABLED="false",
    )


def _timed(argv: list[str], pool: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(argv, env=_env(pool), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return time.monotonic() - started, done.stdout


def steps(bundle: str, repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds of each Arrow step per pool, one fresh process per repeat."""
    found: dict[str, dict[str, list[float]]] = {pool: {} for pool in POOLS}
    for _ in range(repeats):
        for pool in POOLS:
            _, out = _timed([sys.executable, "-c", _STEPS, bundle], pool)
            row = json.loads(out)
            if row.pop("pool") != pool:
                raise RuntimeError(f"pyarrow did not use the {pool} pool")
            for step, seconds in row.items():
                found[pool].setdefault(step, []).append(seconds)
    return {
        pool: {step: round(statistics.median(v), 3) for step, v in times.items()}
        for pool, times in found.items()
    }


def refreshes(root: str, corpus: str, repeats: int, extra: list[str]) -> dict[str, dict]:
    """Median seconds of a refresh build and of its validation per pool."""
    cli = [sys.executable, "-m", "evidex.cli", "-q"]
    found: dict[str, dict[str, list[float]]] = {p: {"build": [], "validate": []} for p in POOLS}
    for _ in range(repeats):
        for pool in POOLS:
            argv = [*cli, "build", "--input", corpus, "--root", root, "--json", *extra]
            seconds, out = _timed(argv, pool)
            found[pool]["build"].append(seconds)
            bundle_id = json.loads(out)["bundle_id"]
            seconds, _ = _timed([*cli, "validate", bundle_id, "--root", root], pool)
            found[pool]["validate"].append(seconds)
    return {
        pool: {part: round(statistics.median(v), 1) for part, v in times.items()}
        for pool, times in found.items()
    }


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra = args_in[args_in.index("--") + 1 :] if "--" in args_in else []
    own = args_in[: args_in.index("--")] if "--" in args_in else args_in
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", help="a generation directory with the knowledge layer")
    parser.add_argument("--root", help="a bundle root whose active generation is refreshed")
    parser.add_argument("--input", help="the corpus the refresh reads (with --root)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(own)
    if not args.bundle and not (args.root and args.input):
        parser.error("give --bundle, or --root and --input")
    report: dict[str, object] = {"load_average_start": os.getloadavg()}
    if args.bundle:
        report["steps"] = steps(args.bundle, args.repeats)
    if args.root and args.input:
        report["refresh"] = refreshes(args.root, args.input, args.repeats, extra)
    report["load_average_end"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
