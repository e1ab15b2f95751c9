"""Dense retrieval over a loaded bundle, returning quotable evidence.

Ordering is a total order: score descending (rounded to 6 decimals so float
noise never reorders), then chunk id ascending. Access filtering happens
*before* top-k: when the caller may not see every chunk, the search runs
exactly over the visible rows, so nothing leaks and results are never emptied
by post-filtering.
"""

import hashlib
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from query.bundle import LoadedBundle

_SCORE_DECIMALS = 6


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


def _visible_rows(bundle: LoadedBundle, access: Iterable[str] | None) -> np.ndarray | None:
    """Row indices the caller may see, or ``None`` when every row is visible."""
    if access is None:
        return None
    allowed = set(access)
    mask = np.array([a in allowed for a in bundle.access_classes], dtype=bool)
    return None if mask.all() else np.flatnonzero(mask)


def _dense_candidates(
    bundle: LoadedBundle, vector: np.ndarray, k: int, rows: np.ndarray | None
) -> list[tuple[float, int]]:
    if rows is None:
        count = min(k, len(bundle.keys))
        if count == 0:
            return []
        matches = bundle.index.search(vector, count)
        return [
            (1.0 - float(d), bundle.row_of_key(int(key)))
            for key, d in zip(matches.keys, matches.distances, strict=True)
        ]
    if len(rows) == 0:
        return []
    scores = bundle.vectors()[rows] @ vector
    top = np.argsort(-scores, kind="stable")[:k]
    return [(float(scores[i]), int(rows[i])) for i in top]


def retrieve(
    bundle: LoadedBundle, query: str, *, k: int = 5, access: Iterable[str] | None = None
) -> list[Evidence]:
    """The top ``k`` chunks for ``query`` that the caller may see.

    Args:
        bundle: from :func:`query.load_bundle`.
        query: natural-language query.
        k: number of evidence items (1 or more).
        access: access classes the caller may see; ``None`` means all.

    Returns:
        Evidence in rank order, each quoting its document's exact span.

    Raises:
        ValueError: empty query or non-positive ``k``.
    """
    if not query.strip():
        raise ValueError("query is empty")
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    vector = bundle.embed(query)
    candidates = _dense_candidates(bundle, vector, k, _visible_rows(bundle, access))
    ordered = sorted(
        ((round(score, _SCORE_DECIMALS), bundle.chunk_ids[row], row) for score, row in candidates),
        key=lambda item: (-item[0], item[1]),
    )
    evidence = []
    for rank, (score, chunk_id, row) in enumerate(ordered[:k], start=1):
        doc = bundle.documents[bundle.chunk_doc_ids[row]]
        start, end = int(bundle.starts[row]), int(bundle.ends[row])
        text = doc["text"][start:end]
        evidence.append(
            Evidence(
                rank=rank,
                score=score,
                chunk_id=chunk_id,
                doc_id=doc["doc_id"],
                title=doc["title"],
                revision=doc["revision"],
                start=start,
                end=end,
                text=text,
                content_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                access_class=str(bundle.access_classes[row]),
            )
        )
    return evidence
