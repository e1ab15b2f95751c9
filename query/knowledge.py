"""The knowledge layer on the read side: entities, relations, communities, their vector
surfaces, anchor resolution, bounded graph expansion and contradiction checks.

Contract: derived rows (relations, communities) are only used when *all* of
their evidence chunks are visible to the caller; anchors resolve through the
canonical entities' aliases (normalized exactly as the build normalized them);
graph expansion is bounded by hops, fan-out and candidates, and never starts
from an unresolved anchor.
"""

import os
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from algorithms.normalize import normalize_surface
from query.columns import ArrowSequence, Grouped, list_items
from store.bundles import (
    COMMUNITIES,
    COMMUNITY_INDEX,
    ENTITIES,
    RELATION_INDEX,
    RELATIONS,
    numbers,
)
from store.config import SEARCH_EXPANSION
from store.knowledge_layers import has_table, read_table, table_schema

Visible = Callable[[Sequence[str]], bool]
# Predicates whose object is a single value: two different objects for one subject contradict.
FUNCTIONAL_CATEGORIES = frozenset({"limit"})


@dataclass
class Surface:
    """One derived table (relations or communities) with its vector index."""

    ids: Sequence[str]
    texts: Sequence[str]
    chunk_ids: Sequence[list[str]]
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

    entity_ids: Sequence[str]
    entity_names: Sequence[str]
    entity_chunks: Sequence[list[str]]
    aliases: Mapping[str, list[int]]
    relations: Surface
    subjects: list[int]
    objects: list[int]
    predicates: Sequence[str]
    object_texts: Sequence[str]
    categories: Sequence[str]
    supports: list[int]
    confidences: list[float]
    communities: Surface
    adjacency: Mapping[int, list[int]]
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
    data = read_table(path, table, [id_col, text_col, chunk_col, "ann_key"])
    index = None
    if os.path.exists(os.path.join(path, index_file)):
        index = Index.restore(os.path.join(path, index_file), view=True)
        if index is not None:
            index.expansion_search = SEARCH_EXPANSION  # type: ignore[misc]  # settable at run time
    keys = numbers(data.column("ann_key")).tolist()
    return Surface(
        ids=ArrowSequence(data.column(id_col)),
        texts=ArrowSequence(data.column(text_col)),
        chunk_ids=ArrowSequence(data.column(chunk_col)),
        index=index,
        row_of_key=dict(zip(keys, range(len(keys)), strict=True)),
    )


class AliasNorms:
    """``normalize_surface`` of alias strings, remembered across opens as Arrow arrays.

    A server or stream reader reopens each new generation of a SciFact-size bundle (~130k
    aliases, nearly all the same as the last generation's): the strings it has seen are
    matched in one vectorized pass, and only new ones are normalized in Python. Each
    distinct normalized form has a code (its place in :attr:`norms`), kept for the life of
    the process, up to :attr:`limit` strings (then it starts afresh).
    """

    limit = 1 << 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._strings = pa.array([], type=pa.string())
        self._codes = np.empty(0, dtype=np.int64)
        self.norms: list[str] = []
        self.code_of: dict[str, int] = {}

    def codes(self, strings: Any) -> tuple[np.ndarray, list[str], dict[str, int]]:
        """The code of each string's normalized form, and the norms and the norm -> code
        map as they stand (both only ever grow, so earlier codes stay valid)."""
        with self._lock:
            if len(self._strings) + len(strings) > self.limit:
                self._reset()
            found = pc.fill_null(pc.index_in(strings, value_set=self._strings), -1)
            where = numbers(found.cast(pa.int64()))
            out = np.empty(len(strings), dtype=np.int64)
            known = where >= 0
            out[known] = self._codes[where[known]]
            missing = np.flatnonzero(~known)
            if len(missing):
                fresh = strings.take(pa.array(missing)).to_pylist()
                codes = [
                    self.code_of.setdefault(norm, len(self.code_of))
                    for norm in map(normalize_surface, fresh)
                ]
                self.norms.extend(list(self.code_of)[len(self.norms) :])
                out[missing] = codes
                self._strings = pa.concat_arrays([self._strings, pa.array(fresh, pa.string())])
                self._codes = np.concatenate([self._codes, np.asarray(codes, dtype=np.int64)])
            return out, self.norms, self.code_of


_ALIAS_NORMS = AliasNorms()


