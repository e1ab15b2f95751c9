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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from algorithms.normalize import normalize_surface
from query.columns import Grouped, list_items
from store.bundles import COMMUNITIES, RELATIONS, numbers
from store.config import SEARCH_EXPANSION
from store.walk_counts import WalkEdges

Visible = Callable[[Sequence[str]], bool]


@dataclass
class Surface:
    """One derived table (relations or communities) with its vector index."""

    ids: Sequence[str]
    texts: Sequence[str]
    chunk_ids: Sequence[list[str]]
    index: Any
    row_of_key: Mapping[int, int] = field(default_factory=dict)

    def search(self, vector: np.ndarray, depth: int, visible: Visible) -> list[tuple[int, float]]:
        """``(row, similarity)`` of the best visible rows, best first (ties by id)."""
        if self.index is None or len(self.index) == 0 or depth <= 0:
            return []
        count = min(len(self.index), depth * 4)
        matches = self.index.search(vector, count)
        rows = [self.row_of_key.get(int(key)) for key in matches.keys]
        hits = [
            (row, round(1.0 - float(dist), 6))
            for row, dist in zip(rows, matches.distances, strict=True)
            if row is not None and visible(self.chunk_ids[row])
        ]
        hits.sort(key=lambda h: (-h[1], self.ids[h[0]]))
        return hits[:depth]


Touched = Callable[[], tuple[Collection[int], Mapping[int, int]]]
"""A change's effect on the counted walk edges: the base rows whose edges it touched,
and the base rows it rewrote -> their rows now."""


