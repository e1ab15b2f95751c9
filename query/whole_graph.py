"""The graph arm's walk graph over every row: the graph of one set of visible chunks, built
whole (:func:`build_whole`), and the walk on it.

Nodes are the layer's entity rows, then one per chunk row. An entity has an edge with each
visible chunk it occurs in, with each entity it shares a relation with whose every chunk is
visible (both ends occurring in a visible chunk; the first such relation of a pair names the
edge), and, with titles, with the chunks of the documents titled with one of its aliases
(its pages, which get as much of its mass as every other neighbour together). The matrix is
column-stochastic over those weights, so the walk of :mod:`query.graph` runs sparse
products over it. :mod:`query.local_graph` reads the same graph node by node and must walk
as this one does: the weights, degrees (:func:`entity_degree`) and the order of every sum
are defined here once.
"""

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from algorithms.normalize import normalize_surface
from query.columns import ArrowSequence, list_items
from query.knowledge_layer import KnowledgeLayer
from store.bundles import numbers
from store.knowledge_maps import DESCRIPTION, description_rows
from store.walk_counts import first_of_pairs

if TYPE_CHECKING:  # scipy is imported by the first walk, not by every query process
    from scipy import sparse

DAMPING = 0.85
ITERATIONS = 20
MAX_HOPS = 3
"""The walk runs on the seeds' neighbourhood: nodes at most this many edges away."""
MAX_NODES = 50_000
"""A hop that would take the neighbourhood past this many nodes is not taken."""
MAX_EXPAND_DEGREE = 1_000
"""A node with more edges (an entity in a thousand chunks) is reached but not walked through
when the neighbourhood grows: it says too little about any one of its chunks."""
PATH_HOPS = 4
"""Edges an explanation path may have (longer: reported as reached without a path)."""


class Seed(NamedTuple):
    """One start node of the walk: an entity the query names, or a dense chunk."""

    kind: str  # "entity" or "chunk"
    node: int
    name: str  # the entity's canonical name, or the chunk id
    surface: str  # the query words that linked it (entities), or "dense rank N" (chunks)
    weight: float


class Step(NamedTuple):
    """One edge of an explanation path."""

    via: str  # "occurs in", "mentions", or a relation's predicate
    node: str  # "entity: NAME" or "chunk: ID"