def alias_index(aliases: Any, norms: AliasNorms = _ALIAS_NORMS) -> Grouped:
    """normalized alias -> the entity rows that have it, ascending, from the entity
    table's ``aliases`` list column (each distinct alias string normalized once per
    process: :class:`AliasNorms`). For tables written before ``alias_norms``."""
    owners, distinct, places = list_items(aliases)
    codes, labels, position = norms.codes(distinct)
    grouped = Grouped.of(codes[places], owners, len(labels), distinct=True)
    return grouped.labelled(labels, position)


def stored_alias_index(alias_norms: Any) -> Grouped:
    """normalized alias -> the entity rows that have it, ascending, from the entity
    table's ``alias_norms`` list column, normalized when the table was written: nothing
    is normalized here."""
    owners, distinct, places = list_items(alias_norms)
    labels = distinct.to_pylist()
    grouped = Grouped.of(places, owners, len(labels), distinct=True)
    return grouped.labelled(labels)


def adjacency_index(subjects: np.ndarray, objects: np.ndarray, entities: int) -> Grouped:
    """entity row -> the relation rows it is the subject or the object of, ascending (a
    relation from an entity to itself twice), from the relations' entity rows (-1: no
    object entity)."""
    ends = np.column_stack([subjects, objects]).ravel()  # row r's subject, then object
    relations = np.repeat(np.arange(len(subjects), dtype=np.int64), 2)
    linked = ends >= 0
    return Grouped.of(ends[linked], relations[linked], entities)


def _entity_rows(ids: Any, entity_ids: Any) -> np.ndarray:
    """Each of ``ids``' row in ``entity_ids`` (-1: null or not an entity)."""
    found = pc.fill_null(pc.index_in(ids, value_set=entity_ids), -1)
    return numbers(found.cast(pa.int64()))


def load_knowledge(path: str) -> KnowledgeLayer | None:
    """The knowledge layer of the bundle at ``path``, or ``None`` if it was built without.

    Columns stay Arrow arrays behind :class:`query.columns.ArrowSequence` and the alias
    and adjacency indexes are numpy arrays (:class:`query.columns.Grouped`), so opening
    costs a few vectorized passes, not a Python object per row.

    Raises:
        ValueError: a relation's subject is not one of the entities.
    """
    if not has_table(path, ENTITIES):
        return None
    stored = "alias_norms" in table_schema(path, ENTITIES).names
    entities = read_table(
        path, ENTITIES, ["entity_id", "name", "chunk_ids", "alias_norms" if stored else "aliases"]
    )
    entity_ids = entities.column("entity_id").combine_chunks()
    relations = _surface(path, RELATIONS, RELATION_INDEX, "relation_id", "summary")
    columns = ["subject_id", "object_id", "predicate", "object_text", "category", "support"]
    meta = read_table(path, RELATIONS, [*columns, "confidence"])
    subjects = _entity_rows(meta.column("subject_id"), entity_ids)
    if len(subjects) and subjects.min() < 0:
        missing = meta.column("subject_id")[int(np.argmin(subjects))].as_py()
        raise ValueError(f"{path}: relation subject {missing!r} is not an entity")
    objects = _entity_rows(meta.column("object_id"), entity_ids)
    categories = meta.column("category")
    functional: dict[str, list[int]] = defaultdict(list)
    named = pc.is_in(categories, value_set=pa.array(sorted(FUNCTIONAL_CATEGORIES)))
    for r in np.flatnonzero(numbers(pc.cast(named, pa.int8()))).tolist():
        for c in relations.chunk_ids[r]:
            functional[c].append(r)
    return KnowledgeLayer(
        entity_ids=ArrowSequence(entity_ids),
        entity_names=ArrowSequence(entities.column("name")),
        entity_chunks=ArrowSequence(entities.column("chunk_ids")),
        aliases=(
            stored_alias_index(entities.column("alias_norms"))
            if stored
            else alias_index(entities.column("aliases"))
        ),
        relations=relations,
        subjects=subjects.tolist(),
        objects=objects.tolist(),
        predicates=ArrowSequence(meta.column("predicate")),
        object_texts=ArrowSequence(meta.column("object_text")),
        categories=ArrowSequence(categories),
        supports=numbers(meta.column("support")).tolist(),
        confidences=numbers(meta.column("confidence")).tolist(),
        communities=_surface(path, COMMUNITIES, COMMUNITY_INDEX, "community_id", "report"),
        adjacency=adjacency_index(subjects, objects, len(entity_ids)),
        functional=dict(functional),
    )