class EdgeCounts:
    """Each entity row's edges in the walk graph of every chunk, counted when the
    generation's map files were written (:mod:`store.walk_counts`), so that a walk need
    not read a node's whole edge list for them: how many, and its partners (entities it
    shares a usable relation with). Not known (-1) for a row past the counted ones, or
    one a window's change touched (``touched``)."""

    def __init__(self, edges: WalkEdges, touched: Touched | None = None) -> None:
        self._edges = edges
        self._touched = touched
        self._unknown: np.ndarray | None = None
        self._moved: tuple[np.ndarray, np.ndarray] | None = None
        if touched is None:
            self._unknown = np.zeros(0, dtype=np.int64)
            self._moved = (self._unknown, self._unknown)
        self._lock = threading.Lock()

    def of(self, rows: Sequence[int]) -> np.ndarray:
        """The count of each of ``rows`` (-1: not known)."""
        counts = self._edges.counts
        at = np.asarray(rows, dtype=np.int64)
        found = np.full(len(at), -1, dtype=np.int64)
        counted = at < len(counts)
        found[counted] = counts[at[counted]]
        found[np.isin(at, self._change()[0])] = -1
        return found

    def partners(self, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The partners of ``rows`` (each known, see :meth:`of`): for each, the index in
        ``rows`` of the entity it is a partner of, its row, and the row of the relation
        that names the pair; by entity, partners ascending by their base row."""
        taken = pa.array(np.asarray(rows, dtype=np.int64))
        lists = self._edges.partners.take(taken)
        owners = numbers(pc.list_parent_indices(lists)).astype(np.int64)
        partners = numbers(pc.list_flatten(lists)).astype(np.int64)
        via = numbers(pc.list_flatten(self._edges.via.take(taken))).astype(np.int64)
        old, new = self._change()[1]
        if len(old):
            at = np.minimum(np.searchsorted(old, partners), len(old) - 1)
            hit = old[at] == partners
            partners[hit] = new[at[hit]]
        return owners, partners, via

    def overlaid(self, touched: Touched) -> "EdgeCounts":
        """These counts under a window's change (``touched`` is called on first use)."""
        if self._touched is not None:
            raise ValueError("the counts are already overlaid")
        return EdgeCounts(self._edges, touched)

    def _change(self) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        if self._unknown is None or self._moved is None:
            with self._lock:
                if (self._unknown is None or self._moved is None) and self._touched is not None:
                    touched, moved = self._touched()
                    old = np.asarray(sorted(moved), dtype=np.int64)
                    new = np.asarray([moved[r] for r in old.tolist()], dtype=np.int64)
                    self._moved = (old, new)
                    self._unknown = np.unique(np.fromiter(touched, dtype=np.int64))
        assert self._unknown is not None and self._moved is not None
        return self._unknown, self._moved


@dataclass
class KnowledgeLayer:
    """Entities, relations and communities of one bundle, ready for queries."""

    entity_ids: Sequence[str]
    entity_names: Sequence[str]
    entity_chunks: Sequence[list[str]]
    aliases: Mapping[str, list[int]]
    relations: Surface
    subjects: Sequence[int]
    objects: Sequence[int]
    predicates: Sequence[str]
    object_texts: Sequence[str]
    categories: Sequence[str]
    supports: Sequence[int]
    confidences: Sequence[float]
    communities: Surface
    adjacency: Mapping[int, list[int]]
    functional: Mapping[str, list[int]] = field(default_factory=dict)
    subject_ids: Sequence[str] | None = None
    object_ids: Sequence[str | None] | None = None
    """The relations' ends by entity id (the layer of a generation's base: what its
    change resolves against the entities it holds then)."""
    relations_of: Mapping[str, list[int]] | None = None
    """entity id -> the relation rows it is an end of (a base layer: see above)."""
    chunk_entities: Mapping[str, list[int]] | None = None
    """chunk id -> the live entity rows whose chunk list holds it, in id order (``None``:
    the layer has no such lookup; the graph arm then builds its walk graph whole)."""
    descriptions: Mapping[str, list[int]] | None = None
    """normalized description (more than one word) -> the relation rows of category
    ``definition`` whose object text normalizes to it, in id order (``None``: as above)."""
    walk_edges: EdgeCounts | None = None
    """Each entity row's edges in the walk graph of every chunk, counted at build time
    (``None``: not counted; a walk counts the edges of the nodes it reaches)."""
    dead_entities: Collection[int] = ()
    """Entity rows no longer live (an overlaid layer's base rows its change rewrote or
    removed)."""
    walk_graphs: dict[str | None, Any] = field(default_factory=dict, repr=False)
    """The graph arm's graphs by visible-row set (see :mod:`query.graph`), built on use."""
    fold: Callable[[], "KnowledgeLayer"] | None = field(default=None, repr=False, compare=False)
    """For a layer overlaid on its base's (:mod:`query.knowledge_overlay`): builds the
    same layer whole, rows in id order; ``None`` for a whole layer."""
    _whole: "KnowledgeLayer | None" = field(default=None, repr=False, compare=False)

    def folded(self) -> "KnowledgeLayer":
        """This layer with every row in id order and no dead rows: itself when whole; an
        overlaid layer's whole twin, built on first use and kept (a whole walk graph
        needs every row at once)."""
        if self.fold is None:
            return self
        with _FOLD_LOCK:
            if self._whole is None:
                self._whole = self.fold()
            return self._whole

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
            for (subject, predicate), objects in sorted(
                groups.items(), key=lambda item: (self.entity_ids[item[0][0]], item[0][1])
            )
            if len(objects) > 1
        ]


_FOLD_LOCK = threading.Lock()
SURFACE_COLUMNS = {
    RELATIONS: ("relation_id", "summary", "chunk_ids"),
    COMMUNITIES: ("community_id", "report", "evidence_chunk_ids"),
}
"""Each surface table's id, text and evidence-chunk columns."""


def index_file_view(path: str, index_file: str | None) -> Any:
    """The HNSW file ``index_file`` of the generation at ``path``, memory-mapped."""
    from usearch.index import Index

    if index_file is None or not os.path.exists(os.path.join(path, index_file)):
        return None
    index = Index.restore(os.path.join(path, index_file), view=True)
    if index is not None:
        index.expansion_search = SEARCH_EXPANSION  # type: ignore[misc]  # settable at run time
    return index


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
