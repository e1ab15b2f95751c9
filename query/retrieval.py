"""Retrieval over a loaded bundle: dense and lexical arms, fused, returning quotable evidence.

Access filtering happens inside each arm *before* its top-k: when the caller
may not see every chunk, the dense arm searches exactly over the visible rows
and the lexical arm's scores are masked to them, so nothing invisible is ever
ranked and results are never emptied by post-filtering.
"""

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from query.bundle import LoadedBundle
from query.fusion import SCORE_DECIMALS, ArmHit, Fused, Slot, fuse
from store.config import ACCESS_CLASSES, EXACT_SEARCH_MAX_ROWS, SOURCE_ROLES

DEFAULT_DEPTH = 100


class Evidence(NamedTuple):
    """One quotable piece of evidence: ``text == document.text[start:end]``."""

    rank: int
    score: float
    chunk_id: str
    doc_id: str
    title: str
    revision: str
    start: int
    end: int
    text: str
    content_sha256: str
    access_class: str
    source_role: str
    valid_from: str | None
    valid_to: str | None
    arms: tuple[str, ...]
    dense_rank: int | None
    dense_score: float | None
    lexical_rank: int | None
    lexical_score: float | None
    fallback: bool
    heading_path: str = ""
    page_start: int | None = None
    page_end: int | None = None
    rerank_score: float | None = None
    walk_rank: int | None = None
    source_uri: str = ""
    """Where the document was last read from (a file, or a JSONL record's ``file#L<n>``)."""
    holds: str | None = None
    """The named thing whose reserved place this item holds (:class:`query.fusion.Slot`)."""


def visible_rows(
    bundle: LoadedBundle, access: Iterable[str] | None, roles: Iterable[str] | None = None
) -> np.ndarray | None:
    """Row indices the caller may see, or ``None`` when every row is visible.

    Args:
        bundle: the bundle.
        access: access classes the caller may see (``None``: every class).
        roles: source roles whose documents the caller may see (``None``: every role).
    """
    found = []
    if access is not None:
        found.append(_allowed_rows(bundle.rows_of_class(), access))
    if roles is not None:
        found.append(_allowed_rows(bundle.rows_of_role(), roles))
    limits = [rows for rows in found if rows is not None]
    if not limits:
        return None
    if len(limits) == 1:
        return limits[0]
    return np.intersect1d(limits[0], limits[1], assume_unique=True)


def _allowed_rows(rows_of: dict[str, np.ndarray], allowed: Iterable[str]) -> np.ndarray | None:
    """The rows of the ``allowed`` groups (``None`` when that is every group present)."""
    wanted = set(allowed)
    if set(rows_of) <= wanted:
        return None
    visible = [rows for name, rows in rows_of.items() if name in wanted]
    return np.sort(np.concatenate(visible)) if visible else np.empty(0, dtype=np.intp)


def dense_arm(
    bundle: LoadedBundle,
    vector: np.ndarray,
    depth: int,
    rows: np.ndarray | None,
    *,
    exact_max_rows: int = EXACT_SEARCH_MAX_ROWS,
) -> list[ArmHit]:
    """Top ``depth`` visible rows by cosine similarity, best first.

    Everyone-visible: the bundle's HNSW index. Restricted: each visible access class
    is searched on its own — exactly when it has at most ``exact_max_rows`` rows, no
    partition file, or only some of its rows are visible (a caller limited to some
    source roles), else in its own HNSW partition (``chunks.<class>.usearch``) —
    and the per-class lists are merged by score. No invisible row is ever a candidate.
    """
    if rows is None:
        scored = _hnsw(bundle, bundle.index, vector, min(depth, len(bundle.keys)))
    else:
        scored = []
        classes = bundle.access_classes[rows]
        for access_class in sorted(set(classes.tolist())):
            class_rows = rows[classes == access_class]
            partition = bundle.partitions.get(access_class)
            whole = len(class_rows) == len(bundle.rows_of_class().get(access_class, ()))
            if partition is not None and whole and len(class_rows) > exact_max_rows:
                scored += _hnsw(bundle, partition, vector, min(depth, len(class_rows)))
            else:
                scored += _exact(bundle, vector, depth, class_rows)
    scored.sort(key=lambda sr: (-sr[0], bundle.chunk_ids[sr[1]]))
    return [ArmHit(row, rank, score) for rank, (score, row) in enumerate(scored[:depth], start=1)]


