"""Sentence vectors as a second dense view of each chunk: would they lift retrieval quality?

Usage:
    python -m benchmarks.experiments.sentence_vectors --bundle /tmp/bc/root/bundles/<id> \\
        --dataset ../shared/data/scifact [--cache /tmp/sentences.npz]

An experiment on a built bundle, not a product feature. It splits every chunk
into sentences (``algorithms.chunk``), embeds them with the bundle's model
(sorted by length, batched; ``--cache`` keeps the vectors for a rerun), and
scores, with exact search over all vectors and trec_eval through
``evidex.evaluation``, these dense arms and each one fused with the bundle's
lexical arm by ``query.fusion.fuse`` (the product's RRF, lexical weight 1):

- ``chunk``: cosine of the query and the chunk vector (the product's dense arm);
- ``sentence``: cosine of the query and the chunk's best sentence;
- ``max``: the larger of the two;
- ``sum``: their sum;
- ``sum in chunk top 300``: the sum, ranking only the chunk arm's top 300 (what a
  product without a sentence index would do: rescore the chunk arm's candidates).

With ``--late`` it also pools each sentence's vector from the token embeddings of
its chunk's forward pass ("late chunking"). A build could have these for free from
the pass that embeds the chunk; here the chunks are encoded again. It scores
``late`` (best late sentence) and ``chunk + late``; ``--late-cache`` keeps them.

A document scores as its best chunk, as in ``evidex eval``. Each arm's gain in
NDCG@10 over the product's (``chunk`` alone, ``chunk + lexical`` fused) comes with a
paired bootstrap 95% interval over the queries.
"""

import argparse
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow.parquet as pq

from evidex.evaluation import paired_interval

DEPTH = 300  # chunks per arm, as `evidex eval` asks of `retrieve`
BASELINES = ("chunk", "chunk + lexical")  # the product's dense arm and its default


