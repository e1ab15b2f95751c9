"""Segmented refreshes against full builds, in one run (issue 28's figures).

Builds a BEIR corpus in full, then refreshes it round by round (51 abstracts edited per
round; round 2 deletes 51 instead), each refresh validated and activated as a nightly
job would. Then builds the final state from scratch, and compares: refresh time against
the full build's, NDCG@10 of the router default after the rounds against the full
build's, query latency over many segments against one, and the top-10 lists after
compaction against the full build's. Every build and validation runs in its own
process, as `evidex build` and `evidex validate` would::

    python -m benchmarks.segments --data ../shared/data/scifact --work /tmp/segbench

Prints one line per step and a JSON summary at the end (also written to
``<work>/summary.json``).
"""

import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

logger = logging.getLogger("benchmarks.segments")


def _run(argv: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def evidex(*args: str) -> tuple[float, str]:
    return _run([sys.executable, "-m", "evidex.cli", "-q", *args])


def build(corpus: str, root: str, *, delta: bool) -> tuple[str, float]:
    """Build ``corpus`` under ``root`` (a refresh of the active generation with ``delta``):
    the bundle id and the seconds the command took."""
    bundle_id, seconds, _ = build_details(corpus, root, delta=delta)
    return bundle_id, seconds


def build_details(corpus: str, root: str, *, delta: bool) -> tuple[str, float, dict[str, Any]]:
    """:func:`build`, plus what the refresh did: texts embedded and the knowledge state."""
    argv = ["build", "--input", corpus, "--root", root, "--title-in-text", "--json"]
    seconds, out = evidex(*argv, *([] if delta else ["--no-delta"]))
    payload = json.loads(out)
    with open(os.path.join(payload["path"], "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    details = {
        "chunk_texts_embedded": payload["delta"].get("texts_embedded"),
        "knowledge_texts_embedded": payload["delta"].get("knowledge_texts_embedded"),
        "knowledge_state": manifest.get("knowledge_state"),
        "segments": len(manifest.get("segments") or []),
        "deleted_chunk_rows": sum(len(s["deleted_chunks"]) for s in manifest.get("segments") or []),
    }
    return payload["bundle_id"], seconds, details


def validate_and_activate(root: str, bundle_id: str) -> float:
    seconds, _ = evidex("validate", bundle_id, "--root", root)
    evidex("activate", bundle_id, "--root", root)
    return seconds


def write_state(rows: dict[str, dict[str, Any]], path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows.values():
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def next_state(
    rows: dict[str, dict[str, Any]], round_number: int, count: int, *, delete: bool
) -> dict[str, dict[str, Any]]:
    """The corpus after one round: ``count`` seeded abstracts edited (or deleted)."""
    rng = random.Random(round_number)
    picked = set(rng.sample(sorted(rows), count))
    if delete:
        return {k: v for k, v in rows.items() if k not in picked}
    return {
        k: dict(v, text=f"{v['text']} This abstract was revised in round {round_number}.")
        if k in picked
        else v
        for k, v in rows.items()
    }


def router_runs(bundle: Any, queries: dict[str, str], k: int) -> tuple[dict, dict, list[float]]:
    """Each query's router evidence (chunk ids, top ``k``), document run and latency."""
    from evidex.evaluation import document_run
    from query import answer

    tops, runs, latencies = {}, {}, []
    for qid, text in sorted(queries.items()):
        started = time.perf_counter()
        evidence = list(answer(bundle, text, k=100).evidence)
        latencies.append((time.perf_counter() - started) * 1000)
        tops[qid] = [e.chunk_id for e in evidence[:k]]
        runs[qid] = document_run(evidence)
    return tops, runs, latencies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="BEIR folder (corpus.jsonl, qrels/)")
    parser.add_argument("--work", required=True, help="scratch folder (emptied first)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--count", type=int, default=51, help="documents edited per round")
    parser.add_argument(
        "--measure-only",
        action="store_true",
        help="skip the builds: measure the bundles a previous run left in --work (the last "
        "refresh, the compacted generation and the fresh build of the final state)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from evidex.evaluation import load_dataset

    dataset = load_dataset(args.data)
    if args.measure_only:
        root, fresh_root = os.path.join(args.work, "root"), os.path.join(args.work, "fresh")
        generations = sorted(os.listdir(os.path.join(root, "bundles")))
        summary = {"load_average_start": os.getloadavg()}
        measure(dataset, root, fresh_root, generations[-2], generations[-1], summary)
        print(json.dumps(summary, indent=2))
        return 0
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    root, fresh_root = os.path.join(args.work, "root"), os.path.join(args.work, "fresh")
    corpus = os.path.join(args.work, "corpus.jsonl")
    with open(dataset.corpus, encoding="utf-8") as handle:
        rows = {(r := json.loads(line))["_id"]: r for line in handle if line.strip()}
    write_state(rows, corpus)
    summary: dict[str, Any] = {"load_average_start": os.getloadavg()}

    first, full = build(corpus, root, delta=False)
    full_validate = validate_and_activate(root, first)
    logger.info("full build %.1f s, validation %.1f s", full, full_validate)
    summary["full_build_s"], summary["full_validate_s"] = round(full, 1), round(full_validate, 1)
    summary["rounds"] = []
    for number in range(1, args.rounds + 1):
        delete = number == 2
        rows = next_state(rows, number, args.count, delete=delete)
        write_state(rows, corpus)
        bundle_id, seconds, details = build_details(corpus, root, delta=True)
        checked = validate_and_activate(root, bundle_id)
        entry = {
            "round": number,
            "kind": "delete" if delete else "edit",
            "build_s": round(seconds, 1),
            "validate_s": round(checked, 1),
            "build_share": round(seconds / full, 4),
            "build_and_validate_share": round((seconds + checked) / (full + full_validate), 4),
            **details,
        }
        logger.info("round %s", entry)
        summary["rounds"].append(entry)

    fresh_id, fresh = build(corpus, fresh_root, delta=False)
    validate_and_activate(fresh_root, fresh_id)
    summary["final_full_build_s"] = round(fresh, 1)
    last = bundle_id
    compacted, out = evidex("compact", "--force", "--root", root, "--json")
    summary["compaction_s"] = round(compacted, 1)
    compacted_id = json.loads(out)["bundle_id"]

    measure(dataset, root, fresh_root, last, compacted_id, summary)
    text = json.dumps(summary, indent=2)
    print(text)
    with open(os.path.join(args.work, "summary.json"), "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


def measure(
    dataset: Any, root: str, fresh_root: str, last: str, compacted_id: str, summary: dict
) -> None:
    """Quality, top-10 agreement and latency of the segmented, compacted and fresh bundles."""
    from evidex.evaluation import score_arm
    from query import load_bundle

    segmented = load_bundle(root, bundle_id=last)
    one = load_bundle(fresh_root)
    merged = load_bundle(root, bundle_id=compacted_id)
    summary["segments"] = len(segmented.segments)
    queries = dataset.queries
    seg_tops, seg_runs, seg_ms = router_runs(segmented, queries, 10)
    one_tops, one_runs, one_ms = router_runs(one, queries, 10)
    seg_again = router_runs(segmented, queries, 10)[2]  # interleaved: the machine drifts
    one_again = router_runs(one, queries, 10)[2]
    merged_tops, merged_runs, _ = router_runs(merged, queries, 10)
    summary["ndcg@10"] = {
        "segmented": score_arm(dataset, seg_runs)["ndcg@10"],
        "full_build": score_arm(dataset, one_runs)["ndcg@10"],
        "compacted": score_arm(dataset, merged_runs)["ndcg@10"],
    }
    same = sum(merged_tops[q] == one_tops[q] for q in one_tops)
    summary["compacted_top10_identical"] = round(same / len(one_tops), 4)
    summary["segmented_top10_identical"] = round(
        sum(seg_tops[q] == one_tops[q] for q in one_tops) / len(one_tops), 4
    )
    p95 = {
        "segmented_ms": round(float(np.percentile(seg_ms + seg_again, 95)), 1),
        "one_segment_ms": round(float(np.percentile(one_ms + one_again, 95)), 1),
    }
    p95["ratio"] = round(p95["segmented_ms"] / p95["one_segment_ms"], 3)
    summary["router_p95"] = p95
    summary["load_average_end"] = os.getloadavg()


if __name__ == "__main__":
    sys.exit(main())
