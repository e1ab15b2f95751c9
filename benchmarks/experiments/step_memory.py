"""What each one-worker step of a build holds in memory, per million chunks.

Reads a built bundle, rebuilds the Python rows each global step gathers (the chunk rows
with their vectors for the chunk table and HNSW, the chunks for BM25, the mentions for
canonicalization, the statements for relation aggregation) and measures them with
``tracemalloc``, then scales to a million chunks at the bundle's proportions. With
``--segments K`` the chunk-level steps hold a K-th of it each; the knowledge steps still
meet on one worker::

    python -m benchmarks.experiments.step_memory --bundle /tmp/segbench/fresh/bundles/<id>

Prints one JSON object.
"""

import argparse
import gc
import json
import os
import tracemalloc
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas import Chunk, EmbeddedChunk, Mention, Statement
from store import bundles
from store.config import LexicalConfig
from store.lexical import LexicalTokenizer
from store.segments import EXTRACTED_MENTIONS, EXTRACTED_STATEMENTS, own_parts


def _held(build: Callable[[], Any]) -> int:
    """Bytes still allocated by what ``build`` returns, while it is alive."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--rows", type=int, default=5000, help="chunk rows to measure")
    args = parser.parse_args()
    folder = os.path.join(args.bundle, own_parts(args.bundle)[0])
    chunks = pq.read_table(os.path.join(folder, bundles.CHUNKS)).slice(0, args.rows)
    chunk_ids = pa.array(chunks["chunk_id"].to_pylist())
    fields = list(Chunk._fields)

    def of_chunks(rel: str) -> pa.Table:
        table = pq.read_table(os.path.join(folder, rel))
        return table.filter(pc.is_in(table["chunk_id"], value_set=chunk_ids))

    mentions, statements = of_chunks(EXTRACTED_MENTIONS), of_chunks(EXTRACTED_STATEMENTS)

    # Each builder makes every object it returns (strings and floats included), from Arrow.
    def embedded() -> list[Any]:
        rows = chunks.select(fields).to_pylist()
        vectors = chunks["embedding"].to_pylist()
        return [EmbeddedChunk(Chunk(**r), v) for r, v in zip(rows, vectors, strict=True)]

    def tokens() -> list[Any]:
        texts = chunks["text"].to_pylist()
        return [texts, LexicalTokenizer(LexicalConfig())(texts)]

    per_million = 1_000_000 / chunks.num_rows
    steps = {
        "chunk rows with vectors as Python objects (WriteChunks, BuildChunkIndex)": _held(embedded),
        "chunk texts and BM25 tokens (BuildLexicalIndex)": _held(tokens),
        "mentions (canonicalization)": _held(lambda: [Mention(**m) for m in mentions.to_pylist()]),
        "statements (relation aggregation)": _held(
            lambda: [Statement(**s) for s in statements.to_pylist()]
        ),
    }
    gb = {step: round(held * per_million / 1e9, 2) for step, held in steps.items()}
    gb["chunk rows with vectors in Arrow (the table written)"] = round(
        chunks.nbytes * per_million / 1e9, 2
    )
    print(
        json.dumps(
            {
                "bundle": args.bundle,
                "measured_chunks": chunks.num_rows,
                "mentions_per_chunk": round(mentions.num_rows / chunks.num_rows, 2),
                "statements_per_chunk": round(statements.num_rows / chunks.num_rows, 2),
                "gb_per_million_chunks": gb,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
