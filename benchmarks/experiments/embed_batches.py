"""How fast does the build's embedding model run in batches of each shape, per surface?

Usage:
    python -m benchmarks.experiments.embed_batches --bundle /tmp/bc/root/bundles/<id> [--repeat 2]

Takes a seeded sample of each surface a bundle embedded (chunk texts, relation
summaries, community reports), and embeds it with the bundle's model in batches
of a fixed size (``--sizes``, cut from the length-sorted texts as the build
cuts them) and in the build's own batches (at most ``DEFAULT_EMBED_BATCH`` texts
and ``DEFAULT_EMBED_CHARS`` padded characters). The batchings take turns,
``--repeat`` rounds; each line prints a batching's time, texts per second and its
time relative to the first fixed size of the same round.
"""

import argparse
import os
import time
from collections.abc import Sequence

import numpy as np
import pyarrow.parquet as pq

SURFACES = (
    ("chunk texts", "chunks", "text", 640),
    ("relation summaries", "relations", "summary", 3000),
    ("community reports", "communities", "report", 1500),
)
UNBOUNDED = 1 << 40


def sample(path: str, column: str, count: int) -> list[str]:
    """``count`` distinct non-empty values of ``column`` in a Parquet file, seeded."""
    values = sorted(
        {v for v in pq.read_table(path, columns=[column]).column(column).to_pylist() if v}
    )
    picks = np.random.default_rng(0).choice(len(values), min(count, len(values)), replace=False)
    return [values[i] for i in sorted(picks)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--sizes", default="64,16", help="fixed batch sizes to compare")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of every batching")
    args = parser.parse_args(argv)

    from benchmarks.build_cost import build_batches
    from query import open_bundle

    model = open_bundle(args.bundle, encoder="torch").model
    batchings = [
        (f"fixed {size}", {"batch_size": int(size), "batch_chars": UNBOUNDED})
        for size in args.sizes.split(",")
    ]
    batchings.append(("the build's", {}))
    model.encode(["warm up"] * 8)
    for name, table, column, count in SURFACES:
        path = os.path.join(args.bundle, f"{table}.parquet")
        if not os.path.exists(path):
            continue
        texts = sample(path, column, count)
        print(f"{name}: {len(texts)} texts, mean {np.mean([len(t) for t in texts]):.0f} characters")
        for round_ in range(1, args.repeat + 1):
            first = None
            for label, limits in batchings:
                batches = build_batches(texts, **limits)
                started = time.perf_counter()
                for batch in batches:
                    model.encode(batch, batch_size=len(batch), normalize_embeddings=True)
                seconds = time.perf_counter() - started
                first = first or seconds
                print(
                    f"  round {round_}, {label} batches ({len(batches)}): {seconds:.1f} s, "
                    f"{len(texts) / seconds:.0f} texts/s, x{seconds / first:.2f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
