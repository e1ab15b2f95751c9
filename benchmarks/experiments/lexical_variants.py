"""Lexical-arm variants on a built bundle: other BM25 parameters, and RM3 feedback.

Usage:
    python -m benchmarks.experiments.lexical_variants --bundle /tmp/bc/root/bundles/<id> \\
        --dataset ../shared/data/scifact

An experiment, not a product feature. It rebuilds the bundle's BM25 index over
the same chunk-in-context texts (``transforms.lexical``) with each variant's
parameters, scores every query with it, and fuses the result with the bundle's
dense arm (exact search over the stored chunk vectors) by the product's
``query.fusion.fuse``. The variants are published defaults, not values fitted here:

- BM25 with k1 1.2, b 0.75 (Lucene's and Elasticsearch's defaults);
- BM25 with k1 0.9, b 0.4 (the setting Anserini reports BEIR with);
- RM3 pseudo-relevance feedback over the bundle's BM25: 10 feedback texts, 10
  expansion terms, original-query weight 0.5 (Anserini's defaults), and 0.7.

A document scores as its best chunk, as in ``evidex eval``. Each variant's gain in
fused NDCG@10 over the bundle's own BM25 comes with a paired bootstrap 95% interval.
"""

import argparse
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow.parquet as pq

from benchmarks.experiments.sentence_vectors import DEPTH, DocRow, gain_text, per_query_ndcg, ranked


class Rm3(NamedTuple):
    """RM3 settings: feedback texts, expansion terms, weight of the original query."""

    texts: int
    terms: int
    original: float


class Variant(NamedTuple):
    name: str
    k1: float | None  # None: the bundle's own
    b: float | None
    rm3: Rm3 | None = None


VARIANTS = (
    Variant("bundle's BM25", None, None),
    Variant("k1 1.2, b 0.75 (Lucene)", 1.2, 0.75),
    Variant("k1 0.9, b 0.4 (Anserini BEIR)", 0.9, 0.4),
    Variant("RM3 10 texts, 10 terms, 0.5", None, None, Rm3(10, 10, 0.5)),
    Variant("RM3 10 texts, 10 terms, 0.7", None, None, Rm3(10, 10, 0.7)),
)


def rm3_weights(
    query: Sequence[str], feedback: Sequence[tuple[float, Sequence[str]]], rm3: Rm3
) -> dict[str, float]:
    """Term weights of ``query`` expanded by RM3 from ``feedback`` ``(score, tokens)`` texts.

    The relevance model sums each feedback text's term frequencies, divided by its
    length and weighted by its retrieval score. Its ``rm3.terms`` heaviest terms
    (ties by term), scaled to sum to 1, are mixed with the query's own terms (each
    occurrence ``1 / len(query)``) as ``original`` : ``1 - original``.
    """
    relevance: Counter[str] = Counter()
    for score, tokens in feedback:
        for term, count in Counter(tokens).items():
            relevance[term] += score * count / len(tokens)
    expansion = sorted(relevance.items(), key=lambda kv: (-kv[1], kv[0]))[: rm3.terms]
    total = sum(weight for _, weight in expansion)
    weights: Counter[str] = Counter()
    for term in query:
        weights[term] += rm3.original / len(query)
    for term, weight in expansion:
        weights[term] += (1 - rm3.original) * weight / total
    return dict(weights)


class TermScorer:
    """BM25 scores of weighted query terms over one index (one score vector per term)."""

    def __init__(self, index: Any, rows: int) -> None:
        self._index = index
        self._rows = rows
        self._cache: dict[str, np.ndarray] = {}

    def known(self, terms: list[str]) -> list[str]:
        """The terms the index has (as the product's lexical arm keeps them)."""
        return [t for t in terms if t in self._index.vocab_dict]

    def __call__(self, weights: dict[str, float]) -> np.ndarray:
        scores = np.zeros(self._rows, dtype=np.float32)
        for term, weight in weights.items():
            if term not in self._index.vocab_dict:
                continue
            if term not in self._cache:
                self._cache[term] = np.asarray(self._index.get_scores([term]), dtype=np.float32)
            scores += weight * self._cache[term]
        return scores


