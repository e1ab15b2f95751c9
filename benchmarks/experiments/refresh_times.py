"""Experiment (issue 29): how long a stream window's refresh takes, warm, on a stream's
work folder.

Usage:
    python -m benchmarks.experiments.refresh_times --work /tmp/sl1000 --refreshes 3 \\
        [--offset 600]

Adds one HotpotQA record (from ``--offset``) as a new ``.txt`` file to the work folder's
input, then runs one refresh with the stream's own setting (models kept loaded, the table
cache on, ``--title_in_text``), ``--refreshes`` + 1 times; the first, which loads the
models, is not counted, nor is one that compacted. Run it from two checkouts in turn
(``PYTHONPATH=<checkout>``, A B A B, a new ``--offset`` each) to compare their windows on
the same folder; each run adds its documents to the folder.
"""

import argparse
import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="a stream_latency --work folder")
    parser.add_argument("--refreshes", type=int, default=3)
    parser.add_argument("--offset", type=int, default=600, help="first record to add")
    parser.add_argument("--records", default=str(SHARED / "hotpotqa_train100" / "corpus.jsonl"))
    args = parser.parse_args(argv)
    from pipelines.refresh import refresh
    from store import table_cache
    from store.memory import choose_memory_pool
    from store.models import force_offline, keep_models_loaded

    force_offline()
    choose_memory_pool()
    keep_models_loaded()
    table_cache.enable()
    watch, root = os.path.join(args.work, "in"), os.path.join(args.work, "root")
    with open(args.records, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    chosen = records[args.offset : args.offset + args.refreshes + 1]
    counted: list[float] = []
    for i, record in enumerate(chosen):
        name = os.path.join(watch, f"refresh-{args.offset + i:05d}.txt")
        with open(name, "w", encoding="utf-8") as out:
            out.write(f"{record['title']}\n\n{record['text']}")
        started = time.monotonic()
        result = refresh(watch, root, ["--title_in_text"])
        took = time.monotonic() - started
        kept = i > 0 and "compact" not in result.reason
        if kept:
            counted.append(took)
        print(f"refresh {i}: {result.status} in {took:.2f} s{'' if kept else ' (not counted)'}")
    if counted:
        print(f"median {statistics.median(counted):.2f} s of {len(counted)}: {counted}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
