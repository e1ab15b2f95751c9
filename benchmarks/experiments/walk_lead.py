"""Experiment (issue 57): how the walk is fused on its routes, decided with held-out sets.

Usage:
    python -m benchmarks.experiments.walk_lead \\
        ../shared/data/hotpotqa_train100=/tmp/p57/hp ../shared/data/musique_train100=/tmp/p57/mq

Each ``DATA=ROOT`` pair names a multi-hop set and the root ``evidex eval`` built its bundle
into (the newest bundle there is read; nothing is written). For every question the walk
route answers, the dense, BM25, walk and plain-fusion rankings are taken from the product's
own arms, and every rule below is scored with ``evidex eval``'s scorer; questions off the
walk's routes keep the router's answer. Rules: a *gate* (when the walk leads: ``none``
never; ``always``; ``named``: an entity seed linked from an anchor; ``namedbridge``: such a
seed with a relation to another entity or a page titled with its name; ``namedpage``: with
a page), a *leading rule* where the gate opens (``W``: the walk, then plain fusion;
``lead c``: ``min(walk rank, c * fusion rank)``; ``rrf8``: the walk at weight 8) and a
*fallback* where it does not (``F``: plain fusion; ``rrfW``: the walk an arm of weight W).

The rule is picked on one set (the smallest shortfall against the walk alone over NDCG@10,
recall@5, all@5 and all@8, then the best mean) and scored on the other, in both directions.
Not in the product: the figures decide.
"""

import argparse
import glob
import os
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from algorithms.normalize import normalize_surface
from evidex.evaluation import CHUNK_DEPTH, document_run, load_dataset, score_arm
from query.fusion import RRF_K

KEYS = ("ndcg@10", "recall@5", "all_supporting@5", "all_supporting@8")
Rows = list[int]


class _Ranked(NamedTuple):
    doc_id: str


def rrf(rankings: Sequence[tuple[Rows, float]]) -> Rows:
    """Rows by reciprocal-rank fusion of ``(rows best first, weight)`` rankings."""
    scores: dict[int, float] = {}
    for rows, weight in rankings:
        for rank, row in enumerate(rows, start=1):
            scores[row] = scores.get(row, 0.0) + weight / (RRF_K + rank)
    return sorted(scores, key=lambda r: (-scores[r], r))


def lead(first: Rows, second: Rows, ratio: float) -> Rows:
    """Rows by ``min(rank in first, ratio * rank in second)``, ``first`` ahead on a tie."""
    key: dict[int, tuple[float, int]] = {}
    for rank, row in enumerate(first, start=1):
        key[row] = (rank, 0)
    for rank, row in enumerate(second, start=1):
        if row not in key or (ratio * rank, 1) < key[row]:
            key[row] = (ratio * rank, 1)
    return sorted(key, key=lambda r: (key[r], r))


GATES: dict[str, Callable[[list[dict[str, Any]]], bool]] = {
    "always": lambda seeds: True,
    "named": lambda seeds: any(s["named"] for s in seeds),
    "namedbridge": lambda seeds: any(s["named"] and (s["relations"] or s["page"]) for s in seeds),
    "namedpage": lambda seeds: any(s["named"] and s["page"] for s in seeds),
}


def rules(q: dict[str, Any]) -> dict[str, Rows]:
    """Every gate × leading rule × fallback for one question's rankings."""
    dense, lexical, walk, plain = q["dense"], q["lexical"], q["walk"], q["fusion"]
    leads = {
        "W": lead(walk, plain, float("inf")),
        "rrf8": rrf([(dense, 1), (lexical, 1), (walk, 8)]),
    }
    leads |= {f"lead {c}": lead(walk, plain, c) for c in (2, 4, 8)}
    falls = {"F": plain}
    falls |= {f"rrf{w}": rrf([(dense, 1), (lexical, 1), (walk, w)]) for w in (1, 2, 4, 8)}
    out = {"walk alone": leads["W"], "plain fusion": plain, "router (this code)": q["router"]}
    for gate, opens in GATES.items():
        for name, led in leads.items():
            for fall, rows in falls.items():
                if gate != "always" or fall == "F":
                    out[f"{gate}: {name} / {fall}"] = led if opens(q["seeds"]) else rows
    return out


