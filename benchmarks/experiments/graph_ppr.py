"""Experiment (issue 34): a Personalized PageRank graph arm over the knowledge layer.

Usage:
    python -m benchmarks.experiments.graph_ppr --data ../shared/data/musique_train100 \\
        --root /tmp/mq [--damping 0.5] [--graph-weights 0,0.5,1,2] [--lexical-weights 1,0.1]

The graph: entity and chunk nodes; an edge between an entity and each chunk it occurs in,
and between the subject and object entities of each relation. Seeds: the query's word
n-grams (1-4 words) that are an alias of a canonical entity, each weighted by its
specificity (1 / the number of chunks the entity occurs in); entities in more than
``--max-seed-chunks`` chunks are not seeds. ``--link-embeddings T`` also links each
entity spaCy finds in the query to the canonical entity whose name embeds closest
(cosine >= T); ``--dense-seeds N`` adds the top N dense chunks as seeds (HippoRAG 2 seeds
passages as well as entities); ``--bridge N`` runs a second walk with the entities of the
first fused ranking's top N chunks added. PPR by power iteration (``--iterations``);
chunks ranked by the mass that reaches them. The graph ranking is fused with the dense and
BM25 rankings by reciprocal rank (k = 60), and scored at the document level with
``evidex eval``'s own scorer. Not in the product: the figures decide whether it goes in.
"""

import argparse
import json
import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from algorithms.normalize import normalize_surface
from evidex.evaluation import load_dataset, score_arm
from query import load_bundle
from query.retrieval import retrieve

RRF_K = 60
DEPTH = 100
_WORD = re.compile(r"[\w'-]+")


def build_graph(layer, row_of_chunk: dict[str, int]) -> tuple[sparse.csr_matrix, int]:
    """Column-stochastic transition matrix over entities (first) and chunks."""
    n_entities = len(layer.entity_ids)
    n = n_entities + len(row_of_chunk)
    rows, cols = [], []
    for e, chunks in enumerate(layer.entity_chunks):
        for c in chunks:
            node = n_entities + row_of_chunk[c]
            rows += [e, node]
            cols += [node, e]
    for s, o in zip(layer.subjects, layer.objects, strict=True):
        if o >= 0 and o != s:
            rows += [s, o]
            cols += [o, s]
    adjacency = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.float64), (rows, cols)), shape=(n, n)
    )
    adjacency.data[:] = 1.0  # repeated edges count once
    degree = np.asarray(adjacency.sum(axis=0)).ravel()
    degree[degree == 0] = 1.0
    return adjacency.multiply(1.0 / degree).tocsr(), n_entities


def seeds(layer, query: str, max_chunks: int) -> dict[int, float]:
    words = _WORD.findall(query)
    found: dict[int, float] = {}
    for size in range(4, 0, -1):
        for i in range(len(words) - size + 1):
            for e in layer.aliases.get(normalize_surface(" ".join(words[i : i + size])), []):
                count = len(layer.entity_chunks[e])
                if 0 < count <= max_chunks:
                    found[e] = max(found.get(e, 0.0), 1.0 / count)
    return found


def ppr(matrix, n: int, personal: dict[int, float], damping: float, iterations: int) -> np.ndarray:
    start = np.zeros(n)
    for node, weight in personal.items():
        start[node] = weight
    start /= start.sum()
    mass = start.copy()
    for _ in range(iterations):
        mass = (1 - damping) * start + damping * (matrix @ mass)
    return mass


def walk(matrix, n: int, n_entities: int, bundle, personal: dict[int, float], args) -> list[str]:
    mass = ppr(matrix, n, personal, args.damping, args.iterations)[n_entities:]
    top = np.argsort(-mass)[:DEPTH]
    return [bundle.chunk_ids[i] for i in top if mass[i] > 0]


