"""Tool-call latency of ``search_evidence`` over MCP against ``answer`` itself.

Usage:
    python -m benchmarks.mcp_latency --root ROOT \\
        --queries ../shared/data/scifact/queries.jsonl [--limit N] [--k 5] [--warmup 10]

One run, one bundle: this process opens the active bundle under ROOT and times
:func:`query.answer` on each query; beside it, a real ``evidex mcp --root ROOT`` (stdio)
is started by the official SDK's client, and the same query is timed as a
``search_evidence`` tool call, from the client's send to its parsed result (JSON-RPC
over the pipes, argument validation, the answer in the server, the output model and
its JSON). The two alternate query by query (which goes first alternates too), after
``--warmup`` queries of each that are not counted, so drifts in machine load fall on
both. Prints p50/p95/p99 of each, the difference of the p95s, the per-query overhead
(tool call minus answer, same query), whether both returned the same evidence, and
the load average before and after.
"""

import argparse
import json
import os
import sys
import time
from typing import Any

import anyio
import numpy as np

from benchmarks.query import percentiles


def read_queries(path: str, limit: int | None) -> list[str]:
    """The ``text`` of each line of a BEIR ``queries.jsonl``."""
    with open(path, encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for line in handle if line.strip()]
    return queries[:limit] if limit else queries


class _Timed:
    """One query through both paths: ``answer`` here, ``search_evidence`` over MCP."""

    def __init__(self, bundle: Any, session: Any, k: int) -> None:
        self.bundle, self.session, self.k = bundle, session, k

    def direct(self, q: str) -> tuple[float, list[str]]:
        from query import answer

        start = time.perf_counter()
        result = answer(self.bundle, q, k=self.k)
        return (time.perf_counter() - start) * 1000, [e.chunk_id for e in result.evidence]

    async def tool(self, q: str) -> tuple[float, list[str]]:
        start = time.perf_counter()
        result = await self.session.call_tool("search_evidence", {"query": q, "k": self.k})
        ms = (time.perf_counter() - start) * 1000
        if result.is_error:
            raise RuntimeError(f"search_evidence failed on {q!r}: {result.content}")
        return ms, [item["chunk_id"] for item in result.structured_content["items"]]


async def _alternate(timed: _Timed, queries: list[str]) -> tuple[list[float], list[float], int]:
    """Both paths on each query, which goes first alternating: their times, and how many
    queries got the same evidence from both."""
    direct, tool, same = [], [], 0
    for i, q in enumerate(queries):
        if i % 2 == 0:
            (d_ms, d_ids), (t_ms, t_ids) = timed.direct(q), await timed.tool(q)
        else:
            (t_ms, t_ids), (d_ms, d_ids) = await timed.tool(q), timed.direct(q)
        direct.append(d_ms)
        tool.append(t_ms)
        same += d_ids == t_ids
    return direct, tool, same


async def measure(root: str, queries: list[str], *, k: int, warmup: int) -> dict[str, Any]:
    """Time ``answer`` here and ``search_evidence`` through an MCP stdio session."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from query import load_bundle

    bundle = load_bundle(root)
    bundle.recognizer()  # as the server's reader does before its first call
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "evidex.cli", "-q", "mcp", "--root", root],
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        timed = _Timed(bundle, session, k)
        await _alternate(timed, queries[:warmup])
        direct, tool, same = await _alternate(timed, queries[warmup:])
    overhead = np.asarray(tool) - np.asarray(direct)
    answer_ms, tool_ms = percentiles(direct), percentiles(tool)
    return {
        "bundle_id": bundle.bundle_id,
        "chunks": len(bundle.chunk_ids),
        "queries_timed": len(direct),
        "k": k,
        "answer_ms": answer_ms,
        "search_evidence_mcp_stdio_ms": tool_ms,
        "p95_difference_ms": round(tool_ms["p95"] - answer_ms["p95"], 2),
        "per_query_overhead_ms": percentiles(overhead.tolist()),
        "same_evidence": f"{same}/{len(direct)}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="bundle root with an active bundle")
    parser.add_argument("--queries", required=True, help="BEIR queries.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="first N queries only")
    parser.add_argument("--k", type=int, default=5, help="evidence items per query (default 5)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed queries first")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    queries = read_queries(args.queries, args.limit)
    if len(queries) <= args.warmup:
        parser.error(f"{len(queries)} queries: more than --warmup {args.warmup} are needed")
    before = os.getloadavg()
    report = anyio.run(lambda: measure(args.root, queries, k=args.k, warmup=args.warmup))
    report = {"load_average": before, **report, "load_average_end": os.getloadavg()}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
