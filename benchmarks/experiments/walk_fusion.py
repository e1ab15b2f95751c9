"""Experiment (issue 34): how the graph arm's ranking is fused on the routes that run it.

Usage:
    python -m benchmarks.experiments.walk_fusion --data ../shared/data/hotpotqa_train100 \\
        --root /tmp/hpeval

For each question of a multi-hop set, the router decides as in the product; on the
questions it sends to the walk, the product's dense, BM25 and walk rankings are fused by
each rule below, and every rule is scored at the document level with ``evidex eval``'s
own scorer (the questions the router does not send to the walk keep its answer):

- ``rrf w=W bm25=L``: reciprocal rank fusion (k = 60), the walk weighted W and BM25 L
  (the product: W = 8.0, L = 1.0);
- ``walk``: the walk's ranking alone;
- ``reserve at P``: the product's fused ranking with the walk's best non-seed chunk
  moved up to place P (when it ranks lower), for each P in turn;
- ``interleave``: the product's fused ranking and the walk's ranking of the chunks that
  are not among its own dense seeds, taken in turn (HippoRAG's point: the walk finds the
  passage the question does not resemble, which no sum of ranks lifts past the ones it
  does resemble).

Not in the product: the figures decide whether a rule goes in.
"""

import argparse
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from evidex.evaluation import CHUNK_DEPTH, document_run, load_dataset, score_arm
from query.fusion import RRF_K


class _Ranked(NamedTuple):
    doc_id: str


def rrf(rankings: list[tuple[list[int], float]]) -> list[int]:
    """Rows by reciprocal-rank fusion of ``(rows best first, weight)`` rankings."""
    scores: dict[int, float] = {}
    for rows, weight in rankings:
        for rank, row in enumerate(rows, start=1):
            scores[row] = scores.get(row, 0.0) + weight / (RRF_K + rank)
    return sorted(scores, key=lambda r: (-scores[r], r))


def interleave(first: list[int], second: list[int]) -> list[int]:
    """``first`` and ``second`` taken in turn, each row once."""
    out: list[int] = []
    seen: set[int] = set()
    for pair in zip(first, second, strict=False):
        for row in pair:
            if row not in seen:
                seen.add(row)
                out.append(row)
    for row in [*first[len(second) :], *second[len(first) :]]:
        if row not in seen:
            seen.add(row)
            out.append(row)
    return out


def reserve(first: list[int], second: list[int], positions: Sequence[int]) -> list[int]:
    """``first``, with the best rows of ``second`` that ``first`` ranks below each of
    ``positions`` (1-based) moved up to it, in turn: the walk's bridge passage given a
    slot, as the dense arm's best row has one (D1)."""
    out = list(first)
    for position in sorted(positions):
        above = set(out[: position - 1])
        row = next((r for r in second if r not in above), None)
        if row is None:
            break
        if row in out:
            out.remove(row)
        out.insert(position - 1, row)
    return out


def arms(bundle: Any, query: str) -> dict[str, list[int]] | None:
    """The product's rankings for ``query`` (rows, best first), or None off the walk's
    routes."""
    from query import answer
    from query.answers import WALK_DENSE_DEPTH, walk_spread
    from query.graph import chunk_titles, graph_arm, walk_graph
    from query.retrieval import dense_arm, lexical_arm

    result = answer(bundle, query, k=CHUNK_DEPTH)
    if result.walk is None:
        return None
    layer = bundle.knowledge
    vector = bundle.embed(query)
    graph = walk_graph(
        layer, bundle.chunk_ids, bundle.row_of_chunk, None, lambda: chunk_titles(bundle)
    )
    seeds = dense_arm(bundle, vector, WALK_DENSE_DEPTH, None)
    walk = graph_arm(layer, graph, query, seeds, CHUNK_DEPTH, walk_spread(bundle, None))
    seed_rows = {h.row for h in seeds}
    return {
        "route": [result.route.operation],
        "router": [bundle.row_of_chunk[e.chunk_id] for e in result.evidence],
        "dense": [h.row for h in dense_arm(bundle, vector, CHUNK_DEPTH, None)],
        "lexical": [h.row for h in lexical_arm(bundle, query, CHUNK_DEPTH, None)],
        "walk": [h.row for h in walk.hits],
        "reached": [h.row for h in walk.hits if h.row not in seed_rows],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--root", required=True, help="the root `evidex eval` built into")
    parser.add_argument("--weights", default="2,3,4", help="walk weights for the rrf rows")
    parser.add_argument("--lexical", default="1", help="BM25 weights for the rrf rows")
    args = parser.parse_args(argv)
    from query import answer, load_bundle

    dataset = load_dataset(args.data)
    bundle = load_bundle(args.root, verify=False)
    rules: dict[str, dict[str, dict[str, float]]] = {}
    walked = 0
    routes: dict[str, str] = {}
    for qid, text in sorted(dataset.queries.items()):
        found = arms(bundle, text)
        if found is None:
            kept = list(answer(bundle, text, k=CHUNK_DEPTH).evidence)
            for rule in rules.values():
                rule[qid] = document_run(kept)
            continue
        walked += 1
        routes[qid] = found["route"][0]
        ranked = {
            "router (product)": found["router"],
            "walk": found["walk"],
            "interleave": interleave(found["router"], found["reached"]),
        }
        for positions in ((2,), (3,), (5,), (3, 5), (2, 4)):
            name = "reserve at " + ",".join(map(str, positions))
            ranked[name] = reserve(found["router"], found["reached"], positions)
        for w in (float(x) for x in args.weights.split(",")):
            for lw in (float(x) for x in args.lexical.split(",")):
                name = f"rrf w={w:g}" + (f" bm25={lw:g}" if lw != 1.0 else "")
                ranked[name] = rrf(
                    [(found["dense"], 1.0), (found["lexical"], lw), (found["walk"], w)]
                )
        for name, rows in ranked.items():
            run = document_run([_Ranked(bundle.chunk_doc_ids[r]) for r in rows])
            rules.setdefault(name, {})[qid] = run
    report = {name: score_arm(dataset, runs) for name, runs in rules.items()}
    print(f"{walked} of {len(dataset.queries)} questions ran the walk")
    keys = ["ndcg@10", "recall@2", "recall@5", "all_supporting@5", "all_supporting@8"]
    print("| rule | " + " | ".join(keys) + " |")
    for name, scores in report.items():
        cells = " | ".join(f"{scores.get(k, float('nan')):.4f}" for k in keys)
        print(f"| {name} | {cells} |")
    for route in sorted(set(routes.values())):
        asked = {q for q, r in routes.items() if r == route}
        print(f"route {route} ({len(asked)} questions):")
        for name, runs in rules.items():
            scores = score_arm(dataset, {q: r for q, r in runs.items() if q in asked})
            print(f"  {name}: " + " ".join(f"{k} {scores.get(k, float('nan')):.3f}" for k in keys))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