@dataclass
class WalkGraph:
    """The entity-chunk graph of one set of visible chunks."""

    matrix: "sparse.csr_matrix"  # column-stochastic, entities first, then chunk rows
    adjacency: "sparse.csr_matrix"  # symmetric 0/1, for paths
    n_entities: int
    chunk_counts: np.ndarray  # visible chunks each entity occurs in
    chunk_ids: Sequence[str]
    entity_names: Sequence[str]
    predicate_of: dict[tuple[int, int], str]
    layer: KnowledgeLayer
    """The layer whose rows number the entity nodes."""
    pages: dict[str, list[int]] = field(default_factory=dict)
    """Normalized document title (less a trailing parenthesis) -> its visible chunk rows."""
    descriptions: dict[str, list[int]] = field(default_factory=dict)
    """Normalized literal description -> the entities it is stated of (see
    :func:`_descriptions`)."""

    @property
    def size(self) -> int:
        """Nodes: entities, then chunks."""
        return int(self.matrix.shape[0])

    def chunk_count(self, entity: int) -> int:
        """Visible chunks the entity occurs in."""
        return int(self.chunk_counts[entity])

    def described(self, norm: str) -> list[int]:
        """The entities a visible statement describes as ``norm``, first stated first."""
        return self.descriptions.get(norm, [])

    def neighbours(self, node: int) -> np.ndarray:
        """The nodes ``node`` has an edge with, ascending."""
        return self.adjacency[node].indices

    def in_node_order(self, nodes: Iterable[int]) -> list[int]:
        """Nodes ascending (this graph's order)."""
        return sorted(set(nodes))

    def neighbourhood(self, seeds: np.ndarray) -> np.ndarray:
        """Sorted nodes within ``MAX_HOPS`` edges of ``seeds``, hop by hop while the next
        hop keeps them within ``MAX_NODES``; nodes of more than ``MAX_EXPAND_DEGREE`` edges
        are not expanded."""
        indptr = self.adjacency.indptr
        seen = np.zeros(self.adjacency.shape[0], dtype=bool)
        seen[seeds] = True
        count, frontier = int(seen.sum()), np.flatnonzero(seen)
        for _ in range(MAX_HOPS):
            degree = indptr[frontier + 1] - indptr[frontier]
            expand = frontier[degree <= MAX_EXPAND_DEGREE]
            if len(expand) == 0:
                break
            fresh = np.zeros_like(seen)
            fresh[self.adjacency[expand].indices] = True
            fresh &= ~seen
            new = np.flatnonzero(fresh)
            if len(new) == 0 or count + len(new) > MAX_NODES:
                break
            seen |= fresh
            count, frontier = count + len(new), new
        return np.flatnonzero(seen)

    def walk(self, start: np.ndarray) -> np.ndarray:
        """Mass on every node after ``ITERATIONS`` steps of the walk with restart, run on
        the seeds' neighbourhood (mass leaving it is lost): the work is bounded by the
        neighbourhood, not by the size of the corpus."""
        nodes = self.neighbourhood(np.flatnonzero(start))
        whole = len(nodes) * 2 > len(start)  # cheaper to walk everything than to cut
        rows = self.matrix if whole else self.matrix[nodes]
        local_start = start if whole else start[nodes]
        restart = np.float32(1.0 - DAMPING) * local_start
        mass = local_start.copy()
        full = np.zeros_like(start)
        for _ in range(ITERATIONS):
            if whole:
                full = mass
            else:
                full[nodes] = mass
            mass = rows @ full
            mass *= np.float32(DAMPING)
            mass += restart
        if whole:
            return mass
        full = np.zeros_like(start)
        full[nodes] = mass
        return full

    def label(self, node: int) -> str:
        if node < self.n_entities:
            return f"entity: {self.entity_names[node]}"
        return f"chunk: {self.chunk_ids[node - self.n_entities]}"

    def paths(
        self, seeds: Sequence[Seed], mass: np.ndarray, rows: Iterable[int]
    ) -> dict[int, tuple[str, tuple[Step, ...]]]:
        """Walk back from each chunk row to a seed along the edge that brought the most
        mass (``matrix[v, u] * mass[u]``), at most ``PATH_HOPS`` edges."""
        indptr, indices, data = self.matrix.indptr, self.matrix.indices, self.matrix.data

        def in_edges(v: int) -> tuple[np.ndarray, np.ndarray]:
            return indices[indptr[v] : indptr[v + 1]], data[indptr[v] : indptr[v + 1]]

        return trace_paths(seeds, mass, rows, self.n_entities, in_edges, self._via, self.label)

    def _via(self, a: int, b: int) -> str:
        if a < self.n_entities and b < self.n_entities:
            return self.predicate_of.get((min(a, b), max(a, b)), "related to")
        return "occurs in" if a < self.n_entities else "mentions"


def entity_degree(out: int | np.ndarray, pages: int | np.ndarray) -> Any:
    """The weight an entity sends out: one per edge (``out``: its chunks and related
    entities), plus as much again (at least one) over the chunks of its ``pages`` when it
    has any; 1.0 for an entity with no edge."""
    degree = out + np.where(np.asarray(pages) > 0, np.maximum(out, 1), 0)
    return np.where(degree == 0, 1.0, degree).astype(np.float64)