class _Chunk(NamedTuple):
    """What ``transforms.lexical.context_texts`` reads of a chunk."""

    doc_id: str
    chunk_index: int
    text: str


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--dataset", required=True, help="BEIR directory of the bundle's corpus")
    args = parser.parse_args(argv)

    from evidex.evaluation import document_run, load_dataset, score_arm
    from query import open_bundle
    from query.fusion import ArmHit, fuse
    from store import bundles
    from store.config import LexicalConfig
    from store.lexical import LexicalTokenizer
    from store.models import force_offline
    from transforms.lexical import build_bm25, context_texts

    force_offline()
    dataset = load_dataset(args.dataset)
    bundle = open_bundle(args.bundle)
    own = LexicalConfig.model_validate(bundle.manifest.config.get("lexical", {}))
    table = pq.read_table(
        os.path.join(args.bundle, bundles.CHUNKS),
        columns=["chunk_id", "doc_id", "chunk_index", "text", "embedding"],
    )
    ids = table.column("chunk_id").to_pylist()
    docs = table.column("doc_id").to_pylist()
    columns = (table.column(c).to_pylist() for c in ("doc_id", "chunk_index", "text"))
    chunks = [_Chunk(*row) for row in zip(*columns, strict=True)]
    texts = context_texts(chunks, own.context_chunks)
    tokenize = LexicalTokenizer(own)
    corpus_tokens = tokenize(texts)
    vectors = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    queries = list(dataset.queries.items())
    query_vectors = np.asarray(
        bundle.model.encode([text for _, text in queries], normalize_embeddings=True),
        dtype=np.float32,
    )
    dense: dict[str, list[ArmHit]] = {}
    for (qid, _), query_vector in zip(queries, query_vectors, strict=True):
        similarity = vectors @ query_vector  # fusion breaks ties by the dense score
        dense[qid] = [
            ArmHit(row, rank, float(similarity[row]))
            for rank, row in enumerate(ranked(similarity), start=1)
        ]
    print(f"{len(ids)} chunks (lexical context {own.context_chunks}), {len(queries)} queries")

    def run_of(rows: list[int]) -> dict[str, float]:
        return document_run([DocRow(docs[r]) for r in rows])

    print(f"{'variant':<34}{'lexical':>9}{'fused':>9}   fused gain over the bundle's [95% CI]")
    baseline: dict[str, float] | None = None
    for variant in VARIANTS:
        config = own.model_copy(
            update={
                "k1": own.k1 if variant.k1 is None else variant.k1,
                "b": own.b if variant.b is None else variant.b,
            }
        )
        score = TermScorer(build_bm25(texts, config=config), len(ids))
        lexical_run: dict[str, dict[str, float]] = {}
        fused_run: dict[str, dict[str, float]] = {}
        for qid, text in queries:
            terms = score.known(tokenize([text])[0])
            scores = score(dict(Counter(terms)))
            if variant.rm3 is not None and terms:
                top = [r for r in ranked(scores, variant.rm3.texts) if scores[r] > 0]
                feedback = [(float(scores[r]), corpus_tokens[r]) for r in top]
                scores = score(rm3_weights(terms, feedback, variant.rm3))
            rows = [r for r in ranked(scores, DEPTH) if scores[r] > 0]
            lexical_run[qid] = run_of(rows)
            lexical = [ArmHit(row, rank, float(scores[row])) for rank, row in enumerate(rows, 1)]
            fused = fuse(dense[qid], lexical, chunk_ids=ids, k=DEPTH, n_eligible=len(ids))
            fused_run[qid] = run_of([f.row for f in fused])
        line = (
            f"{variant.name:<34}{score_arm(dataset, lexical_run)['ndcg@10']:>9.4f}"
            f"{score_arm(dataset, fused_run)['ndcg@10']:>9.4f}"
        )
        ndcg = per_query_ndcg(dataset.qrels, fused_run)
        if baseline is None:
            baseline = ndcg
        else:
            line += "   " + gain_text(ndcg, baseline)
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