def sentence_spans(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """The ``[start, end)`` character spans of every sentence of each text."""
    from algorithms.chunk import paragraphs, sentences

    return [
        [span for paragraph in paragraphs(text) for span in sentences(text, paragraph)]
        for text in texts
    ]


def chunk_sentences(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Every sentence of every text, and the index of the text it came from."""
    found: list[str] = []
    owner: list[int] = []
    for index, (text, spans) in enumerate(zip(texts, sentence_spans(texts), strict=True)):
        for start, end in spans:
            found.append(text[start:end])
            owner.append(index)
    return found, np.asarray(owner, dtype=np.int64)


def pool_spans(
    tokens: np.ndarray, offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
) -> np.ndarray:
    """Unit-norm mean of the token vectors overlapping each character span.

    ``offsets`` are the tokenizer's character offsets of each token row; special
    tokens have empty offsets and belong to no span. A span that no token
    overlaps (cut off by the model's window) gets a zero vector.
    """
    result = np.zeros((len(spans), tokens.shape[1]), dtype=np.float32)
    starts = np.asarray([a for a, _ in offsets])
    ends = np.asarray([z for _, z in offsets])
    for row, (start, end) in enumerate(spans):
        inside = (ends > starts) & (starts < end) & (ends > start)
        if inside.any():
            mean = tokens[inside].mean(axis=0)
            result[row] = mean / np.linalg.norm(mean)  # as the model's Normalize step
    return result


def late_sentence_vectors(
    model: Any, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
) -> np.ndarray:
    """Sentence vectors pooled from each text's token embeddings, in sentence order."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    pooled: list[np.ndarray] = [np.empty(0)] * len(texts)
    for first in range(0, len(order), 64):
        rows = order[first : first + 64]
        batch = [texts[i] for i in rows]
        outputs = model.encode(batch, batch_size=64, output_value=None, convert_to_numpy=False)
        offsets = model.tokenizer(
            batch, return_offsets_mapping=True, truncation=True, max_length=model.max_seq_length
        )["offset_mapping"]
        for row, output, offset in zip(rows, outputs, offsets, strict=True):
            length = int(output["attention_mask"].sum())
            tokens = output["token_embeddings"][:length].float().numpy()
            pooled[row] = pool_spans(tokens, offset, spans[row])
    return np.concatenate(pooled)


def encode_sorted(encode: Callable[[list[str]], np.ndarray], texts: list[str]) -> np.ndarray:
    """Vectors of ``texts`` in input order, encoded shortest first."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    vectors = encode([texts[i] for i in order])
    result = np.empty_like(vectors)
    result[order] = vectors
    return result


def best_per_chunk(similarity: np.ndarray, owner: np.ndarray, n_chunks: int) -> np.ndarray:
    """Each chunk's best sentence similarity (-1 for a chunk without sentences)."""
    best = np.full(n_chunks, -1.0, dtype=np.float32)
    np.maximum.at(best, owner, similarity.astype(np.float32))
    return best


def ranked(scores: np.ndarray, depth: int = DEPTH) -> list[int]:
    """Row indexes of the ``depth`` highest scores, best first (ties by row)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [int(i) for i in order[:depth]]


def gain_text(ndcg: dict[str, float], baseline: dict[str, float]) -> str:
    """Mean per-query gain of ``ndcg`` over ``baseline`` and its paired 95% interval."""
    gains = np.asarray([ndcg[q] - baseline[q] for q in sorted(baseline)])
    low, high = paired_interval(gains)
    return f"{gains.mean():+.4f} [{low:+.4f}, {high:+.4f}]"


def per_query_ndcg(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]
) -> dict[str, float]:
    """trec_eval NDCG@10 of each query of ``run``."""
    from evidex.evaluation import per_query

    return {q: v["ndcg_cut_10"] for q, v in per_query(qrels, run, {"ndcg_cut.10"}).items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--dataset", required=True, help="BEIR directory of the bundle's corpus")
    parser.add_argument("--cache", default=None, help="npz file to keep sentence vectors in")
    parser.add_argument(
        "--late",
        action="store_true",
        help="also score sentence vectors pooled from the chunks' token embeddings "
        "(re-encodes every chunk)",
    )
    parser.add_argument("--late-cache", default=None, help="npz file to keep late vectors in")
    args = parser.parse_args(argv)

    from evidex.evaluation import document_run, load_dataset, score_arm
    from query import open_bundle, retrieve
    from query.fusion import ArmHit, fuse
    from store import bundles
    from store.models import force_offline

    force_offline()
    dataset = load_dataset(args.dataset)
    bundle = open_bundle(args.bundle)
    table = pq.read_table(
        os.path.join(args.bundle, bundles.CHUNKS),
        columns=["chunk_id", "doc_id", "text", "embedding"],
    )
    ids = table.column("chunk_id").to_pylist()
    docs = table.column("doc_id").to_pylist()
    row_of = {chunk: row for row, chunk in enumerate(ids)}
    chunk_vectors = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    chunk_texts = table.column("text").to_pylist()
    model = bundle.model  # the sentence-transformers model the bundle was opened with

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(
            model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True),
            dtype=np.float32,
        )

    texts, owner = chunk_sentences(chunk_texts)
    if args.cache and os.path.exists(args.cache):
        sentence_vectors = np.load(args.cache)["vectors"]
        if len(sentence_vectors) != len(texts):
            parser.error(
                f"{args.cache} holds {len(sentence_vectors)} vectors for {len(texts)} "
                "sentences: it was made for another bundle"
            )
        print(f"{len(texts)} sentences of {len(ids)} chunks, vectors from {args.cache}")
    else:
        start = time.perf_counter()
        sentence_vectors = encode_sorted(encode, texts)
        print(
            f"{len(texts)} sentences of {len(ids)} chunks embedded in "
            f"{time.perf_counter() - start:.0f} s"
        )
        if args.cache:
            np.savez(args.cache, vectors=sentence_vectors)

    late_vectors = None
    if args.late and args.late_cache and os.path.exists(args.late_cache):
        late_vectors = np.load(args.late_cache)["vectors"]
        if len(late_vectors) != len(texts):
            parser.error(f"{args.late_cache} was made for another bundle")
    elif args.late:
        start = time.perf_counter()
        late_vectors = late_sentence_vectors(model, chunk_texts, sentence_spans(chunk_texts))
        print(f"chunks re-encoded and sentences pooled in {time.perf_counter() - start:.0f} s")
        if args.late_cache:
            np.savez(args.late_cache, vectors=late_vectors)

    def run_of(rows: list[int]) -> dict[str, float]:
        return document_run([DocRow(docs[r]) for r in rows])

    arms: tuple[str, ...] = ("chunk", "sentence", "max", "sum", "sum in chunk top 300")
    if late_vectors is not None:
        arms += ("late", "chunk + late")
    runs: dict[str, dict[str, dict[str, float]]] = {
        name: {} for arm in arms for name in (arm, f"{arm} + lexical")
    }
    queries = list(dataset.queries.items())
    query_vectors = encode([text for _, text in queries])
    for (qid, text), query_vector in zip(queries, query_vectors, strict=True):
        lexical = [
            ArmHit(row_of[e.chunk_id], rank, e.score)
            for rank, e in enumerate(
                retrieve(bundle, text, k=DEPTH, arms=("lexical",), depth=DEPTH), start=1
            )
        ]
        chunk = chunk_vectors @ query_vector
        sentence = best_per_chunk(sentence_vectors @ query_vector, owner, len(ids))
        in_top = np.zeros(len(ids), dtype=bool)
        in_top[ranked(chunk)] = True
        scores = {
            "chunk": chunk,
            "sentence": sentence,
            "max": np.maximum(chunk, sentence),
            "sum": chunk + sentence,
            "sum in chunk top 300": np.where(in_top, chunk + sentence, -np.inf),
        }
        if late_vectors is not None:
            late = best_per_chunk(late_vectors @ query_vector, owner, len(ids))
            scores |= {"late": late, "chunk + late": chunk + late}
        for arm, score in scores.items():
            rows = ranked(score)
            runs[arm][qid] = run_of(rows)
            dense = [ArmHit(row, rank, float(score[row])) for rank, row in enumerate(rows, 1)]
            fused = fuse(dense, lexical, chunk_ids=ids, k=DEPTH, n_eligible=len(ids))
            runs[f"{arm} + lexical"][qid] = run_of([f.row for f in fused])
    baselines = {name: per_query_ndcg(dataset.qrels, runs[name]) for name in BASELINES}
    print(
        f"{'arm':<32}{'NDCG@10':>10}{'Recall@100':>12}{'MRR@10':>10}"
        "   gain over the product's arm [95% CI]"
    )
    for name, run in runs.items():
        scores_of = score_arm(dataset, run)
        line = (
            f"{name:<32}{scores_of['ndcg@10']:>10.4f}{scores_of['recall@100']:>12.4f}"
            f"{scores_of['mrr@10']:>10.4f}"
        )
        if name not in BASELINES:
            baseline = baselines[BASELINES[1] if name.endswith("+ lexical") else BASELINES[0]]
            line += "   " + gain_text(per_query_ndcg(dataset.qrels, run), baseline)
        print(line)
    return 0


class DocRow(NamedTuple):
    """What ``document_run`` reads of a piece of evidence."""

    doc_id: str


if __name__ == "__main__":
    raise SystemExit(main())