def build_whole(
    layer: KnowledgeLayer,
    chunk_ids: Sequence[str],
    row_of_chunk: dict[str, int],
    visible_rows: np.ndarray | None,
    titles: Callable[[], Sequence[str]] | None = None,
) -> WalkGraph:
    n_entities = len(layer.entity_ids)
    visible = np.ones(len(chunk_ids), dtype=bool)
    if visible_rows is not None:
        visible[:] = False
        visible[visible_rows] = True
    # Entity -> chunk edges: every (entity, chunk) its chunk list names, chunk visible.
    owners, rows = _chunk_rows(layer.entity_chunks, row_of_chunk)
    shown = rows >= 0
    shown[shown] = visible[rows[shown]]
    entity_col, chunk_col = owners[shown], rows[shown]
    counts = np.bincount(entity_col, minlength=n_entities)
    # Entity -> entity edges: a relation between two entities with chunks, all of its
    # evidence visible; the first relation of a pair (by row) names it.
    subject = np.asarray(layer.subjects, dtype=np.int64)
    target = np.asarray(layer.objects, dtype=np.int64)
    owners, rows = _chunk_rows(layer.relations.chunk_ids, row_of_chunk)
    hidden = rows < 0
    hidden[~hidden] = ~visible[rows[~hidden]]
    evidence = np.bincount(owners, minlength=len(subject))
    unseen = np.bincount(owners[hidden], minlength=len(subject))
    linked = target >= 0
    usable = linked & (target != subject) & (evidence > 0) & (unseen == 0)
    usable &= (counts[subject] > 0) & (counts[np.where(linked, target, 0)] > 0)
    chosen = first_of_pairs(np.flatnonzero(usable), subject, target, n_entities)
    low = np.minimum(subject[chosen], target[chosen])
    high = np.maximum(subject[chosen], target[chosen])
    described = ~linked & (evidence > 0) & (unseen == 0) & (counts[subject] > 0)
    predicates = _as_list(layer.predicates)
    predicate_of: dict[tuple[int, int], str] = {
        (lo, hi): predicates[r]
        for r, lo, hi in zip(chosen.tolist(), low.tolist(), high.tolist(), strict=True)
    }
    subjects, objects = subject[chosen].tolist(), target[chosen].tolist()
    n = n_entities + len(chunk_ids)
    chunk_nodes = np.asarray(chunk_col, dtype=np.int64) + n_entities
    entity_nodes = np.asarray(entity_col, dtype=np.int64)
    a = np.concatenate([entity_nodes, chunk_nodes, subjects, objects]).astype(np.int64)
    b = np.concatenate([chunk_nodes, entity_nodes, objects, subjects]).astype(np.int64)
    from scipy import sparse

    adjacency = sparse.csr_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    adjacency.data[:] = 1.0  # an entity named twice in a chunk is one edge
    adjacency.sort_indices()
    weights = adjacency
    out = np.asarray(adjacency.sum(axis=0)).ravel()  # edges: whole numbers, exact
    about_e, about_c, titled = about_edges(layer, titles, visible)
    pages = np.bincount(about_e, minlength=n_entities)
    if len(about_e):
        # An entity sends as much mass to the chunks of the document titled with its name
        # as to every other neighbour together.
        w = np.maximum(out[about_e], 1.0) / pages[about_e]
        about = sparse.csr_matrix((w, (about_c + n_entities, about_e)), shape=(n, n))
        weights = adjacency + about
        adjacency = adjacency.maximum((about + about.T).astype(bool).astype(np.float64))
        adjacency.sort_indices()
    # Each column's sum, computed as query.local_graph computes one node's, to the bit.
    degree = np.where(out == 0, 1.0, out)
    degree[:n_entities] = entity_degree(out[:n_entities], pages)
    # float32: the walk is a ranking, and half the bytes per edge is most of its time.
    matrix = sparse.csr_matrix(weights.multiply(1.0 / degree), dtype=np.float32)
    matrix.sort_indices()
    return WalkGraph(
        matrix=matrix,
        adjacency=adjacency,
        n_entities=n_entities,
        chunk_counts=counts,
        chunk_ids=chunk_ids,
        entity_names=layer.entity_names,
        predicate_of=predicate_of,
        layer=layer,
        pages=titled,
        descriptions=_descriptions(layer, np.flatnonzero(described), subject),
    )


def _descriptions(
    layer: KnowledgeLayer, rows: np.ndarray, subject: np.ndarray
) -> dict[str, list[int]]:
    """Normalized literal description -> subject entities, over the relation ``rows``
    (literal objects, all evidence visible) whose category is :data:`DESCRIPTION`.

    A plain noun phrase is no entity ("an independent publishing house" names nothing
    by itself), but stated of a named thing it describes that thing: a question that
    refers to the thing by the description seeds the thing."""
    rows = rows[_equal(layer.categories, DESCRIPTION)[rows]].tolist()
    texts = [layer.object_texts[r] for r in rows]
    found = description_rows(rows, texts, normalize_surface)
    # each subject once, in the order first stated
    return {
        norm: list(dict.fromkeys(int(subject[r]) for r in named)) for norm, named in found.items()
    }