def _hnsw(
    bundle: LoadedBundle, index: Any, vector: np.ndarray, count: int
) -> list[tuple[float, int]]:
    if count <= 0:
        return []
    matches = index.search(vector, count)
    return [
        (round(1.0 - float(d), SCORE_DECIMALS), bundle.row_of_key(int(key)))
        for key, d in zip(matches.keys, matches.distances, strict=True)
    ]


def _exact(
    bundle: LoadedBundle, vector: np.ndarray, depth: int, rows: np.ndarray
) -> list[tuple[float, int]]:
    if len(rows) == 0:
        return []
    sims = np.round(bundle.vectors()[rows] @ vector, SCORE_DECIMALS)
    top = np.lexsort((rows, -sims))[:depth]
    return [(float(sims[i]), int(rows[i])) for i in top]


def lexical_arm(
    bundle: LoadedBundle, query: str, depth: int, rows: np.ndarray | None
) -> list[ArmHit]:
    """Top ``depth`` visible rows with a positive BM25 score, best first."""
    if bundle.lexical is None:
        return []
    scores = bundle.lexical.scores(query)
    if rows is not None:
        masked = np.zeros_like(scores)
        masked[rows] = scores[rows]
        scores = masked
    positive = np.flatnonzero(scores > 0)
    if len(positive) == 0:
        return []
    rounded = np.round(scores[positive].astype(np.float64), SCORE_DECIMALS)
    # Rows are stored in chunk-id order, so the row index is the chunk-id tie-break.
    order = np.lexsort((positive, -rounded))[:depth]
    return [
        ArmHit(int(positive[i]), rank, float(rounded[i])) for rank, i in enumerate(order, start=1)
    ]


def _evidence(bundle: LoadedBundle, rank: int, f: Fused) -> Evidence:
    doc = bundle.documents[bundle.chunk_doc_ids[f.row]]
    start, end = int(bundle.starts[f.row]), int(bundle.ends[f.row])
    text = doc["text"][start:end]
    arms = tuple(a for a, r in (("dense", f.dense_rank), ("lexical", f.lexical_rank)) if r)
    arms += tuple(name for name, _ in f.extra_ranks)
    return Evidence(
        rank=rank,
        score=f.score,
        chunk_id=bundle.chunk_ids[f.row],
        doc_id=doc["doc_id"],
        title=doc["title"],
        revision=doc["revision"],
        start=start,
        end=end,
        text=text,
        content_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        access_class=str(bundle.access_classes[f.row]),
        source_role=doc["source_role"],
        valid_from=doc.get("valid_from"),
        valid_to=doc.get("valid_to"),
        arms=arms,
        dense_rank=f.dense_rank,
        dense_score=f.dense_score,
        lexical_rank=f.lexical_rank,
        lexical_score=f.lexical_score,
        fallback=f.fallback,
        heading_path=bundle.heading_paths[f.row] if bundle.heading_paths else "",
        page_start=bundle.pages[f.row][0] if bundle.pages else None,
        page_end=bundle.pages[f.row][1] if bundle.pages else None,
        walk_rank=dict(f.extra_ranks).get("walk"),
        source_uri=doc.get("source_uri") or "",
        holds=f.holds,
    )


