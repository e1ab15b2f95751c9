"""The graph arm's walk graph built from the seeds outward, through the layer's lookups.

:func:`query.graph.walk_graph` used to build the graph of every chunk and entity on the
first query that walked, for each generation and each set of visible chunks: seconds at
300k documents, and again after every window. A :class:`LocalGraph` builds nothing when it
is made. A walk asks it for the edges of the nodes it reaches (hop by hop, within the
bounds of :meth:`query.whole_graph.WalkGraph.neighbourhood`), and each node's edges come from
lookups the knowledge layer answers in place (:mod:`query.mapped_layer`, and over a
window's change :mod:`query.knowledge_overlay`): an entity's chunk list and relations, a
chunk's entities (``chunk_entities``), a description's relations (``descriptions``). A
node's edges are computed once and kept, so later walks over the same part of the graph
read them back.

Contract: the same walk as the whole graph's (:class:`query.whole_graph.WalkGraph`), to the bit:
the same edges, weights and degrees, the nodes of a walk in the whole graph's order
(entities by id, then chunks by row) so that every sum adds the same numbers in the same
order, and the same bounds. A node's degree is its whole visible edge list's; for the
caller who sees every chunk, an entity's edges were counted when the map files were
written (:mod:`store.walk_counts`: how many, and which entities it shares a relation
with), so a walk reads only the nodes it expands and the chunks it reaches: an entity in
a hundred thousand chunks at the edge of a neighbourhood costs a lookup, not its chunk
list. A walk whose neighbourhood is more than half the graph walks the whole graph, as
the whole graph's does (it builds it then: the graph is small). What is not the
knowledge layer's is still gathered whole on first use: the document titles' pages (one
pass over the visible chunks' titles, only when titles are given).
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import query.whole_graph as whole_graph
from query.columns import first_items, get_many, items_at, lists_at
from query.knowledge_layer import KnowledgeLayer
from query.whole_graph import Seed, Step, WalkGraph
from store.bundles import numbers
from store.sorted_columns import SortedIds, increasing

if TYPE_CHECKING:  # scipy is imported by the first walk, not by every query process
    from scipy import sparse

ARROW_BATCH = 50_000
"""Chunk ids in a batch past which they are matched to rows in Arrow (hashing the
bundle's ids once per batch) rather than one by one."""


class ChunkIndex:
    """A bundle's chunk ids searched many at a time: sorted (their order kept when the
    rows are not in id order), each batch found by :class:`store.sorted_columns.SortedIds`;
    ids not all of one width are hashed with each batch instead."""

    def __init__(self, chunk_ids: Sequence[str]) -> None:
        self._ids = pa.array(chunk_ids, pa.string())
        self._order: np.ndarray | None = None
        ordered = self._ids
        if not increasing(ordered):
            self._order = numbers(pc.sort_indices(ordered)).astype(np.int64)
            ordered = ordered.take(pa.array(self._order))
        self._search = SortedIds.of(ordered)

    def rows(self, ids: pa.Array) -> np.ndarray:
        """The row of each of ``ids`` (-1: not a chunk of the bundle)."""
        if self._search is None or ids.null_count:
            at = pc.index_in(ids, value_set=self._ids)
            return numbers(pc.fill_null(at, -1)).astype(np.int64)  # type: ignore[no-any-return]
        found = self._search.positions(ids)
        if self._order is None:
            return found
        return np.where(found >= 0, self._order[np.maximum(found, 0)], -1)


_CHUNK_INDEXES: "OrderedDict[int, tuple[Sequence[str], ChunkIndex]]" = OrderedDict()
_CHUNK_LOCK = threading.Lock()
HELD_CHUNK_INDEXES = 2
"""Bundles whose chunk index is kept (a reader's current generation and the one before)."""


def chunk_index(chunk_ids: Sequence[str]) -> ChunkIndex:
    """The :class:`ChunkIndex` of a bundle's chunk ids, made once per list of ids (the
    list is held with it, so its identity is not reused while it is kept)."""
    with _CHUNK_LOCK:
        held = _CHUNK_INDEXES.get(id(chunk_ids))
        if held is not None and held[0] is chunk_ids:
            _CHUNK_INDEXES.move_to_end(id(chunk_ids))
            return held[1]
    index = ChunkIndex(chunk_ids)
    with _CHUNK_LOCK:
        _CHUNK_INDEXES[id(chunk_ids)] = (chunk_ids, index)
        while len(_CHUNK_INDEXES) > HELD_CHUNK_INDEXES:
            _CHUNK_INDEXES.popitem(last=False)
    return index


class _Entity(NamedTuple):
    """An entity node's edges."""

    chunks: list[int]  # visible chunk rows it occurs in, ascending, each once
    partners: list[int]  # entities it shares a usable relation with, in node order
    predicates: dict[int, str]  # partner -> the predicate of their first usable relation
    pages: list[int]  # visible chunk rows of the documents titled with one of its aliases
    degree: float  # the weight it sends out (its column's sum in the whole graph)
    page_weight: float  # the weight of each edge to a page chunk (0.0: none)


class _Chunk(NamedTuple):
    """A chunk node's edges."""

    entities: list[int]  # entities that occur in it, in node order
    about: list[int]  # entities it is a page of (its document is titled with their alias)
    degree: float


class _About(NamedTuple):
    """The document titles' pages over the visible chunks."""

    pages: dict[str, list[int]]  # normalized title -> visible chunk rows
    of_entity: dict[int, list[int]]  # entity -> its page chunk rows, ascending
    of_chunk: dict[int, list[int]]  # chunk row -> the entities it is a page of


class _Within:
    """The edges among a set of nodes (each read or counted), found per node when asked
    (an explanation path asks for a few)."""

    def __init__(self, graph: "LocalGraph", nodes: Iterable[int]) -> None:
        self.inside = set(nodes)
        self._graph = graph
        self._occurs: dict[int, list[int]] | None = None

    def partners(self, entity: int) -> list[int]:
        """The entities among them ``entity`` has an edge with, in node order."""
        graph = self._graph
        read = graph._entities.get(entity)
        found = read.partners if read is not None else graph._partners[entity][0].tolist()
        return graph.in_node_order(p for p in found if p in self.inside)

    def chunks(self, entity: int) -> list[int]:
        """The chunk rows among them ``entity`` occurs in, ascending."""
        graph = self._graph
        n = graph.n_entities
        read = graph._entities.get(entity)
        if read is not None:
            return [c for c in read.chunks if n + c in self.inside]
        if self._occurs is None:  # a counted entity: the chunks among them that name it
            occurs: dict[int, list[int]] = {}
            for v in sorted(v for v in self.inside if v >= n):
                for e in graph._chunks[v - n].entities:
                    occurs.setdefault(e, []).append(v - n)
            self._occurs = occurs
        return self._occurs.get(entity, [])


def has_lookups(layer: KnowledgeLayer) -> bool:
    """Whether ``layer`` answers the lookups a :class:`LocalGraph` reads."""
    return layer.chunk_entities is not None and layer.descriptions is not None


class LocalGraph:
    """The walk graph of one set of visible chunks, its nodes' edges read from the layer
    when a walk reaches them (see the module's contract).

    Nodes are numbered as the layer's rows: entity rows, then ``n_entities`` + chunk row.
    """

    def __init__(
        self,
        layer: KnowledgeLayer,
        chunk_ids: Sequence[str],
        row_of_chunk: dict[str, int],
        visible_rows: np.ndarray | None,
        titles: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        if not has_lookups(layer):
            raise ValueError("the layer has no chunk -> entities or description lookups")
        self.layer = layer
        self.n_entities = len(layer.entity_ids)
        self.chunk_ids = chunk_ids
        self.size = self.n_entities + len(chunk_ids)
        self._whole_size = self.size - len(layer.dead_entities)  # the whole graph's nodes
        self._rows = row_of_chunk
        self._visible_rows = visible_rows
        self._visible = np.ones(len(chunk_ids), dtype=bool)
        if visible_rows is not None:
            self._visible[:] = False
            self._visible[visible_rows] = True
        self._titles = titles
        self._in_id_order = layer.fold is None  # entity rows in id order: the node order
        self._counts: dict[int, int] = {}
        self._visible_chunks: dict[int, list[int]] = {}
        self._ids: dict[int, str] = {}  # entity ids read (an overlaid layer's node order)
        self._entities: dict[int, _Entity] = {}
        self._chunks: dict[int, _Chunk] = {}
        self._described: dict[str, list[int]] = {}
        # Entities reached but not read: their edges as counted at build time (only for
        # the caller who sees every chunk), and their partners (-> the relation naming
        # the pair).
        self._counted = layer.walk_edges if visible_rows is None else None
        self._written: dict[int, int] = {}
        self._partners: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._degrees: dict[int, float] = {}
        self._lengths: dict[int, int] = {}  # chunk list lengths of counted entities
        self._lock = threading.Lock()
        self._about: _About | None = None
        self._whole: WalkGraph | None = None

    @property
    def nodes_read(self) -> int:
        """Nodes whose edges were read from the layer so far."""
        return len(self._entities) + len(self._chunks)

    @property
    def nodes_counted(self) -> int:
        """Entities reached whose edges were not read: counted at build time."""
        return len(set(self._written) - set(self._entities))

    # Lookups the seeds and slots read.

    def chunk_count(self, entity: int) -> int:
        """Visible chunks the entity occurs in (as many as its chunk list names: the
        list's length, when its edges were counted at build time, for every chunk is
        visible then)."""
        if entity not in self._counts:
            if self._count_written([entity]):
                length = self._lengths.get(entity)
                if length is None:
                    lists = lists_at(self.layer.entity_chunks, [entity])
                    length = self._lengths[entity] = int(lists.value_lengths()[0].as_py() or 0)
                return length
            self._count([entity])
        return self._counts[entity]

    def described(self, norm: str) -> list[int]:
        """The entities with visible chunks that a visible statement describes as
        ``norm`` (see :func:`query.whole_graph._descriptions`), first stated first."""
        found = self._described.get(norm)
        if found is not None:
            return found
        layer = self.layer
        assert layer.descriptions is not None  # has_lookups
        rows = [
            r
            for r, target in zip(
                *self._at(layer.descriptions.get(norm, []), layer.objects), strict=True
            )
            if target < 0
        ]
        rows = [
            r
            for r, chunks in zip(*self._at(rows, layer.relations.chunk_ids), strict=True)
            if self._all_visible(chunks)
        ]
        subjects = items_at(layer.subjects, rows)
        self._count(subjects)
        counted = [s for s in subjects if self._counts[s] > 0]
        found = self._described[norm] = list(dict.fromkeys(counted))
        return found

    @property
    def pages(self) -> dict[str, list[int]]:
        """Normalized document title (less a trailing parenthesis) -> its visible chunk
        rows."""
        return self._pages().pages

    def neighbours(self, node: int) -> np.ndarray:
        """The nodes ``node`` has an edge with, in node order."""
        self._read([node])
        return self._neighbours(node)

    def label(self, node: int) -> str:
        if node < self.n_entities:
            return f"entity: {self.layer.entity_names[node]}"
        return f"chunk: {self.chunk_ids[node - self.n_entities]}"

    # The walk.

    def neighbourhood(self, seeds: np.ndarray) -> np.ndarray:
        """The nodes within ``MAX_HOPS`` edges of ``seeds``, in node order, bounded as
        :meth:`query.whole_graph.WalkGraph.neighbourhood` bounds them. The nodes it
        expands are read; the others too, unless their edges were counted at build time
        (an entity with more edges than ``MAX_EXPAND_DEGREE`` is then not read at all)."""
        seen = set(seeds.tolist())
        frontier = sorted(seen)
        for _ in range(whole_graph.MAX_HOPS):
            expand = self._expandable(frontier)
            if not expand:
                break
            fresh = set(np.concatenate([self._neighbours(v) for v in expand]).tolist()) - seen
            if not fresh or len(seen) + len(fresh) > whole_graph.MAX_NODES:
                break
            seen |= fresh
            frontier = sorted(fresh)
        self._settle(seen)
        return np.asarray(self.in_node_order(seen), dtype=np.int64)

    def walk(self, start: np.ndarray) -> np.ndarray:
        """Mass on every node after ``ITERATIONS`` steps of the walk with restart from
        ``start`` (one weight per node), run on the seeds' neighbourhood as
        :meth:`query.whole_graph.WalkGraph.walk` runs it."""
        nodes = self.neighbourhood(np.flatnonzero(start))
        if len(nodes) * 2 > self._whole_size:
            return self._walk_whole(start)
        rows = self._matrix(nodes.tolist())
        local_start = start[nodes]
        restart = np.float32(1.0 - whole_graph.DAMPING) * local_start
        mass = local_start.copy()
        for _ in range(whole_graph.ITERATIONS):
            mass = rows @ mass
            mass *= np.float32(whole_graph.DAMPING)
            mass += restart
        full = np.zeros_like(start)
        full[nodes] = mass
        return full

    def paths(
        self, seeds: Sequence[Seed], mass: np.ndarray, rows: Iterable[int]
    ) -> dict[int, tuple[str, tuple[Step, ...]]]:
        """As :meth:`query.whole_graph.WalkGraph.paths`: from each chunk row back to a seed
        along the edge that brought the most mass, at most ``PATH_HOPS`` edges."""
        reached = np.flatnonzero(mass > 0).tolist()
        self._settle(reached)
        n = self.n_entities
        self._counted_partners([v for v in reached if v < n and v not in self._entities])
        within = _Within(self, reached)

        def in_edges(v: int) -> tuple[np.ndarray, np.ndarray]:
            sources, values = self._edges_in(v, within)
            return np.asarray(sources, dtype=np.int64), np.asarray(values, dtype=np.float32)

        return whole_graph.trace_paths(
            seeds, mass, rows, self.n_entities, in_edges, self._via, self.label
        )

    # Edges, read from the layer a batch of nodes at a time.

    def _read(self, nodes: Iterable[int]) -> None:
        """Read the edges of those of ``nodes`` not read yet."""
        n = self.n_entities
        entities, chunks = [], []
        for v in nodes:
            if v < n:
                if v not in self._entities:
                    entities.append(v)
            elif v - n not in self._chunks:
                chunks.append(v - n)
        if entities:
            self._read_entities(entities)
        if chunks:
            self._read_chunks(chunks)

    def _count(self, entities: Sequence[int]) -> None:
        """Count the visible chunks of those of ``entities`` not counted yet (and keep
        which they are)."""
        wanted = [e for e in dict.fromkeys(entities) if e not in self._counts]
        if not wanted:
            return
        owners, rows = self._chunk_rows(lists_at(self.layer.entity_chunks, wanted))
        shown = rows >= 0
        shown[shown] = self._visible[rows[shown]]
        owners, rows = owners[shown], rows[shown]
        counts = np.bincount(owners, minlength=len(wanted)).tolist()
        pairs = np.unique(owners * len(self.chunk_ids) + rows)  # by owner, then row
        bounds = np.searchsorted(pairs // max(len(self.chunk_ids), 1), np.arange(len(wanted) + 1))
        distinct = (pairs % max(len(self.chunk_ids), 1)).tolist()
        for i, e in enumerate(wanted):  # chunks first: a count means both are there
            self._visible_chunks[e] = distinct[bounds[i] : bounds[i + 1]]
            self._counts[e] = counts[i]

    def _chunk_rows(self, lists: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """For each chunk id in ``lists`` (an Arrow list array): the list it is in, and
        its chunk row (-1: not a chunk of this bundle). A long batch is matched in Arrow
        against the bundle's ids (:func:`chunk_index`), a short one through the row map."""
        owners = numbers(pc.list_parent_indices(lists)).astype(np.int64)
        items = pc.list_flatten(lists)
        if len(items) < ARROW_BATCH:
            rows = self._rows
            found = [rows.get(c, -1) for c in items.to_pylist()]
            return owners, np.asarray(found, dtype=np.int64)
        return owners, chunk_index(self.chunk_ids).rows(items.cast(pa.string()))

    def _shown(self, entities: Sequence[int]) -> dict[int, bool]:
        """Whether each entity occurs in a visible chunk: its count when counted, else
        its first chunk when that is visible (most are), else its count."""
        shown = {e: self._counts[e] > 0 for e in entities if e in self._counts}
        wanted = [e for e in dict.fromkeys(entities) if e not in shown]
        rows, visible = self._rows, self._visible
        later = []
        for e, first in zip(wanted, first_items(self.layer.entity_chunks, wanted), strict=True):
            row = rows.get(first, -1) if first is not None else -1
            if row >= 0 and visible[row]:
                shown[e] = True
            else:
                later.append(e)
        self._count(later)
        shown.update((e, self._counts[e] > 0) for e in later)
        return shown

    def _read_entities(self, entities: list[int]) -> None:
        layer = self.layer
        self._count(entities)
        counted = [e for e in entities if self._counts[e] > 0]  # no chunk: no relation
        relations = dict(zip(counted, get_many(layer.adjacency, counted), strict=True))
        wanted = sorted({r for rows in relations.values() for r in rows})
        subjects = dict(zip(wanted, items_at(layer.subjects, wanted), strict=True))
        targets = dict(zip(wanted, items_at(layer.objects, wanted), strict=True))
        linked = [r for r in wanted if targets[r] >= 0 and targets[r] != subjects[r]]
        owners, rows = self._chunk_rows(lists_at(layer.relations.chunk_ids, linked))
        hidden = rows < 0
        hidden[~hidden] = ~self._visible[rows[~hidden]]
        evidence = np.bincount(owners, minlength=len(linked))
        unseen = np.bincount(owners[hidden], minlength=len(linked))
        usable = set(np.asarray(linked, dtype=np.int64)[(evidence > 0) & (unseen == 0)].tolist())
        shown = self._shown([v for r in usable for v in (subjects[r], targets[r])])
        usable = {r for r in usable if shown[targets[r]] and shown[subjects[r]]}
        named = sorted(usable)
        predicate_of = dict(zip(named, items_at(layer.predicates, named), strict=True))
        about = self._pages().of_entity
        for e in entities:
            predicates: dict[int, str] = {}
            for r in relations.get(e, []):
                if r in usable:
                    other = targets[r] if subjects[r] == e else subjects[r]
                    predicates.setdefault(other, predicate_of[r])
            chunks = self._visible_chunks[e]
            pages = about.get(e, [])
            out = len(chunks) + len(predicates)
            self._entities[e] = _Entity(
                chunks=chunks,
                partners=self.in_node_order(predicates),
                predicates=predicates,
                pages=pages,
                degree=float(whole_graph.entity_degree(out, len(pages))),
                page_weight=max(out, 1) / len(pages) if pages else 0.0,
            )

    def _read_chunks(self, rows: list[int]) -> None:
        assert self.layer.chunk_entities is not None  # has_lookups
        shown = [r for r in rows if self._visible[r]]
        keys = [self.chunk_ids[r] for r in shown]
        found = dict(zip(shown, get_many(self.layer.chunk_entities, keys), strict=True))
        about = self._pages().of_chunk
        for r in rows:
            entities = self.in_node_order(found.get(r, []))
            self._chunks[r] = _Chunk(entities, about.get(r, []), float(len(entities)) or 1.0)

    def _neighbours(self, node: int) -> np.ndarray:
        n = self.n_entities
        if node < n:
            entity = self._entities[node]
            chunks = sorted({*entity.chunks, *entity.pages})
            return np.asarray(entity.partners + [n + c for c in chunks], dtype=np.int64)
        chunk = self._chunks[node - n]
        return np.asarray(self.in_node_order({*chunk.entities, *chunk.about}), dtype=np.int64)

    def _expandable(self, frontier: list[int]) -> list[int]:
        """The nodes of ``frontier`` with at most ``MAX_EXPAND_DEGREE`` neighbours, read;
        an entity whose edges were counted past it is not read."""
        n = self.n_entities
        counted = self._count_written([v for v in frontier if v < n and v not in self._entities])
        hubs = {e for e, edges in counted.items() if edges > whole_graph.MAX_EXPAND_DEGREE}
        rest = [v for v in frontier if v not in hubs]
        self._read(rest)
        return [v for v in rest if len(self._neighbours(v)) <= whole_graph.MAX_EXPAND_DEGREE]

    def _settle(self, nodes: Iterable[int]) -> None:
        """Know the degree of each of ``nodes``: chunks and uncounted entities read."""
        n = self.n_entities
        nodes = list(nodes)
        self._read([v for v in nodes if v >= n])
        entities = [v for v in nodes if v < n and v not in self._entities]
        counted = self._count_written(entities)
        self._read([e for e in entities if e not in counted])

    def _count_written(self, entities: Sequence[int]) -> dict[int, int]:
        """The build-time edge counts of those of ``entities`` that have one (kept)."""
        if self._counted is None:
            return {}
        wanted = [e for e in entities if e not in self._written]
        if wanted:
            found = self._counted.of(wanted).tolist()
            self._written.update((e, c) for e, c in zip(wanted, found, strict=True) if c >= 0)
        return {e: self._written[e] for e in entities if e in self._written}

    def _matrix(self, order: list[int]) -> "sparse.csr_matrix":
        """The whole graph's matrix among ``order`` (nodes in node order, each read or
        counted): entry ``[v, u]`` is the share of its mass ``u`` sends ``v``, each row's
        entries in node order (so its sums add what the whole graph's add, in its order)."""
        n = self.n_entities
        size = len(order)
        place = np.full(self.size, -1, dtype=np.int64)
        place[np.asarray(order, dtype=np.int64)] = np.arange(size)
        degree = np.asarray([self._degree(v) for v in order], dtype=np.float64)
        entities = [v for v in order if v < n]
        self._counted_partners([e for e in entities if e not in self._entities])
        found = [
            np.asarray(self._entities[e].partners, dtype=np.int64)
            if e in self._entities
            else self._partners[e][0]
            for e in entities
        ]
        # an entity receives from each partner among them (weight 1) ...
        sources = np.concatenate([np.zeros(0, dtype=np.int64), *found])
        targets = np.repeat(np.asarray(entities, dtype=np.int64), [len(f) for f in found])
        shown = place[sources] >= 0
        rows, cols = [place[targets[shown]]], [place[sources[shown]]]
        weights = [np.ones(int(shown.sum()))]
        # ... and from each chunk it occurs in, which receives from it (1, plus the
        # entity's page weight where the chunk's document is titled with its name)
        chunk_nodes = [v for v in order if v >= n]
        lists = [self._chunks[v - n].entities for v in chunk_nodes]
        occurs = np.fromiter(chain.from_iterable(lists), dtype=np.int64)
        chunks = np.repeat(np.asarray(chunk_nodes, dtype=np.int64), [len(e) for e in lists])
        inside = place[occurs] >= 0
        occurs, chunks = occurs[inside], chunks[inside]
        rows += [place[occurs], place[chunks]]
        cols += [place[chunks], place[occurs]]
        sent = np.ones(len(occurs))
        pages = [
            (c, e)
            for c in chunk_nodes
            for e in self._chunks[c - n].about
            if place[e] >= 0 and self._page_weight(e) > 0
        ]
        if pages:
            at = {(int(c), int(e)): i for i, (c, e) in enumerate(zip(chunks, occurs, strict=True))}
            alone = []
            for c, e in pages:
                i = at.get((c, e))
                if i is None:
                    alone.append((c, e))
                else:
                    sent[i] = 1.0 + self._page_weight(e)
            rows.append(place[np.asarray([c for c, _ in alone], dtype=np.int64)])
            cols.append(place[np.asarray([e for _, e in alone], dtype=np.int64)])
            weights.append(np.asarray([self._page_weight(e) for _, e in alone]))
        weights += [np.ones(len(occurs)), sent]
        row, col, weight = np.concatenate(rows), np.concatenate(cols), np.concatenate(weights)
        values = (weight * (1.0 / degree[col])).astype(np.float32)
        from scipy import sparse

        matrix = sparse.csr_matrix((values, (row, col)), shape=(size, size))
        matrix.sort_indices()
        return matrix

    def _counted_partners(self, entities: Sequence[int]) -> None:
        """Keep the partners of counted ``entities``, and the relation naming each pair."""
        assert self._counted is not None or not entities  # entities not read are counted
        wanted = [e for e in entities if e not in self._partners]
        if not wanted or self._counted is None:
            return
        owners, partners, via = self._counted.partners(wanted)
        bounds = np.searchsorted(owners, np.arange(len(wanted) + 1))
        for i, e in enumerate(wanted):
            self._partners[e] = (
                partners[bounds[i] : bounds[i + 1]],
                via[bounds[i] : bounds[i + 1]],
            )

    def _edges_in(self, node: int, within: _Within) -> tuple[list[int], list[float]]:
        """The nodes ``within`` that send ``node`` mass, in node order, and the share each
        sends (the whole graph's matrix entries of the node's row)."""
        n = self.n_entities
        if node < n:
            sources = within.partners(node) + [n + c for c in within.chunks(node)]
            weights = [1.0] * len(sources)
        else:
            chunk = self._chunks[node - n]
            occurs, about = set(chunk.entities), set(chunk.about)
            sources = [v for v in self.in_node_order(occurs | about) if v in within.inside]
            weights = []
            for e in sources:
                page = self._page_weight(e) if e in about else 0.0
                weights.append(1.0 + page if e in occurs else page)
        values = [
            float(np.float32(w * (1.0 / self._degree(u))))
            for w, u in zip(weights, sources, strict=True)
        ]
        return sources, values

    def _degree(self, node: int) -> float:
        if node >= self.n_entities:
            return self._chunks[node - self.n_entities].degree
        degree = self._degrees.get(node)
        if degree is None:
            read = self._entities.get(node)
            if read is not None:
                degree = read.degree
            else:
                pages = self._pages().of_entity.get(node, [])
                degree = float(whole_graph.entity_degree(self._written[node], len(pages)))
            self._degrees[node] = degree
        return degree

    def _page_weight(self, entity: int) -> float:
        read = self._entities.get(entity)
        if read is not None:
            return read.page_weight
        pages = self._pages().of_entity.get(entity, [])
        return max(self._written[entity], 1) / len(pages) if pages else 0.0

    def _via(self, a: int, b: int) -> str:
        n = self.n_entities
        if a >= n or b >= n:
            return "occurs in" if a < n else "mentions"
        for x, y in ((a, b), (b, a)):
            if x in self._entities:
                return self._entities[x].predicates.get(y, "related to")
            if x in self._partners:
                partners, via = self._partners[x]
                at = np.flatnonzero(partners == y)
                if len(at):
                    return str(self.layer.predicates[int(via[at[0]])])
        self._read([a])
        return self._entities[a].predicates.get(b, "related to")

    def _all_visible(self, chunk_ids: Sequence[str]) -> bool:
        """Whether a statement has evidence and every chunk of it is a visible chunk of
        the bundle."""
        if not chunk_ids:
            return False
        rows = [self._rows.get(c, -1) for c in chunk_ids]
        return all(r >= 0 and self._visible[r] for r in rows)

    def _at(self, rows: Sequence[int], values: Sequence[Any]) -> tuple[list[int], list[Any]]:
        """``rows`` and their items of ``values``, read in one pass."""
        rows = list(rows)
        return rows, items_at(values, rows)

    def in_node_order(self, nodes: Iterable[int]) -> list[int]:
        """Nodes in the whole graph's order: entities by id (their rows, when the layer's
        rows are in id order), then chunks by row."""
        nodes = set(nodes)
        if self._in_id_order:
            return sorted(nodes)
        n = self.n_entities
        entities = [v for v in nodes if v < n]
        missing = [e for e in entities if e not in self._ids]
        self._ids.update(zip(missing, items_at(self.layer.entity_ids, missing), strict=True))
        return sorted(entities, key=self._ids.__getitem__) + sorted(v for v in nodes if v >= n)

    def _pages(self) -> _About:
        about = self._about
        if about is None:
            with self._lock:
                if self._about is None:
                    self._about = self._read_pages()
                about = self._about
        return about

    def _read_pages(self) -> _About:
        entities, chunks, pages = whole_graph.about_edges(self.layer, self._titles, self._visible)
        of_entity: dict[int, set[int]] = {}
        of_chunk: dict[int, set[int]] = {}
        for e, c in zip(entities.tolist(), chunks.tolist(), strict=True):
            of_entity.setdefault(e, set()).add(c)
            of_chunk.setdefault(c, set()).add(e)
        return _About(
            pages,
            {e: sorted(rows) for e, rows in of_entity.items()},
            {c: self.in_node_order(found) for c, found in of_chunk.items()},
        )

    # A walk that reaches most of the graph.

    def _walk_whole(self, start: np.ndarray) -> np.ndarray:
        """The walk on the whole graph (built on first use), in this graph's numbering."""
        with self._lock:
            if self._whole is None:
                self._whole = whole_graph.build_whole(
                    self.layer.folded(),
                    self.chunk_ids,
                    self._rows,
                    self._visible_rows,
                    self._titles,
                )
            whole = self._whole
        if self._in_id_order:
            return whole.walk(start)
        # An overlaid layer: its live entity rows are the whole graph's in id order.
        n, m = self.n_entities, whole.n_entities
        row_of = {entity_id: i for i, entity_id in enumerate(whole.layer.entity_ids)}
        dead = self.layer.dead_entities
        ids = enumerate(self.layer.entity_ids)
        live = [(e, row_of[i]) for e, i in ids if e not in dead and i in row_of]
        mine = np.asarray([e for e, _ in live], dtype=np.int64)
        theirs = np.asarray([w for _, w in live], dtype=np.int64)
        shifted = np.zeros(whole.size, dtype=start.dtype)
        shifted[theirs] = start[mine]
        shifted[m:] = start[n:]
        mass = whole.walk(shifted)
        full = np.zeros_like(start)
        full[mine] = mass[theirs]
        full[n:] = mass[m:]
        return full