def _equal(values: Sequence[Any], value: Any) -> np.ndarray:
    """A boolean mask of the items of ``values`` equal to ``value`` (compared in Arrow when
    the sequence is Arrow-backed, without converting it)."""
    if isinstance(values, ArrowSequence):
        return pc.fill_null(pc.equal(values.arrow, value), False).to_numpy(zero_copy_only=False)
    return np.asarray([v == value for v in values], dtype=bool)


def _as_list(values: Sequence[Any]) -> list[Any]:
    """A sequence as a list (an Arrow-backed one converted whole, once)."""
    return values.tolist() if isinstance(values, ArrowSequence) else list(values)


def _chunk_rows(
    lists: Sequence[Sequence[str]], row_of_chunk: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """For every chunk id in ``lists`` (one list per row): the row it is in, and its
    chunk row (-1: not a chunk of this bundle); each distinct id looked up once."""
    owners, distinct, places = list_items(lists)
    ids = pa.array(list(row_of_chunk), type=pa.string())
    at = pc.index_in(distinct.cast(pa.string()), value_set=ids)  # C, not a dict probe each
    found = numbers(pc.fill_null(at, -1)).astype(np.int64)
    rows = np.fromiter(row_of_chunk.values(), dtype=np.int64, count=len(row_of_chunk))
    known = np.where(found >= 0, rows[np.maximum(found, 0)], -1)
    return owners, known[places]


_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")


def about_edges(
    layer: KnowledgeLayer, titles: Callable[[], Sequence[str]] | None, visible: np.ndarray
) -> tuple[np.ndarray, np.ndarray, dict[str, list[int]]]:
    """``(entity, chunk row)`` pairs joining an entity to the visible chunks of the
    documents whose title (less a trailing parenthesis) is one of its aliases: the page
    *about* it; and the visible chunk rows of each normalized title."""
    if titles is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), {}
    rows_of: dict[str, list[int]] = {}
    norm_of: dict[str, str] = {}  # a document's chunks share its title
    for row, title in enumerate(titles()):
        if title and visible[row]:
            norm = norm_of.get(title)
            if norm is None:
                norm = norm_of[title] = normalize_surface(_DISAMBIGUATION.sub("", title))
            rows_of.setdefault(norm, []).append(row)
    entities: list[int] = []
    chunks: list[int] = []
    for norm, rows in rows_of.items():
        for e in layer.aliases.get(norm, []):
            entities += [e] * len(rows)
            chunks += rows
    return np.asarray(entities, dtype=np.int64), np.asarray(chunks, dtype=np.int64), rows_of


EdgesIn = Callable[[int], tuple[np.ndarray, np.ndarray]]
"""A node -> the nodes that send it mass, in node order, and the share each sends."""


def trace_paths(
    seeds: Sequence[Seed],
    mass: np.ndarray,
    rows: Iterable[int],
    n_entities: int,
    in_edges: EdgesIn,
    via: Callable[[int, int], str],
    label: Callable[[int], str],
) -> dict[int, tuple[str, tuple[Step, ...]]]:
    """Walk back from each chunk row to a seed along the edge that brought the most mass
    (share × the sender's mass; ties to the sender first in node order), at most
    ``PATH_HOPS`` edges: the seed's label and the steps, for each row that reaches one."""
    seed_nodes = {s.node for s in seeds}
    found = {}
    for row in sorted(set(rows)):
        trail = [n_entities + row]
        while trail[-1] not in seed_nodes and len(trail) <= PATH_HOPS:
            sources, values = in_edges(trail[-1])
            inflow = values * mass[sources]
            best = [
                int(sources[i])
                for i in np.lexsort((np.arange(len(sources)), -inflow)).tolist()
                if inflow[i] > 0 and int(sources[i]) not in trail
            ]
            if not best:
                break
            trail.append(best[0])
        if trail[-1] not in seed_nodes:
            continue
        trail.reverse()
        steps = tuple(Step(via(a, b), label(b)) for a, b in pairwise(trail))
        found[row] = (label(trail[0]), steps)
    return found
