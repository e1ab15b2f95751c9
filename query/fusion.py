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
  (descending), then chunk id (ascending);
- lead (the routes where one arm is the reason for the route: the walk's): the arm named
  by ``lead`` keeps its places and the chunk arms' own fusion (dense + lexical, the
  ranking plain fusion would give) keeps a share of them: a row ranked ``r`` by the lead
  arm and ``c`` by the chunk arms is ordered by ``min(r, lead_ratio * c)`` (the lead arm
  first on a tie, then the total order). So the lead arm's top ``j`` rows are in the first
  ``j + j / lead_ratio`` places and the chunk arms' top ``j`` in the first
  ``j * (lead_ratio + 1)``: the list can trail neither arm by more than that, whatever the
  weights; and where both chunk arms confirm the chunk fusion's top row (each ranks it in
  its top ``CONFIRMED``), that row keeps the first place (the lead arm's top ``j`` then in
  the first ``j + j / lead_ratio + 1``);
- kept places (an arm weighted but not leading: the walk where it does not bridge from a
  named thing, issue 57): the chunk arms' own top ``KEPT`` rows keep their places
  against it: the chunk fusion's ``c``-th row (``c`` <= ``KEPT``) is placed no later than
  the weighted order's ``c``-th, so its top row stays first and a route wrongly given the
  walk costs at most what the places below ``KEPT`` cost;
