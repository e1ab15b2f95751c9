"""The knowledge layer on the read side: entities, relations, communities, their vector
surfaces, anchor resolution, bounded graph expansion and contradiction checks.

Contract: derived rows (relations, communities) are only used when *all* of
their evidence chunks are visible to the caller; anchors resolve through the
canonical entities' aliases (normalized exactly as the build normalized them);
graph expansion is bounded by hops, fan-out and candidates, and never starts
from an unresolved anchor.
"""

import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from algorithms.normalize import normalize_surface
from store.bundles import (
    COMMUNITIES,
    COMMUNITY_INDEX,
    ENTITIES,
    RELATION_INDEX,
    RELATIONS,
    read_parquet,
)
from store.config import SEARCH_EXPANSION

Visible = Callable[[Sequence[str]], bool]
# Predicates whose object is a single value: two different objects for one subject contradict.
FUNCTIONAL_CATEGORIES = frozenset({"limit"})


@dataclass
class Surface:
    """One derived table (relations or communities) with its vector index."""

    ids: list[str]
    texts: list[str]
    chunk_ids: list[list[str]]
    index: Any
    row_of_key: dict[int, int] = field(default_factory=dict)

    def search(self, vector: np.ndarray, depth: int, visible: Visible) -> list[tuple[int, float]]:
        """``(row, similarity)`` of the best visible rows, best first (ties by id)."""
        if self.index is None or len(self.index) == 0 or depth <= 0:
            return []
        count = min(len(self.index), depth * 4)
        matches = self.index.search(vector, count)
        hits = [
            (self.row_of_key[int(key)], round(1.0 - float(dist), 6))
            for key, dist in zip(matches.keys, matches.distances, strict=True)
        ]
        hits = [(row, sim) for row, sim in hits if visible(self.chunk_ids[row])]
        hits.sort(key=lambda h: (-h[1], self.ids[h[0]]))
        return hits[:depth]


@dataclass
class KnowledgeLayer:
    """Entities, relations and communities of one bundle, ready for queries."""

    entity_ids: list[str]
    entity_names: list[str]
    entity_chunks: list[list[str]]
    aliases: dict[str, list[int]]
    relations: Surface
    subjects: list[int]
    objects: list[int]
    predicates: list[str]
    object_texts: list[str]
    categories: list[str]
    supports: list[int]
    confidences: list[float]
    communities: Surface
    adjacency: dict[int, list[int]]
    functional: dict[str, list[int]] = field(default_factory=dict)
    walk_graphs: dict[str | None, Any] = field(default_factory=dict, repr=False)
    """The graph arm's graphs by visible-row set (see :mod:`query.graph`), built on use."""

    def resolve(self, anchor: str, visible: Visible) -> list[int]:
        """Entities an anchor names that have chunk evidence the caller may see."""
        found = self.aliases.get(normalize_surface(anchor), [])
        return [e for e in found if any(visible([c]) for c in self.entity_chunks[e])]

    def expand(
        self, seeds: Sequence[int], visible: Visible, *, hops: int, fan_out: int, limit: int
    ) -> list[int]:
        """Relation rows reached from ``seeds`` within ``hops``, strongest first per node."""
        reached: list[int] = []
        seen_rel: set[int] = set()
        frontier, seen_nodes = list(seeds), set(seeds)
        for _ in range(hops):
            nxt: list[int] = []
            for node in frontier:
                edges = [
                    r
                    for r in self.adjacency.get(node, [])
                    if r not in seen_rel and visible(self.relations.chunk_ids[r])
                ]
                edges.sort(
                    key=lambda r: (-self.supports[r], -self.confidences[r], self.relations.ids[r])
                )
                for r in edges[:fan_out]:
                    seen_rel.add(r)
                    reached.append(r)
                    other = self.objects[r] if self.subjects[r] == node else self.subjects[r]
                    if other >= 0 and other not in seen_nodes:
                        seen_nodes.add(other)
                        nxt.append(other)
                    if len(reached) >= limit:
                        return reached
            frontier = nxt
        return reached

    def contradictions(self, chunk_ids: set[str]) -> list[dict[str, Any]]:
        """Functional relations stated by admitted chunks with one subject, one predicate
        and different objects."""
        groups: dict[tuple[int, str], set[str]] = defaultdict(set)
        for row in sorted({r for c in chunk_ids for r in self.functional.get(c, [])}):
            groups[(self.subjects[row], self.predicates[row])].add(self.object_texts[row])
        return [
            {
                "subject": self.entity_names[subject],
                "predicate": predicate,
                "objects": sorted(objects),
            }
            for (subject, predicate), objects in sorted(groups.items())
            if len(objects) > 1
        ]