def collect(data: str, root: str) -> tuple[Any, dict[str, dict[str, Any]], list[str]]:
    """The dataset, each question's rankings and seeds, and every chunk row's document."""
    from query import answer, open_bundle
    from query.answers import WALK_DENSE_DEPTH, walk_spread
    from query.fusion import fuse
    from query.graph import _DISAMBIGUATION, chunk_titles, graph_arm, walk_graph
    from query.retrieval import dense_arm, lexical_arm

    dataset = load_dataset(data)
    bundle = open_bundle(sorted(glob.glob(os.path.join(root, "bundles", "*")))[-1], verify=False)
    layer = bundle.knowledge
    graph = walk_graph(
        layer, bundle.chunk_ids, bundle.row_of_chunk, None, lambda: chunk_titles(bundle)
    )
    titles = {normalize_surface(_DISAMBIGUATION.sub("", t)) for t in chunk_titles(bundle) if t}
    found = {}
    for qid, text in sorted(dataset.queries.items()):
        routed = answer(bundle, text, k=CHUNK_DEPTH)
        vector = bundle.embed(text)
        dense = dense_arm(bundle, vector, CHUNK_DEPTH, None)
        lexical = lexical_arm(bundle, text, CHUNK_DEPTH, None)
        walk = graph_arm(
            layer, graph, text, dense[:WALK_DENSE_DEPTH], 100, walk_spread(bundle, None)
        )
        plain = fuse(
            dense,
            lexical,
            chunk_ids=bundle.chunk_ids,
            k=CHUNK_DEPTH,
            n_eligible=len(bundle.chunk_ids),
        )
        anchors = [a.lower() for a in routed.route.anchors]
        seeds = [
            {
                "named": any(s.surface.lower() in a or a in s.surface.lower() for a in anchors),
                "relations": bool((graph.adjacency[s.node].indices < graph.n_entities).any()),
                "page": any(normalize_surface(x) in titles for x in (s.name, s.surface)),
            }
            for s in walk.seeds
            if s.kind == "entity"
        ]
        found[qid] = {
            "walked": routed.walk is not None,
            "router": [bundle.row_of_chunk[e.chunk_id] for e in routed.evidence],
            "dense": [h.row for h in dense],
            "lexical": [h.row for h in lexical],
            "walk": [h.row for h in walk.hits],
            "fusion": [f.row for f in plain],
            "seeds": seeds,
        }
    return dataset, found, list(bundle.chunk_doc_ids)


def score(data: str, root: str) -> dict[str, list[float]]:
    """Every rule's NDCG@10, recall@5, all@5 and all@8 on one set."""
    dataset, found, docs = collect(data, root)
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for qid, q in found.items():
        for name, rows in rules(q).items():
            kept = rows if q["walked"] or name == "walk alone" else q["router"]
            runs.setdefault(name, {})[qid] = document_run([_Ranked(docs[r]) for r in kept])
    return {name: [score_arm(dataset, r)[k] for k in KEYS] for name, r in runs.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs=2, help="DATA=ROOT of each of the two multi-hop sets")
    parser.add_argument("--show", type=int, default=5, help="best rules to list")
    args = parser.parse_args(argv)
    names = [os.path.basename(os.path.normpath(s.split("=", 1)[0])) for s in args.sets]
    tables = [score(*s.split("=", 1)) for s in args.sets]

    def margin(table: dict[str, list[float]], name: str) -> float:
        return round(min(a - b for a, b in zip(table[name], table["walk alone"], strict=True)), 4)

    pairs = list(zip(names, tables, strict=True))
    for (tn, tuned), (cn, checked) in ((pairs[0], pairs[1]), (pairs[1], pairs[0])):
        print(f"tuned on {tn}, checked on {cn} ({' / '.join(KEYS)}; shortfall: the least")
        print("difference from the walk alone)")
        print(f"| rule | {tn}: shortfall | {tn} | {cn}: shortfall | {cn} |")
        fixed = ["router (this code)", "walk alone", "plain fusion"]
        rules_only = [n for n in tuned if n not in fixed]
        order = sorted(rules_only, key=lambda n: (-margin(tuned, n), -sum(tuned[n])))
        for name in [*order[: args.show], *fixed]:
            cells = " / ".join(f"{v:.4f}" for v in tuned[name])
            other = " / ".join(f"{v:.4f}" for v in checked[name])
            shortfalls = f"{margin(tuned, name):+.4f} | {cells} | {margin(checked, name):+.4f}"
            print(f"| {name} | {shortfalls} | {other} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
