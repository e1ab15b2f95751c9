"""Knowledge surfaces as retrieval arms: relation summaries, community reports and
anchor-gated graph expansion, each turned into ranked chunk candidates.

A derived row proposes the chunks that support it; its claims are closed
against those chunks by admission, never cited on their own.
"""

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from query.bundle import LoadedBundle
from query.fusion import ArmHit
from query.knowledge_layer import KnowledgeLayer, Visible

GRAPH_HOPS = 2
GRAPH_FAN_OUT = 5
GRAPH_CANDIDATES = 20
DERIVED_DEPTH = 10


class Derived(NamedTuple):
    """A relation summary, community report or expanded relation, with its provenance."""

    kind: str
    id: str
    text: str
    score: float
    chunk_ids: tuple[str, ...]


class Expansion(NamedTuple):
    """The outcome of anchor-gated graph expansion."""

    blocked: bool
    resolved: dict[str, list[str]]
    unresolved: tuple[str, ...]
    relations: tuple[Derived, ...]


def visibility(
    bundle: LoadedBundle, access: Iterable[str] | None, roles: Iterable[str] | None = None
) -> Visible:
    """``chunk_ids -> bool``: whether the caller may see every one of them (its access
    classes ``access`` and, when given, source roles ``roles``; ``None``: all)."""
    if access is None and roles is None:
        return lambda chunk_ids: all(c in bundle.row_of_chunk for c in chunk_ids)
    allowed = None if access is None else set(access)
    seen_roles = None if roles is None else set(roles)

    def shown(row: int | None) -> bool:
        if row is None:
            return False
        if allowed is not None and bundle.access_classes[row] not in allowed:
            return False
        if seen_roles is None:
            return True
        return bundle.documents[bundle.chunk_doc_ids[row]]["source_role"] in seen_roles

    def visible(chunk_ids: Sequence[str]) -> bool:
        return all(shown(bundle.row_of_chunk.get(c)) for c in chunk_ids)

    return visible


def chunk_arm(bundle: LoadedBundle, derived: Sequence[Derived], depth: int) -> list[ArmHit]:
    """Chunks of the derived rows in their order (each chunk at its first appearance)."""
    hits: list[ArmHit] = []
    seen: set[int] = set()
    for item in derived:
        for chunk_id in sorted(item.chunk_ids):
            row = bundle.row_of_chunk.get(chunk_id)
            if row is None or row in seen:
                continue
            seen.add(row)
            hits.append(ArmHit(row, len(hits) + 1, item.score))
            if len(hits) >= depth:
                return hits
    return hits


def search_surface(
    layer: KnowledgeLayer, kind: str, vector: np.ndarray, visible: Visible
) -> list[Derived]:
    """The best visible relation summaries or community reports for a query vector."""
    surface = layer.relations if kind == "relations" else layer.communities
    return [
        Derived(kind, surface.ids[row], surface.texts[row], score, tuple(surface.chunk_ids[row]))
        for row, score in surface.search(vector, DERIVED_DEPTH, visible)
    ]


def expand(layer: KnowledgeLayer, anchors: Sequence[str], visible: Visible) -> Expansion:
    """Graph expansion from the query's anchors; blocked if any anchor does not resolve."""
    resolved = {a: layer.resolve(a, visible) for a in anchors}
    unresolved = tuple(a for a, found in resolved.items() if not found)
    names = {a: [layer.entity_names[e] for e in found] for a, found in resolved.items() if found}
    if unresolved or not anchors:
        return Expansion(True, names, unresolved, ())
    seeds = sorted({e for found in resolved.values() for e in found})
    rows = layer.expand(
        seeds, visible, hops=GRAPH_HOPS, fan_out=GRAPH_FAN_OUT, limit=GRAPH_CANDIDATES
    )
    relations = tuple(
        Derived(
            "graph",
            layer.relations.ids[r],
            layer.relations.texts[r],
            float(layer.supports[r]),
            tuple(layer.relations.chunk_ids[r]),
        )
        for r in rows
    )
    return Expansion(False, names, (), relations)
