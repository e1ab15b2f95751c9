"""Experiment (issue 34): how the graph arm links its entity seeds, and how much of the
seeds' mass the dense chunks hold.

Usage:
    python -m benchmarks.experiments.walk_seeds --data ../shared/data/hotpotqa_train100 \\
        --root /tmp/hpeval

Seed linking, each scored as the router (the product's fusion, at each of ``--weights`` for
the walk) and as the walk alone, with ``evidex eval``'s scorer:

- ``before``: every word n-gram that is an alias seeds its entities, weighted 1 / the
  chunks the entity occurs in (the product until 2026-12-04): "Kate Ramsay" also seeds
  "Kate" and "Ramsay", and "opera", extracted once as an entity, weighs 1.0;
- ``longest``: linked longest first, an n-gram that names an entity claims its words;
- ``spread``: weighted 1 / the chunks the entity occurs in or the chunks whose BM25 text
  holds the n-gram's words, whichever is more (:func:`query.graph.text_spread`);
- ``longest+spread``: both (the product), with the dense chunks' share of the mass at each
  of ``--shares``.

Not in the product: the figures decide what goes in.
"""

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import query.graph as graph_module
from algorithms.normalize import normalize_surface
from evidex.evaluation import CHUNK_DEPTH, document_run, load_dataset, score_arm

KEYS = ("ndcg@10", "recall@2", "recall@5", "all_supporting@5", "all_supporting@8")


class _Ranked(NamedTuple):
    doc_id: str


def every_ngram(spread: bool) -> Callable[..., list[graph_module.Seed]]:
    """The linking before 2026-12-04: every n-gram that is an alias seeds its entities (an
    entity at its first, longest n-gram), with the spread counted or not."""

    def seeds(
        layer: Any, graph: Any, query: str, text: graph_module.Spread | None = None
    ) -> list[graph_module.Seed]:
        layer = layer.folded()  # the walk graph's rows
        words = graph_module._WORD.findall(query)
        found: dict[int, graph_module.Seed] = {}
        for size in range(min(graph_module.MAX_NGRAM, len(words)), 0, -1):
            for i in range(len(words) - size + 1):
                surface = " ".join(words[i : i + size])
                holding = text(surface) if spread and text is not None else 0
                for e in layer.aliases.get(normalize_surface(surface), []):
                    count = max(int(graph.chunk_counts[e]), holding or 0)
                    usable = holding is not None and graph.chunk_counts[e] > 0
                    if usable and count <= graph_module.MAX_SEED_CHUNKS and e not in found:
                        name = layer.entity_names[e]
                        found[e] = graph_module.Seed("entity", e, name, surface, 1.0 / count)
        ranked = sorted(found.values(), key=lambda s: (-s.weight, layer.entity_ids[s.node]))
        return ranked[: graph_module.MAX_SEEDS]

    return seeds


def without_spread(
    layer: Any, graph: Any, query: str, text: graph_module.Spread | None = None
) -> list[graph_module.Seed]:
    """The product's linking (longest first) with specificity from entity chunks only."""
    return PRODUCT_SEEDS(layer, graph, query, None)


PRODUCT_SEEDS = graph_module.entity_seeds


def score(dataset: Any, bundle: Any, weights: Sequence[float]) -> dict[str, dict[str, float]]:
    """The walk's scores and the router's at each walk weight, on every question, with the
    seeds and share the module has now."""
    import query.answers as answers_module
    from query import answer
    from query.answers import WALK_DENSE_DEPTH, walk_spread
    from query.graph import chunk_titles, graph_arm, walk_graph
    from query.retrieval import dense_arm

    layer = bundle.knowledge
    graph = walk_graph(
        layer, bundle.chunk_ids, bundle.row_of_chunk, None, lambda: chunk_titles(bundle)
    )
    runs: dict[str, dict[str, dict[str, float]]] = {}
    product_weight = answers_module.WALK_WEIGHT
    try:
        for weight in weights:
            answers_module.WALK_WEIGHT = weight
            router = runs.setdefault(f"router, walk weight {weight:g}", {})
            for qid, text in sorted(dataset.queries.items()):
                router[qid] = document_run(answer(bundle, text, k=CHUNK_DEPTH).evidence)
    finally:
        answers_module.WALK_WEIGHT = product_weight
    walk = runs.setdefault("walk alone", {})
    for qid, text in sorted(dataset.queries.items()):
        dense = dense_arm(bundle, bundle.embed(text), WALK_DENSE_DEPTH, None)
        hits = graph_arm(layer, graph, text, dense, CHUNK_DEPTH, walk_spread(bundle, None)).hits
        walk[qid] = document_run([_Ranked(bundle.chunk_doc_ids[h.row]) for h in hits])
    return {arm: score_arm(dataset, arm_runs) for arm, arm_runs in runs.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--root", required=True, help="a root with an active bundle")
    parser.add_argument("--shares", default="0.5,0.25,0.1", help="dense chunks' share of mass")
    parser.add_argument("--weights", default="2,8", help="the walk's fusion weights")
    args = parser.parse_args(argv)
    from query import load_bundle

    dataset = load_dataset(args.data)
    bundle = load_bundle(args.root, verify=False)
    product = (graph_module.entity_seeds, graph_module.CHUNK_SHARE)
    variants: list[tuple[str, Callable[..., list[graph_module.Seed]], float]] = [
        ("before", every_ngram(False), 0.5),
        ("longest", without_spread, 0.5),
        ("spread", every_ngram(True), 0.5),
    ]
    variants += [
        (f"longest+spread, share {share:g}", PRODUCT_SEEDS, share)
        for share in (float(x) for x in args.shares.split(","))
    ]
    print("| seeds | arm | " + " | ".join(KEYS) + " |")
    weights = [float(x) for x in args.weights.split(",")]
    try:
        for name, seeds, share in variants:
            graph_module.entity_seeds = seeds  # type: ignore[assignment]
            graph_module.CHUNK_SHARE = share
            for arm, scores in score(dataset, bundle, weights).items():
                cells = " | ".join(f"{scores[k]:.4f}" for k in KEYS)
                print(f"| {name} | {arm} | {cells} |", flush=True)
    finally:
        graph_module.entity_seeds = product[0]  # type: ignore[assignment]
        graph_module.CHUNK_SHARE = product[1]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
