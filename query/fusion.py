"""Reciprocal-rank fusion of the retrieval arms, with the reservation invariant.

Contract:
- each arm ranks the *eligible universe* (rows the caller may see) on its own;
  a row's fused score is ``sum(weight_arm / (RRF_K + rank_arm))`` over the arms
  that rank it within ``depth``, so it depends only on its own ranks, never on
  which other rows happen to be candidates;
- the lexical arm is cut at the same fixed ``depth`` as the dense arm (no cut
  that depends on pool size); the lexical weight is the only tuning knob;
- knowledge arms (chunks reached through relation summaries, community reports
  or graph expansion) are candidate generators only: a row they propose joins
  the list even when no chunk arm ranks it, but it is scored by the chunk arms
  alone (0 when neither ranks it). Similarity of a derived row or graph
  proximity is discovery, not evidence, so it never lifts a chunk above one the
  chunk arms rank higher (measured: as a weight-1 arm each, they lowered NDCG@10
  on SciFact and on HotpotQA, docs/benchmarks.md);
- a knowledge arm given a weight in ``weights`` (the graph arm's walk, on the
  routes that call for it: :mod:`query.graph`) is scored like a chunk arm:
  ``weight / (RRF_K + rank)``;
- reservation: the dense arm's top ``min(10, n)`` rows are reserved before any
  floor; when the final list is shorter than ``k``, reserved rows are appended
  in dense order and marked ``fallback``;
- total order: fused score (descending), then the best knowledge-arm rank
  (ascending, rows no knowledge arm proposes last), then dense similarity
  (descending), then chunk id (ascending).
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

RRF_K = 60
RESERVED = 10
SCORE_DECIMALS = 6


class ArmHit(NamedTuple):
    """One row as ranked by one arm (rank 1 is best)."""

    row: int
    rank: int
    score: float


class Fused(NamedTuple):
    """One fused row with its provenance."""

    row: int
    score: float
    dense_rank: int | None
    dense_score: float | None
    lexical_rank: int | None
    lexical_score: float | None
    fallback: bool
    extra_ranks: tuple[tuple[str, int], ...] = ()


def fuse(
    dense: Sequence[ArmHit],
    lexical: Sequence[ArmHit],
    *,
    chunk_ids: Sequence[str],
    k: int,
    n_eligible: int,
    lexical_weight: float = 1.0,
    min_similarity: float | None = None,
    extra: Mapping[str, Sequence[ArmHit]] | None = None,
    weights: Mapping[str, float] | None = None,
) -> list[Fused]:
    """Fuse the ranked arms into at most ``k`` rows.

    Args:
        dense: dense hits, best first, ranks 1..depth over the eligible universe.
        lexical: lexical hits, best first (rows with a positive score only).
        chunk_ids: chunk id of every row, for the tie-break.
        k: how many rows to return.
        n_eligible: size of the eligible universe (for the reservation size).
        lexical_weight: weight of the lexical arm (dense weight is 1).
        min_similarity: optional admission floor on dense similarity; rows below
            it (or without a dense score) are dropped before reservation applies.
        extra: knowledge arms by name (``relations``, ``communities``, ``graph``,
            ``walk``): candidates and a tie-break, and a score term only when
            ``weights`` gives them one.
        weights: score weights of ``extra`` arms (absent: 0).

    Raises:
        ValueError: ``k`` < 1, or a negative lexical or arm weight.
    """
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    if lexical_weight < 0:
        raise ValueError(f"lexical_weight must be >= 0, got {lexical_weight}")
    weights = dict(weights or {})
    negative = sorted(name for name, w in weights.items() if w < 0)
    if negative:
        raise ValueError(f"arm weights must be >= 0: {', '.join(negative)}")
    by_dense = {h.row: h for h in dense}
    by_lexical = {h.row: h for h in lexical} if lexical_weight > 0 else {}
    by_extra = {name: {h.row: h for h in hits} for name, hits in sorted((extra or {}).items())}
    fused = []
    rows = set(by_dense) | set(by_lexical)
    for hits in by_extra.values():
        rows |= set(hits)
    for row in rows:
        d, lx = by_dense.get(row), by_lexical.get(row)
        extra_ranks = tuple(
            (name, hits[row].rank) for name, hits in by_extra.items() if row in hits
        )
        score = (1.0 / (RRF_K + d.rank) if d else 0.0) + (
            lexical_weight / (RRF_K + lx.rank) if lx else 0.0
        )
        score += sum(weights.get(name, 0.0) / (RRF_K + rank) for name, rank in extra_ranks)
        fused.append(
            Fused(
                row,
                round(score, SCORE_DECIMALS),
                d.rank if d else None,
                d.score if d else None,
                lx.rank if lx else None,
                lx.score if lx else None,
                False,
                extra_ranks,
            )
        )
    fused.sort(key=lambda f: _order(f, chunk_ids))
    if min_similarity is not None:
        fused = [f for f in fused if f.dense_score is not None and f.dense_score >= min_similarity]
    result = fused[:k]
    if len(result) < k:
        present = {f.row for f in result}
        for hit in sorted(dense, key=lambda h: h.rank)[: min(RESERVED, n_eligible)]:
            if len(result) >= k:
                break
            if hit.row not in present:
                lx = by_lexical.get(hit.row)
                result.append(
                    Fused(
                        hit.row,
                        round(1.0 / (RRF_K + hit.rank), SCORE_DECIMALS),
                        hit.rank,
                        hit.score,
                        lx.rank if lx else None,
                        lx.score if lx else None,
                        True,
                    )
                )
                present.add(hit.row)
    return result


def _order(f: Fused, chunk_ids: Sequence[str]) -> tuple[float, float, float, str]:
    dense = f.dense_score if f.dense_score is not None else float("-inf")
    proposed = min((rank for _, rank in f.extra_ranks), default=float("inf"))
    return (-f.score, proposed, -round(dense, SCORE_DECIMALS), chunk_ids[f.row])
