"""A re-exported input against an in-place edit, in one run (issue 54's figures).

A BEIR corpus is built in full from one JSONL file, validated and activated; the root is
copied. Then the same ``--count`` records are edited (one appended sentence) two ways:
in place (the same file; the segments benchmark's case) on one root, and as the next
day's export under a new name (``dt=<date>/part-0000.jsonl``, every record moved) on the
other. Each refresh is timed against the full build, validated and activated. Finally
the new export is built from scratch, and the moved refresh is checked against it:
NDCG@10 of the router, every live document citing the new file, and the edited
documents' spans exact::

    python -m benchmarks.moved_input --data ../shared/data/scifact --work /tmp/movedbench

Prints one line per step and a JSON summary at the end (also written to
``<work>/summary.json``).
"""

import argparse
import json
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.segments import (
    build_details,
    next_state,
    router_runs,
    validate_and_activate,
    write_state,
)

logger = logging.getLogger("benchmarks.moved_input")


def refresh(corpus: str, root: str, full_s: float) -> tuple[str, dict[str, Any]]:
    """Refresh ``root`` from ``corpus``, validate and activate: the bundle id and figures."""
    bundle_id, seconds, details = build_details(corpus, root, delta=True)
    with open(os.path.join(root, "bundles", bundle_id, "manifest.json"), encoding="utf-8") as f:
        delta = json.load(f)["delta"]
    validate_s = validate_and_activate(root, bundle_id)
    entry = {
        "build_s": round(seconds, 1),
        "build_share": round(seconds / full_s, 4),
        "validate_s": round(validate_s, 1),
        "documents": {k: delta[k] for k in ("new", "changed", "moved", "unchanged", "deleted")},
        **details,
    }
    logger.info("refresh of %s: %s", corpus, entry)
    return bundle_id, entry


def check_moved(root: str, bundle_id: str, new_file: str, edited: set[str]) -> dict[str, Any]:
    """Every live document cites ``new_file``; every chunk row the refresh wrote for an
    edited document quotes its document's text exactly (``text == doc[start:end]``)."""
    import pyarrow.parquet as pq

    from query import load_bundle

    bundle = load_bundle(root, bundle_id=bundle_id)
    stale = sum(not d["source_uri"].startswith(new_file) for d in bundle.documents.values())
    rows = pq.read_table(os.path.join(root, "bundles", bundle_id, "chunks.parquet")).to_pylist()
    exact = sum(
        r["text"] == bundle.documents[r["doc_id"]]["text"][r["start"] : r["end"]] for r in rows
    )
    return {
        "documents_citing_an_old_file": stale,
        "edited_documents_rewritten": len({r["doc_id"] for r in rows} & edited),
        "rewritten_chunks": len(rows),
        "rewritten_chunks_exact": exact,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="BEIR folder (corpus.jsonl, qrels/)")
    parser.add_argument("--work", required=True, help="scratch folder (emptied first)")
    parser.add_argument("--count", type=int, default=51, help="records edited")
    parser.add_argument("--date", default="2026-12-07", help="the export's date partition")
    parser.add_argument(
        "--limit", type=int, default=None, help="first N records only (a quick check of the script)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from evidex.evaluation import load_dataset, score_arm

    dataset = load_dataset(args.data)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    summary: dict[str, Any] = {"load_average_start": os.getloadavg()}
    with open(dataset.corpus, encoding="utf-8") as handle:
        rows = {(r := json.loads(line))["_id"]: r for line in handle if line.strip()}
    if args.limit:
        rows = dict(list(rows.items())[: args.limit])
    first = os.path.join(args.work, "export", "corpus.jsonl")
    os.makedirs(os.path.dirname(first))
    write_state(rows, first)

    folder = os.path.dirname(first)  # the job reads the export folder, whatever is in it
    in_place_root = os.path.join(args.work, "in_place")
    bundle_id, full_s, _ = build_details(folder, in_place_root, delta=False)
    validate_and_activate(in_place_root, bundle_id)
    summary["full_build_s"] = round(full_s, 1)
    moved_root = os.path.join(args.work, "moved")
    shutil.copytree(in_place_root, moved_root)

    edited_rows = next_state(rows, 1, args.count, delete=False)
    edited = {k for k in rows if edited_rows[k] != rows[k]}
    write_state(edited_rows, first)
    summary["in_place"] = refresh(folder, in_place_root, full_s)[1]

    export = os.path.join(args.work, "export", f"dt={args.date}", "part-0000.jsonl")
    os.makedirs(os.path.dirname(export))
    write_state(edited_rows, export)
    os.remove(first)  # yesterday's export is gone: the new one replaces it
    moved_id, summary["moved"] = refresh(folder, moved_root, full_s)
    summary["moved"] |= check_moved(moved_root, moved_id, export, edited)

    fresh_root = os.path.join(args.work, "fresh")
    fresh_id, fresh_s, _ = build_details(folder, fresh_root, delta=False)
    validate_and_activate(fresh_root, fresh_id)
    summary["fresh_build_s"] = round(fresh_s, 1)

    from query import load_bundle

    runs = {
        name: router_runs(load_bundle(root), dataset.queries, 10)[1]
        for name, root in (("moved_refresh", moved_root), ("fresh_build", fresh_root))
    }
    summary["ndcg@10"] = {name: score_arm(dataset, run)["ndcg@10"] for name, run in runs.items()}
    summary["load_average_end"] = os.getloadavg()
    text = json.dumps(summary, indent=2)
    print(text)
    with open(os.path.join(args.work, "summary.json"), "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
