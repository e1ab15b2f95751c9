"""Entity canonicalization benchmarks: merge quality on labelled aliases, and scale.

Usage:
    python -m benchmarks.canonicalize quality [--aliases tests/data/scifact_aliases.jsonl]
    python -m benchmarks.canonicalize scale --mentions BUNDLE/mentions.parquet \\
        [--sizes 10000 100000 300000]

``quality`` canonicalizes the hand-labelled SciFact mentions (with the acronym
definitions stated in their documents and the real embedding model) and prints
pairwise merge precision and recall against the gold keys.

``scale`` canonicalizes the first N mentions of a built bundle's ``mentions``
table for each size and prints seconds and seconds per 1,000 mentions. Where N
exceeds the table, copy *k* of the table gets the extra word ``copy<k>`` in
every name, so the added mentions are new names with the same shape (blocking
and comparisons grow like real data rather than collapsing into repeats).
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from algorithms.acronyms import find_definitions
from algorithms.canonicalize import Canonicalized, MentionRef, canonicalize
from algorithms.normalize import normalize_surface
from store.config import KnowledgeConfig
from store.models import force_offline, load_sentence_transformer, resolve_model

ALIASES = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "scifact_aliases.jsonl")
SCIFACT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "scifact")


def pairwise_scores(result: Canonicalized, ids: Sequence[str], gold: Sequence[str]) -> dict:
    """Pairwise merge precision/recall of ``result`` over mentions ``ids`` with ``gold`` keys."""
    same_pred = same_gold = both = 0
    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            g = gold[i] == gold[j]
            p = result.assignment[ids[i]] == result.assignment[ids[j]]
            same_gold += g
            same_pred += p
            both += g and p
    return {
        "precision": both / same_pred if same_pred else 1.0,
        "recall": both / same_gold if same_gold else 1.0,
        "gold_pairs": same_gold,
        "merged_pairs": same_pred,
    }


def stated_definitions(corpus: str, doc_ids: set[str]) -> list[tuple[str, str]]:
    """Acronym definitions stated in the given documents of a BEIR corpus."""
    found = []
    if not os.path.isfile(corpus):
        return found
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["_id"] in doc_ids:
                found += [
                    (normalize_surface(d.short), normalize_surface(d.long))
                    for d in find_definitions(record["text"])
                ]
    return found


def _embedder(model: Any) -> Any:
    def embed(names: list[str]) -> np.ndarray:
        return model.encode(names, batch_size=64, normalize_embeddings=True)

    return embed


def quality(aliases: str, corpus: str, config: KnowledgeConfig) -> dict:
    """Pairwise precision and recall on a labelled alias file."""
    with open(aliases, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    ids = [f"a{i:05d}" for i in range(len(rows))]
    mentions = [
        MentionRef(i, r["mention"], r["label"], normalize_surface(r["mention"]), r["doc_id"])
        for i, r in zip(ids, rows, strict=True)
    ]
    stated = stated_definitions(corpus, {r["doc_id"] for r in rows})
    embed = _embedder(load_sentence_transformer(resolve_model(None)))
    result = canonicalize(
        mentions,
        stated,
        embed=embed,
        similarity=config.merge_similarity,
        max_block=config.max_block_size,
    )
    scores = pairwise_scores(result, ids, [r["gold"] for r in rows])
    scores.update(mentions=len(rows), entities=len(result.entities), definitions=len(stated))
    return scores


def scaled_mentions(path: str, n: int) -> list[MentionRef]:
    """The first ``n`` mentions of a mentions table, extended by renamed copies."""
    table = pq.read_table(path, columns=["mention_id", "text", "label", "norm", "chunk_id"])
    base = [MentionRef(*row.values()) for row in table.to_pylist()]
    out: list[MentionRef] = []
    copy = 0
    while len(out) < n:
        for m in base[: n - len(out)]:
            if copy:
                m = MentionRef(
                    f"{m.mention_id}-{copy}", f"{m.text} copy{copy}", m.label,
                    f"{m.norm} copy{copy}", m.chunk_id,
                )  # fmt: skip
            out.append(m)
        copy += 1
    return out


def scale(path: str, sizes: Sequence[int], config: KnowledgeConfig) -> list[dict]:
    """Seconds to canonicalize each size (embedding of candidate names included)."""
    embed_model = load_sentence_transformer(resolve_model(None))
    calls = {"names": 0}

    def embed(names: list[str]) -> np.ndarray:
        calls["names"] += len(names)
        return _embedder(embed_model)(names)

    rows = []
    for n in sizes:
        mentions = scaled_mentions(path, n)
        calls["names"] = 0
        started = time.perf_counter()
        result = canonicalize(
            mentions,
            embed=embed,
            similarity=config.merge_similarity,
            max_block=config.max_block_size,
        )
        seconds = time.perf_counter() - started
        rows.append(
            {
                "mentions": n,
                "entities": len(result.entities),
                "names_embedded": calls["names"],
                "seconds": round(seconds, 2),
                "seconds_per_1k": round(1000 * seconds / n, 3),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    q = sub.add_parser("quality", help="pairwise precision/recall on labelled aliases")
    q.add_argument("--aliases", default=ALIASES)
    q.add_argument("--corpus", default=os.path.join(SCIFACT, "corpus.jsonl"))
    s = sub.add_parser("scale", help="time against the number of mentions")
    s.add_argument("--mentions", required=True, help="a bundle's mentions.parquet")
    s.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    args = parser.parse_args(argv)
    force_offline()
    config = KnowledgeConfig()
    if args.mode == "quality":
        print(json.dumps(quality(args.aliases, args.corpus, config), indent=2))
    else:
        rows = scale(args.mentions, args.sizes, config)
        base = rows[0]["seconds_per_1k"]
        for row in rows:
            print(
                f"{row['mentions']:>8} mentions  {row['entities']:>8} entities  "
                f"{row['seconds']:>8.1f} s  {row['seconds_per_1k']:.3f} s/1k  "
                f"x{row['seconds_per_1k'] / base:.2f} per mention vs smallest"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