- slots (the reservation applied per named thing, not per arm): each ``Slot`` names a
  thing the query names and the rows that are its passages; the best of them in the
  total order above (or, when no arm ranks any, the slot's first row) takes one of the
  first places, before anything else fills the rest, and carries the slot's label in
  ``holds``. Slotted rows keep the total order among themselves.
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

RRF_K = 60
RESERVED = 10
SCORE_DECIMALS = 6
KEPT = 2
"""Plain fusion's top rows that keep their places against a weighted arm that does not
lead (issue 57: what a question wrongly sent to the walk may cost)."""
CONFIRMED = 2
"""A row both chunk arms rank in their top ``CONFIRMED`` is confirmed by both; plain
fusion's top row, so confirmed, keeps the first place even where another arm leads."""


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
    holds: str | None = None


class Slot(NamedTuple):
    """A reserved place for one thing the query names: ``label`` (e.g. ``"entity
    'Christopher Nolan'"``) and its passages, ``rows``, best first by the caller's own
    order (used only when no arm ranks any of them)."""

    label: str
    rows: tuple[int, ...]


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
    slots: Sequence[Slot] = (),
    lead: str | None = None,
    lead_ratio: float = 2.0,
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
        slots: places reserved for the things the query names (see the module contract);
            at most ``k`` of them are honoured, in the order given.
        lead: the ``extra`` arm that leads (see the module contract), or ``None``.
        lead_ratio: places the lead arm gets per place kept for the chunk arms' fusion.

    Raises:
        ValueError: ``k`` < 1, or a negative lexical or arm weight.
    """
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    if lead_ratio <= 0:
        raise ValueError(f"lead_ratio must be > 0, got {lead_ratio}")
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
    leader = by_extra.get(lead) if lead is not None else None
    weighted = any(weights.get(name, 0.0) > 0 and hits for name, hits in by_extra.items())
    if leader or weighted:
        chunks = _chunk_order(fused, by_dense, by_lexical, lexical_weight, chunk_ids)
        if leader:
            kept = _confirmed(chunks, by_dense, by_lexical)
            fused = _led(fused, leader, lead_ratio, chunks, kept)
        else:
            fused = _kept(fused, chunks)
    if min_similarity is not None:
        fused = [f for f in fused if f.dense_score is not None and f.dense_score >= min_similarity]
    if slots:
        fused = _fill_slots(fused, slots[:k], by_dense, by_lexical)
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


def _chunk_order(
    fused: Sequence[Fused],
    by_dense: Mapping[int, ArmHit],
    by_lexical: Mapping[int, ArmHit],
    lexical_weight: float,
    chunk_ids: Sequence[str],
) -> dict[int, int]:
    """Each row's rank in the chunk arms' own fusion (what plain fusion would give: dense +
    lexical scores, then dense similarity, then chunk id); rows neither ranks are left out."""
    ranked = []
    for f in fused:
        d, lx = by_dense.get(f.row), by_lexical.get(f.row)
        if d is None and lx is None:
            continue
        score = round(
            (1.0 / (RRF_K + d.rank) if d else 0.0)
            + (lexical_weight / (RRF_K + lx.rank) if lx else 0.0),
            SCORE_DECIMALS,
        )
        dense = round(d.score, SCORE_DECIMALS) if d else float("-inf")
        ranked.append((-score, -dense, chunk_ids[f.row], f.row))
    return {row: rank for rank, (*_, row) in enumerate(sorted(ranked), start=1)}


def _confirmed(
    chunks: Mapping[int, int], by_dense: Mapping[int, ArmHit], by_lexical: Mapping[int, ArmHit]
) -> set[int]:
    """The chunk fusion's top row if both chunk arms rank it in their top ``CONFIRMED``."""
    top = [row for row, rank in chunks.items() if rank == 1]
    return {
        row
        for row in top
        if row in by_dense
        and row in by_lexical
        and by_dense[row].rank <= CONFIRMED
        and by_lexical[row].rank <= CONFIRMED
    }


def _led(
    fused: list[Fused],
    leader: Mapping[int, ArmHit],
    ratio: float,
    chunks: Mapping[int, int],
    kept: set[int],
) -> list[Fused]:
    """``fused`` (in the total order) reordered by ``min(lead rank, ratio * chunk rank)``,
    the lead arm first on a tie, then the total order; a ``kept`` row is placed by its own
    chunk rank, ahead of both on a tie."""
    inf = float("inf")

    def key(i: int) -> tuple[float, int, int]:
        row = fused[i].row
        hit = leader.get(row)
        places = [(float(hit.rank) if hit else inf, 1)]
        places.append((ratio * chunks[row] if row in chunks else inf, 2))
        if row in kept:
            places.append((float(chunks[row]), 0))
        return (*min(places), i)

    return [fused[i] for i in sorted(range(len(fused)), key=key)]


def _kept(fused: list[Fused], chunks: Mapping[int, int]) -> list[Fused]:
    """``fused`` (in the total order, a weighted arm among its terms) with the chunk
    fusion's top ``KEPT`` rows kept in place: the ``c``-th of them is placed by ``c``,
    ahead of the total order's ``c``-th row on a tie."""

    def key(i: int) -> tuple[int, int, int]:
        rank = chunks.get(fused[i].row, KEPT + 1)
        return (rank, 0, i) if rank <= KEPT and rank <= i + 1 else (i + 1, 1, i)

    return [fused[i] for i in sorted(range(len(fused)), key=key)]


def _fill_slots(
    fused: list[Fused],
    slots: Sequence[Slot],
    by_dense: Mapping[int, ArmHit],
    by_lexical: Mapping[int, ArmHit],
) -> list[Fused]:
    """``fused`` with each slot's best row moved ahead of every unslotted row."""
    place = {f.row: i for i, f in enumerate(fused)}
    held: dict[int, Fused] = {}
    for slot in slots:
        free = [r for r in slot.rows if r not in held]
        if not free:
            continue
        ranked = [r for r in free if r in place]
        if ranked:
            row = min(ranked, key=place.__getitem__)
            held[row] = fused[place[row]]._replace(holds=slot.label)
            continue
        row = free[0]
        d, lx = by_dense.get(row), by_lexical.get(row)
        held[row] = Fused(
            row,
            0.0,
            d.rank if d else None,
            d.score if d else None,
            lx.rank if lx else None,
            lx.score if lx else None,
            False,
            holds=slot.label,
        )
    first = sorted(held.values(), key=lambda f: place.get(f.row, len(fused)))
    return first + [f for f in fused if f.row not in held]


def _order(f: Fused, chunk_ids: Sequence[str]) -> tuple[float, float, float, str]:
    dense = f.dense_score if f.dense_score is not None else float("-inf")
    proposed = min((rank for _, rank in f.extra_ranks), default=float("inf"))
    return (-f.score, proposed, -round(dense, SCORE_DECIMALS), chunk_ids[f.row])