def fused(rankings: list[tuple[list[str], float]]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for ranking, weight in rankings:
        for rank, chunk in enumerate(ranking, start=1):
            scores[chunk] = scores.get(chunk, 0.0) + weight / (RRF_K + rank)
    return scores


def document_scores(bundle, chunk_scores: dict[str, float]) -> dict[str, float]:
    docs: dict[str, float] = {}
    for chunk, score in chunk_scores.items():
        doc = bundle.chunk_doc_ids[bundle.row_of_chunk[chunk]]
        docs[doc] = max(docs.get(doc, 0.0), score)
    return dict(sorted(docs.items(), key=lambda kv: -kv[1])[:DEPTH])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--root", required=True, help="the root `evidex eval` built into")
    parser.add_argument("--damping", type=float, default=0.5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--max-seed-chunks", type=int, default=50)
    parser.add_argument("--graph-weights", default="0,0.5,1,2")
    parser.add_argument(
        "--dense-seeds",
        type=int,
        default=0,
        help="also seed the walk with the top N dense chunks (their share: --chunk-share)",
    )
    parser.add_argument("--chunk-share", type=float, default=0.5)
    parser.add_argument(
        "--link-embeddings",
        type=float,
        default=0.0,
        help="also link each named entity spaCy finds in the query to the canonical entity "
        "whose name embeds closest, when the cosine is at least this (0: off)",
    )
    parser.add_argument(
        "--bridge",
        type=int,
        default=0,
        help="second round: entities of the top N chunks of the first fused ranking join "
        "the seeds (at half their specificity) and the walk runs again",
    )
    parser.add_argument("--lexical-weights", default="1,0.1")
    args = parser.parse_args(argv)

    dataset = load_dataset(args.data)
    from store.bundles import list_bundles

    bundle = load_bundle(args.root, bundle_id=list_bundles(args.root)[-1])  # eval does not activate
    layer = bundle.knowledge.folded()  # every row at once, in id order
    matrix, n_entities = build_graph(layer, bundle.row_of_chunk)
    n = matrix.shape[0]
    entities_of: dict[str, list[int]] = {}
    for e, chunks in enumerate(layer.entity_chunks):
        for c in chunks:
            entities_of.setdefault(c, []).append(e)
    names = None
    if args.link_embeddings:
        vectors = [
            bundle.encoder.encode_batch(layer.entity_names[i : i + 256])
            for i in range(0, len(layer.entity_names), 256)
        ]
        names = np.vstack(vectors)
    recognizer = bundle.recognizer()
    per_query = {}
    seeded = 0
    for qid, text in sorted(dataset.queries.items()):
        dense = [e.chunk_id for e in retrieve(bundle, text, k=DEPTH, arms=("dense",))]
        lexical = [e.chunk_id for e in retrieve(bundle, text, k=DEPTH, arms=("lexical",))]
        personal = seeds(layer, text, args.max_seed_chunks)
        if names is not None and recognizer is not None:
            for mention, _label in recognizer(text):
                similarity = names @ bundle.encoder.encode(mention)
                best = int(np.argmax(similarity))
                count = len(layer.entity_chunks[best])
                if similarity[best] >= args.link_embeddings and 0 < count <= args.max_seed_chunks:
                    personal[best] = max(personal.get(best, 0.0), 1.0 / count)
        if args.dense_seeds:
            total = sum(personal.values()) or 1.0
            share = args.chunk_share / (1 - args.chunk_share) * total if personal else 1.0
            top_dense = dense[: args.dense_seeds]
            for rank, chunk in enumerate(top_dense, start=1):
                node = n_entities + bundle.row_of_chunk[chunk]
                personal[node] = share / rank / sum(1 / r for r in range(1, len(top_dense) + 1))
        graph: list[str] = []
        if personal:
            seeded += 1
            graph = walk(matrix, n, n_entities, bundle, personal, args)
            if args.bridge:
                first = fused([(dense, 1.0), (lexical, 1.0), (graph, 1.0)])
                best = sorted(first, key=lambda c: -first[c])[: args.bridge]
                for chunk in best:
                    for e in entities_of.get(chunk, ()):
                        count = len(layer.entity_chunks[e])
                        if count <= args.max_seed_chunks and e not in personal:
                            personal[e] = 0.5 / count
                graph = walk(matrix, n, n_entities, bundle, personal, args)
        per_query[qid] = (dense, lexical, graph)
    report = {"queries": len(per_query), "queries_with_seeds": seeded, "runs": {}}
    for lw in (float(w) for w in args.lexical_weights.split(",")):
        for gw in (float(w) for w in args.graph_weights.split(",")):
            runs = {
                qid: document_scores(bundle, fused([(d, 1.0), (lx, lw), (g, gw)]))
                for qid, (d, lx, g) in per_query.items()
            }
            report["runs"][f"lexical {lw} graph {gw}"] = score_arm(dataset, runs)
    graph_only = {
        qid: document_scores(bundle, fused([(g, 1.0)])) for qid, (_d, _lx, g) in per_query.items()
    }
    report["runs"]["graph alone"] = score_arm(dataset, graph_only)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
