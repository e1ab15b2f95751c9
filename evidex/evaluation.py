"""``evidex eval``: retrieval quality of every arm on a BEIR-format dataset, side by side.

Given ``DIR`` with ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``
(and optionally ``questions.jsonl`` with multi-hop supporting ids or titles), it builds
or reuses (by input fingerprint and config hash) a bundle of the corpus, runs
every query through each arm, turns chunk rankings into document rankings (a
document scores as its best chunk), and scores them with trec_eval
(``pytrec-eval-terrier``): NDCG@10, Recall@100, MRR@10, and for multi-hop sets
recall@2 and recall@5 of the supporting documents and the share of questions whose
supporting documents are *all* in the top k.
"""

import csv
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from store import bundles
from store.config import BuildConfig, IngestConfig
from transforms.ingest import IngestError, parse_jsonl_line

logger = logging.getLogger(__name__)

DOC_DEPTH = 100
CHUNK_DEPTH = 300
MULTIHOP_KS = (5, 8, 10, 20)
RECALL_KS = (2, 5)
"""recall@k of multi-hop sets: the share of a question's supporting documents in the top k
(HippoRAG's measure), averaged over questions."""


@dataclass(frozen=True)
class Dataset:
    """A BEIR-format dataset read from disk."""

    name: str
    corpus: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    supporting: dict[str, set[str]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    """Each multi-hop question's ``type`` (HotpotQA: ``bridge``, ``comparison``) when
    ``questions.jsonl`` gives one."""


def load_dataset(directory: str, *, split: str = "test") -> Dataset:
    """Read queries, qrels and (if present) multi-hop questions of a BEIR directory.

    Raises:
        FileNotFoundError: a required file is missing, naming it.
    """
    # Absolute, because the build's config hash includes the input path as given: the
    # same corpus reached from another working directory must find the same bundle.
    corpus = os.path.abspath(os.path.join(directory, "corpus.jsonl"))
    qrels_file = os.path.join(directory, "qrels", f"{split}.tsv")
    for required in (corpus, os.path.join(directory, "queries.jsonl"), qrels_file):
        if not os.path.isfile(required):
            raise FileNotFoundError(f"BEIR dataset file missing: {required}")
    qrels: dict[str, dict[str, int]] = {}
    with open(qrels_file, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = {}
    with open(os.path.join(directory, "queries.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["_id"] in qrels:
                queries[record["_id"]] = record["text"]
    supporting = _supporting(directory, corpus)
    return Dataset(
        os.path.basename(os.path.normpath(directory)),
        corpus,
        queries,
        qrels,
        supporting,
        _types(directory),
    )


def _types(directory: str) -> dict[str, str]:
    """Each question's ``type`` from ``questions.jsonl`` (none when absent)."""
    path = os.path.join(directory, "questions.jsonl")
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return {r["_id"]: str(r["type"]) for r in records if r.get("type")}


def _supporting(directory: str, corpus: str) -> dict[str, set[str]]:
    """Each multi-hop question's supporting documents, from ``questions.jsonl``: its
    ``supporting_ids`` (corpus ids; MuSiQue, whose titles repeat) when present, else its
    ``supporting_titles`` mapped to the first document of each title (HotpotQA).

    Raises:
        ValueError: a question names a supporting id the corpus does not hold.
    """
    path = os.path.join(directory, "questions.jsonl")
    if not os.path.isfile(path):
        return {}
    by_title: dict[str, str] = {}
    ids_in_corpus: set[str] = set()
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            by_title.setdefault(record.get("title", ""), record["_id"])
            ids_in_corpus.add(record["_id"])
    result = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if "supporting_ids" in record:
                ids = set(record["supporting_ids"])
                missing = sorted(ids - ids_in_corpus)
                if missing:
                    raise ValueError(
                        f"{path}: question {record['_id']} names supporting ids the corpus "
                        f"lacks: {', '.join(missing)}"
                    )
            else:
                titles = record.get("supporting_titles", [])
                ids = {by_title[t] for t in titles if t in by_title}
            if ids:
                result[record["_id"]] = ids
    return result


def input_fingerprint(corpus: str, config: IngestConfig) -> str:
    """The fingerprint a build of ``corpus`` would record, computed without building."""
    pairs = []
    with open(corpus, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                doc = parse_jsonl_line(line, source_uri=f"{corpus}#L{number}", config=config)
            except IngestError:
                continue
            pairs.append((doc.doc_id, doc.revision))
    return bundles.fingerprint_pairs(pairs)


def find_or_build(dataset: Dataset, *, root: str, build_args: Sequence[str]) -> str:
    """Path of a bundle of the dataset's corpus under ``root``, building one if none matches."""
    from pipelines.build_index import EvidexBuildOptions, config_from_options, run

    argv = ["--input", dataset.corpus, "--root", root, "--title_in_text", *build_args]
    from apache_beam.options.pipeline_options import PipelineOptions

    config: BuildConfig = config_from_options(PipelineOptions(argv).view_as(EvidexBuildOptions))
    wanted = (input_fingerprint(dataset.corpus, config.ingest), config.config_hash())
    for bundle_id in reversed(bundles.list_bundles(root)):
        manifest = bundles.read_manifest(bundles.bundle_path(root, bundle_id))
        if (manifest.input_fingerprint, manifest.config_hash) == wanted:
            logger.info("reusing bundle %s (same input fingerprint and config)", bundle_id)
            return bundles.bundle_path(root, bundle_id)
    logger.info("no matching bundle under %s: building one", root)
    return run(argv).path


def document_run(evidence: Sequence[Any], depth: int = DOC_DEPTH) -> dict[str, float]:
    """Chunk evidence -> document scores: each document ranks by its best chunk."""
    best: dict[str, float] = {}
    for position, e in enumerate(evidence):
        best.setdefault(e.doc_id, float(len(evidence) - position))
    return dict(list(best.items())[:depth])


def _arms(bundle: Any) -> dict[str, Callable[[str], list[Any]]]:
    from query import answer, retrieve

    def fused(weight: float) -> Callable[[str], list[Any]]:
        return lambda q: retrieve(bundle, q, k=CHUNK_DEPTH, lexical_weight=weight)

    return {
        "dense": lambda q: retrieve(bundle, q, k=CHUNK_DEPTH, arms=("dense",)),
        "lexical": lambda q: retrieve(
            bundle, q, k=CHUNK_DEPTH, arms=("lexical",), depth=CHUNK_DEPTH
        ),
        "fusion_w1.0": fused(1.0),
        "fusion_w0.1": fused(0.1),
        "router": lambda q: list(answer(bundle, q, k=CHUNK_DEPTH).evidence),
        "router+graph": lambda q: list(
            answer(bundle, q, k=CHUNK_DEPTH, extra_surfaces=("graph",)).evidence
        ),
        "graph": lambda q: _walk_alone(bundle, q),
    }


class _Ranked(NamedTuple):
    doc_id: str


def _walk_alone(bundle: Any, query: str) -> list[Any]:
    """The graph arm's own ranking (query.graph), on every query: what the walk finds
    with no other arm fused in."""
    from query.answers import WALK_DENSE_DEPTH, walk_spread
    from query.graph import chunk_titles, graph_arm, walk_graph
    from query.retrieval import dense_arm

    layer = bundle.knowledge
    graph = walk_graph(
        layer, bundle.chunk_ids, bundle.row_of_chunk, None, lambda: chunk_titles(bundle)
    )
    dense = dense_arm(bundle, bundle.embed(query), WALK_DENSE_DEPTH, None)
    walk = graph_arm(layer, graph, query, dense, CHUNK_DEPTH, walk_spread(bundle, None))
    return [_Ranked(bundle.chunk_doc_ids[h.row]) for h in walk.hits]


def per_query(
    qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, float]], measures: set[str]
) -> dict[str, dict[str, float]]:
    """trec_eval's ``measures`` for each query of ``runs`` that ``qrels`` judges."""
    import pytrec_eval

    judged = {q: rel for q, rel in qrels.items() if q in runs}
    return pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(runs)


def score_arm(dataset: Dataset, runs: dict[str, dict[str, float]]) -> dict[str, float]:
    """trec_eval NDCG@10, Recall@100, MRR@10 (and, for multi-hop sets, recall@2 and @5 of
    the supporting documents and the share of questions with all of them in the top k)."""
    found = per_query(dataset.qrels, runs, {"ndcg_cut.10", "recall.100"})
    top10 = {q: dict(sorted(r.items(), key=lambda kv: -kv[1])[:10]) for q, r in runs.items()}
    mrr = per_query(dataset.qrels, top10, {"recip_rank"})
    scores = {
        "ndcg@10": float(np.mean([v["ndcg_cut_10"] for v in found.values()])),
        "recall@100": float(np.mean([v["recall_100"] for v in found.values()])),
        "mrr@10": float(np.mean([v["recip_rank"] for v in mrr.values()])),
    }
    if dataset.supporting:
        ranked = {
            q: sorted(r, key=lambda d: -r[d]) for q, r in runs.items() if q in dataset.supporting
        }
        for k in RECALL_KS:
            shares = [
                len(dataset.supporting[q] & set(docs[:k])) / len(dataset.supporting[q])
                for q, docs in ranked.items()
            ]
            scores[f"recall@{k}"] = float(np.mean(shares)) if shares else float("nan")
        for k in MULTIHOP_KS:
            hits = [dataset.supporting[q] <= set(docs[:k]) for q, docs in ranked.items()]
            scores[f"all_supporting@{k}"] = float(np.mean(hits)) if hits else float("nan")
    return {name: round(value, 4) for name, value in scores.items()}


def paired_interval(
    gains: np.ndarray, *, samples: int = 10_000, seed: int = 7
) -> tuple[float, float]:
    """95% paired bootstrap interval of the mean of per-query ``gains``."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(gains), size=(samples, len(gains)))
    means = gains[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def per_query_scores(dataset: Dataset, runs: dict[str, dict[str, float]]) -> dict[str, np.ndarray]:
    """Per-query NDCG@10 (and, for multi-hop sets, recall@5 and all supporting in the top
    8), each an array in query-id order over the queries of ``runs`` that are judged."""
    found = per_query(dataset.qrels, runs, {"ndcg_cut.10"})
    judged = sorted(found)
    scores = {"ndcg@10": np.asarray([found[q]["ndcg_cut_10"] for q in judged])}
    if dataset.supporting:
        judged = [q for q in judged if q in dataset.supporting]
        ranked = {q: sorted(runs[q], key=lambda d: -runs[q][d]) for q in judged}
        scores["recall@5"] = np.asarray(
            [len(dataset.supporting[q] & set(ranked[q][:5])) / len(dataset.supporting[q])
             for q in judged]
        )  # fmt: skip
        scores["all_supporting@8"] = np.asarray(
            [float(dataset.supporting[q] <= set(ranked[q][:8])) for q in judged]
        )
    return scores


def paired_gains(
    dataset: Dataset, runs: dict[str, dict[str, float]], baseline: dict[str, dict[str, float]]
) -> dict[str, dict[str, Any]]:
    """Mean per-query gain of ``runs`` over ``baseline`` with its paired bootstrap 95%
    interval, per measure of :func:`per_query_scores`."""
    ours, theirs = per_query_scores(dataset, runs), per_query_scores(dataset, baseline)
    result = {}
    for measure, values in ours.items():
        gains = values - theirs[measure]
        low, high = paired_interval(gains)
        result[measure] = {
            "gain": round(float(gains.mean()), 4),
            "interval": [round(low, 4), round(high, 4)],
        }
    return result


def evaluate(dataset: Dataset, bundle: Any, *, limit: int | None = None) -> dict[str, Any]:
    """Run every arm over the dataset's queries; return scores and latencies per arm."""
    query_items = (
        sorted(dataset.queries.items())[:limit] if limit else sorted(dataset.queries.items())
    )
    results: dict[str, Any] = {}
    all_runs: dict[str, dict[str, dict[str, float]]] = {}
    arms = _arms(bundle)
    if bundle.knowledge is None:
        for name in ("router+graph", "graph"):
            arms.pop(name)
            results[name] = {"skipped": "bundle has no knowledge layer"}
    for name, arm in arms.items():
        runs, latencies = {}, []
        for done, (qid, text) in enumerate(query_items, start=1):
            start = time.perf_counter()
            evidence = arm(text)
            latencies.append((time.perf_counter() - start) * 1000)
            runs[qid] = document_run(evidence)
            if done % 100 == 0:
                logger.info("%s: %d/%d queries", name, done, len(query_items))
        all_runs[name] = runs
        results[name] = {
            **score_arm(dataset, runs),
            "p50_ms": round(float(np.percentile(latencies, 50)), 1),
            "p95_ms": round(float(np.percentile(latencies, 95)), 1),
        }
    return {
        "dataset": dataset.name,
        "queries": len(query_items),
        "bundle_id": bundle.bundle_id,
        "arms": results,
        "by_type": scores_by_type(dataset, all_runs),
        "router_vs_fusion": paired_gains(dataset, all_runs["router"], all_runs["fusion_w1.0"]),
    }


def scores_by_type(
    dataset: Dataset, all_runs: dict[str, dict[str, dict[str, float]]]
) -> dict[str, dict[str, Any]]:
    """Every arm's scores on each question type's own questions (HotpotQA's 22 comparison
    questions of train100 apart from its bridge questions), with the question count."""
    result: dict[str, dict[str, Any]] = {}
    for kind in sorted(set(dataset.types.values())):
        asked = {q for q, t in dataset.types.items() if t == kind}
        arms = {
            name: score_arm(dataset, {q: r for q, r in runs.items() if q in asked})
            for name, runs in all_runs.items()
            if any(q in asked for q in runs)
        }
        if arms:
            count = len(asked & set(next(iter(all_runs.values()))))
            result[kind] = {"questions": count, "arms": arms}
    return result


def format_table(report: dict[str, Any]) -> str:
    """A fixed-width table of every arm's figures."""
    arms = {n: r for n, r in report["arms"].items() if "skipped" not in r}
    columns = [c for c in next(iter(arms.values())) if c not in ("p50_ms", "p95_ms")]
    columns += ["p50_ms", "p95_ms"]
    lines = [
        f"{report['dataset']}: {report['queries']} queries, bundle {report['bundle_id']}",
        f"{'arm':<14}" + "".join(f"{c:>18}" for c in columns),
    ]
    for name, row in arms.items():
        lines.append(f"{name:<14}" + "".join(f"{row[c]:>18}" for c in columns))
    for name, row in report["arms"].items():
        if "skipped" in row:
            lines.append(f"{name:<14}  skipped: {row['skipped']}")
    for kind, found in report.get("by_type", {}).items():
        lines.append(f"type {kind} ({found['questions']} questions):")
        for name, row in found["arms"].items():
            lines.append(f"  {name:<12}" + "".join(f"{row.get(c, ''):>18}" for c in columns))
    gains = report.get("router_vs_fusion", {})
    if gains:
        lines.append(
            "router - fusion_w1.0, mean per-query gain [paired bootstrap 95% interval]: "
            + "; ".join(
                f"{m} {g['gain']:+.4f} [{g['interval'][0]:+.4f}, {g['interval'][1]:+.4f}]"
                for m, g in gains.items()
            )
        )
    return "\n".join(lines)


def plot(report: dict[str, Any], path: str) -> None:
    """A PNG bar chart of each arm's quality metrics."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = {n: r for n, r in report["arms"].items() if "skipped" not in r}
    metrics = [m for m in next(iter(arms.values())) if not m.endswith("_ms")]
    figure, axis = plt.subplots(figsize=(2 + 1.6 * len(metrics), 4.5))
    width = 0.8 / len(arms)
    for i, (name, row) in enumerate(arms.items()):
        positions = np.arange(len(metrics)) + i * width
        axis.bar(positions, [row[m] for m in metrics], width, label=name)
    axis.set_xticks(np.arange(len(metrics)) + 0.4 - width / 2, metrics)
    axis.set_ylim(0, 1)
    axis.set_title(f"evidex eval: {report['dataset']} ({report['queries']} queries)")
    axis.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
