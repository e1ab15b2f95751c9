"""Experiment (issue 29): what a refresh embeds when documents are edited in place.

Usage:
    python -m benchmarks.experiments.edited_documents --work /tmp/sl1000 --edit 10 \\
        [--offset 0]

Edits ``--edit`` records of the work folder's ``in/corpus.jsonl`` (a ``stream_latency
--work`` folder), from record ``--offset`` on, by appending one sentence to each text, then
runs one refresh with the stream's setting (``--title_in_text``) and prints what it did:
documents changed, chunk rows the edited documents now have, chunk texts embedded, and the
seconds (the first refresh in the process, so the models' load is in them). Run it from two
checkouts (``PYTHONPATH=<checkout>``, a new ``--offset`` each) to compare them.
"""

import argparse
import json
import os
import time
from collections.abc import Sequence

EDIT = " This sentence was added by an edit."


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="a stream_latency --work folder")
    parser.add_argument("--edit", type=int, default=10, help="records to edit")
    parser.add_argument("--offset", type=int, default=0, help="first record to edit")
    args = parser.parse_args(argv)
    import pyarrow.parquet as pq

    from pipelines.refresh import refresh
    from store.bundles import CHUNKS, local_bundle
    from store.models import force_offline

    force_offline()
    corpus = os.path.join(args.work, "in", "corpus.jsonl")
    with open(corpus, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    edited = records[args.offset : args.offset + args.edit]
    for record in edited:
        record["text"] = record["text"] + EDIT
    with open(corpus, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    root = os.path.join(args.work, "root")
    started = time.monotonic()
    result = refresh(os.path.join(args.work, "in"), root, ["--title_in_text"])
    seconds = time.monotonic() - started
    rows = 0
    if result.bundle_id:
        rows = pq.ParquetFile(os.path.join(local_bundle(root, result.bundle_id), CHUNKS))
        rows = rows.metadata.num_rows
    summary = {
        "status": result.status,
        "edited": len(edited),
        "changed": result.changed,
        "chunk_rows_of_edited": rows,
        "texts_embedded": result.chunks_embedded,
        "seconds": round(seconds, 1),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