def _surface(path: str, table: str, index_file: str, id_col: str, text_col: str) -> Surface:
    from usearch.index import Index

    chunk_col = "evidence_chunk_ids" if table == COMMUNITIES else "chunk_ids"
    data = read_parquet(os.path.join(path, table), columns=[id_col, text_col, chunk_col, "ann_key"])
    index = None
    if os.path.exists(os.path.join(path, index_file)):
        index = Index.restore(os.path.join(path, index_file), view=True)
        if index is not None:
            index.expansion_search = SEARCH_EXPANSION  # type: ignore[misc]  # settable at run time
    keys = data.column("ann_key").to_pylist()
    return Surface(
        ids=data.column(id_col).to_pylist(),
        texts=data.column(text_col).to_pylist(),
        chunk_ids=data.column(chunk_col).to_pylist(),
        index=index,
        row_of_key={int(k): i for i, k in enumerate(keys)},
    )


@lru_cache(maxsize=1 << 19)
def _alias_norm(alias: str) -> str:
    """``normalize_surface`` of an entity alias, remembered across opens: a server that
    reopens each new generation of a SciFact-size bundle (~130k aliases, nearly all the
    same as the last generation's) would otherwise spend a second on it every time."""
    return normalize_surface(alias)


def load_knowledge(path: str) -> KnowledgeLayer | None:
    """The knowledge layer of the bundle at ``path``, or ``None`` if it was built without."""
    if not os.path.exists(os.path.join(path, ENTITIES)):
        return None
    entities = read_parquet(
        os.path.join(path, ENTITIES), columns=["entity_id", "name", "aliases", "chunk_ids"]
    )
    ids = entities.column("entity_id").to_pylist()
    row_of = {e: i for i, e in enumerate(ids)}
    aliases: dict[str, list[int]] = defaultdict(list)
    for i, names in enumerate(entities.column("aliases").to_pylist()):
        for norm in sorted({_alias_norm(n) for n in names}):
            aliases[norm].append(i)
    relations = _surface(path, RELATIONS, RELATION_INDEX, "relation_id", "summary")
    columns = ["subject_id", "object_id", "predicate", "object_text", "category", "support"]
    meta = read_parquet(os.path.join(path, RELATIONS), columns=[*columns, "confidence"])
    subjects = [row_of[s] for s in meta.column("subject_id").to_pylist()]
    objects = [row_of.get(o, -1) if o else -1 for o in meta.column("object_id").to_pylist()]
    adjacency: dict[int, list[int]] = defaultdict(list)
    for r, (s, o) in enumerate(zip(subjects, objects, strict=True)):
        adjacency[s].append(r)
        if o >= 0:
            adjacency[o].append(r)
    categories = meta.column("category").to_pylist()
    functional: dict[str, list[int]] = defaultdict(list)
    for r, chunks in enumerate(relations.chunk_ids):
        if categories[r] in FUNCTIONAL_CATEGORIES:
            for c in chunks:
                functional[c].append(r)
    return KnowledgeLayer(
        entity_ids=ids,
        entity_names=entities.column("name").to_pylist(),
        entity_chunks=entities.column("chunk_ids").to_pylist(),
        aliases=dict(aliases),
        relations=relations,
        subjects=subjects,
        objects=objects,
        predicates=meta.column("predicate").to_pylist(),
        object_texts=meta.column("object_text").to_pylist(),
        categories=categories,
        supports=meta.column("support").to_pylist(),
        confidences=meta.column("confidence").to_pylist(),
        communities=_surface(path, COMMUNITIES, COMMUNITY_INDEX, "community_id", "report"),
        adjacency=dict(adjacency),
        functional=dict(functional),
    )