def retrieve(
    bundle: LoadedBundle,
    query: str,
    *,
    k: int = 5,
    access: Iterable[str] | None = None,
    visible_roles: Iterable[str] | None = None,
    lexical_weight: float = 1.0,
    arms: tuple[str, ...] = ("dense", "lexical"),
    depth: int = DEFAULT_DEPTH,
    min_similarity: float | None = None,
    vector: np.ndarray | None = None,
    extra: Mapping[str, Sequence[ArmHit]] | None = None,
    weights: Mapping[str, float] | None = None,
    slots: Sequence[Slot] = (),
    lead: str | None = None,
    lead_ratio: float = 2.0,
) -> list[Evidence]:
    """The top ``k`` chunks for ``query`` that the caller may see.

    Args:
        bundle: from :func:`query.load_bundle`.
        query: natural-language query.
        k: number of evidence items (1 or more).
        access: access classes the caller may see; ``None`` means all.
        visible_roles: source roles whose documents the caller may see; ``None``
            means all (an HTTP principal limited to some roles).
        lexical_weight: weight of the BM25 arm in fusion (the only tuning knob).
        arms: which arms to run (``dense``, ``lexical``).
        depth: how deep each arm ranks (at least ``k``).
        min_similarity: optional floor on dense similarity (reserved rows still
            fill the list, marked ``fallback``).
        vector: the query's embedding, if the caller already has it.
        extra: ranked chunk rows from knowledge surfaces (see :mod:`query.surfaces`):
            candidates that the chunk arms score (see :func:`query.fusion.fuse`).
        weights: score weights of ``extra`` arms (the graph arm's ``walk``); an arm
            without one is a candidate generator only.
        slots: places reserved for the things the query names (:func:`query.fusion.fuse`).
        lead: the ``extra`` arm that keeps its places, with ``lead_ratio`` of them per
            place kept for the chunk arms' own fusion (:func:`query.fusion.fuse`).

    Returns:
        Evidence in rank order, each quoting its document's exact span.

    Raises:
        ValueError: empty query, non-positive ``k``, an unknown arm, or an access
            class that is not one of ``store.config.ACCESS_CLASSES`` (a typo would
            otherwise silently hide every chunk), or likewise a source role.

    ``k`` larger than the caller's eligible universe is allowed and costs no more
    than ``k = n``: every arm is bounded by the rows it can see.
    """
    if not query.strip():
        raise ValueError("query is empty")
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    unknown = set(arms) - {"dense", "lexical"}
    if unknown or not arms:
        raise ValueError(f"unknown or no arms: {sorted(unknown) or arms}")
    if access is not None:
        access = list(access)
        strange = sorted(set(access) - set(ACCESS_CLASSES))
        if strange:
            raise ValueError(f"unknown access class(es) {strange}; known: {list(ACCESS_CLASSES)}")
    if visible_roles is not None:
        visible_roles = list(visible_roles)
        strange = sorted(set(visible_roles) - set(SOURCE_ROLES))
        if strange:
            raise ValueError(f"unknown source role(s) {strange}; known: {list(SOURCE_ROLES)}")
    rows = visible_rows(bundle, access, visible_roles)
    n_eligible = len(bundle.chunk_ids) if rows is None else len(rows)
    depth = max(depth, k)
    if "dense" in arms:
        vector = bundle.embed(query) if vector is None else vector
        dense = dense_arm(bundle, vector, depth, rows)
    else:
        dense = []
    lexical = lexical_arm(bundle, query, depth, rows) if "lexical" in arms else []
    fused = fuse(
        dense,
        lexical,
        chunk_ids=bundle.chunk_ids,
        k=k,
        n_eligible=n_eligible,
        lexical_weight=lexical_weight if "dense" in arms else max(lexical_weight, 1.0),
        min_similarity=min_similarity,
        extra=extra,
        weights=weights,
        slots=slots,
        lead=lead,
        lead_ratio=lead_ratio,
    )
    return [_evidence(bundle, rank, f) for rank, f in enumerate(fused, start=1)]
