"""The graph arm: a Personalized PageRank walk over the knowledge layer that scores chunks.

The graph has a node per canonical entity and per chunk, and an undirected edge between an
entity and each chunk it occurs in, and between a relation's subject and object (each pair
once). Seeds are the query's entities: word n-grams (1-4 words) that are an alias of a
canonical entity, linked longest first (an n-gram that names an entity claims its words),
each weighted by its specificity (1 / the chunks it occurs in or the chunks whose text holds
its words, whichever is more; past ``MAX_SEED_CHUNKS`` it says too little to be a seed),
plus the best dense chunks, which hold ``CHUNK_SHARE`` of the mass (HippoRAG 2 seeds
passages as well as entities, with less weight than the entities). The walk runs
``ITERATIONS`` power iterations with restart; chunks rank by the mass that reaches them,
so a passage that shares no word with the query (the bridge of a multi-hop question) ranks
when it shares entities with the seeds' passages.

Contract: the walk only sees what the caller may see. A graph is built per set of visible
access classes, from visible chunks only, and a relation edge only when every chunk that
states it is visible, so the ranking of a visible chunk never depends on an invisible one.
Work per query is bounded by the seeds, not by the corpus: at most ``MAX_SEEDS`` entity
seeds; the walk runs on their neighbourhood (at most ``MAX_HOPS`` edges out and
``MAX_NODES`` nodes, hubs not expanded), ``ITERATIONS`` sparse products over its edges; and
it is deterministic (ties by chunk id). A layer that answers the lookups of
:mod:`query.local_graph` (every bundle whose knowledge tables have map files) gives, past
:data:`LOCAL_FROM` nodes, a graph whose nodes' edges are read when a walk reaches them; any
other, the whole graph (:mod:`query.whole_graph`), built on first use. Either is kept with
the knowledge layer, per set of visible chunks.
"""

import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from algorithms.normalize import normalize_surface
from query.fusion import SCORE_DECIMALS, ArmHit
from query.knowledge_layer import KnowledgeLayer
from query.local_graph import LocalGraph, has_lookups
from query.whole_graph import Seed, Step, WalkGraph, build_whole

Graph = WalkGraph | LocalGraph
"""A walk graph: read node by node from the layer's lookups, or built whole."""
MAX_SEED_CHUNKS = 50
MAX_SEEDS = 32
DENSE_SEEDS = 5
CHUNK_SHARE = 0.25
"""The dense chunks' share of the seeds' mass when an entity seeds too (0.5 before the
seeds were linked longest first; 0.25 was better on MuSiQue and HotpotQA, docs/benchmarks.md)."""
MAX_NGRAM = 4
_WORD = re.compile(r"[\w'-]+")


class Walk(NamedTuple):
    """The graph arm's outcome for one query: its seeds and its ranked chunks."""

    seeds: tuple[Seed, ...]
    hits: tuple[ArmHit, ...]
    graph: "Graph | None"
    mass: np.ndarray | None = None

    def paths(self, rows: Iterable[int]) -> dict[int, tuple[str, tuple[Step, ...]]]:
        """For each chunk row: the seed its path starts from and the steps (entity ->
        relation -> entity -> chunk) that carried the most mass to it; rows with no
        such path within ``PATH_HOPS`` edges are left out."""
        if self.graph is None or self.mass is None or not self.seeds:
            return {}
        return self.graph.paths(self.seeds, self.mass, rows)


LOCAL_FROM = 200_000
"""Nodes (entities and chunks) from which a layer's walk graph is read node by node. A
smaller graph is built whole on its first walk (at 10k synthetic documents, 54k nodes, in
0.06–0.09 s; 200k nodes take about 0.7 s) and every later walk is a few sparse products on
it, where a node-by-node walk assembles its neighbourhood's edges in Python each time: on
HotpotQA's and MuSiQue's train100 bundles the multi-hop route's p95 was 2–4× that of the
whole graph (docs/benchmarks.md, issue 53)."""
_LOCK = threading.Lock()


def walk_graph(
    layer: KnowledgeLayer,
    chunk_ids: Sequence[str],
    row_of_chunk: dict[str, int],
    visible_rows: np.ndarray | None,
    titles: Callable[[], Sequence[str]] | None = None,
) -> Graph:
    """The graph over the chunks in ``visible_rows`` (``None``: every chunk), kept on the
    layer per visible set: read node by node from the layer's lookups when it has them
    and the graph has :data:`LOCAL_FROM` nodes or more
    (:class:`query.local_graph.LocalGraph`: nothing is built here), else built whole over
    the layer's rows (an overlaid layer's fold). ``titles`` gives each chunk row's
    document title (:func:`chunk_titles`), called when the graph first needs it: with it,
    an entity also leads to the document titled with its name."""
    local = has_lookups(layer) and len(layer.entity_ids) + len(chunk_ids) >= LOCAL_FROM
    if not local:
        layer = layer.folded()
    key = None if visible_rows is None else hashlib.sha256(visible_rows.tobytes()).hexdigest()
    with _LOCK:
        cached = layer.walk_graphs.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    graph: WalkGraph | LocalGraph
    if local:
        graph = LocalGraph(layer, chunk_ids, row_of_chunk, visible_rows, titles)
    else:
        graph = build_whole(layer, chunk_ids, row_of_chunk, visible_rows, titles)
    with _LOCK:
        graph = layer.walk_graphs.setdefault(key, graph)
    return graph


def chunk_titles(bundle: Any) -> list[str]:
    """Each chunk row's document title."""
    return [str(bundle.documents[d].get("title") or "") for d in bundle.chunk_doc_ids]


Spread = Callable[[str], int | None]
"""How many visible chunks hold every indexed word of a query surface; ``None`` when the
surface has no indexed word (stopwords only)."""


def text_spread(lexical: Any, visible_rows: np.ndarray | None) -> Spread:
    """A :data:`Spread` over ``lexical``'s postings (a bundle's BM25 index, one segment or
    merged), counting only ``visible_rows`` (``None``: every row): a seed's weight never
    depends on a chunk the caller may not see."""

    def spread(surface: str) -> int | None:
        tokens = lexical.tokenize(surface)
        if not tokens:
            return None
        rows = lexical.postings(tokens[0])
        for token in tokens[1:]:
            rows = np.intersect1d(rows, lexical.postings(token), assume_unique=True)
        if visible_rows is not None:
            rows = np.intersect1d(rows, visible_rows, assume_unique=True)
        return len(rows)

    return spread


def entity_seeds(
    layer: KnowledgeLayer, graph: Graph, query: str, spread: Spread | None = None
) -> list[Seed]:
    """Entities the query's word n-grams name, weighted by specificity, at most
    ``MAX_SEEDS`` of the most specific.

    Linking is greedy, longest n-gram first: an n-gram that names an entity with visible
    chunks claims its words, so "Kate Ramsay" is not also linked as "Kate" and "Ramsay".
    An n-gram that names no entity but is a description stated of some (see
    :func:`_descriptions`) links those.
    An entity's specificity is 1 / the chunks it occurs in or, with ``spread``, 1 / the
    chunks whose text holds the n-gram's words, whichever is more: a word like "opera"
    that was extracted as an entity once but stands in many chunks says little. Past
    ``MAX_SEED_CHUNKS`` chunks, or with no indexed word, it is no seed.

    ``layer`` is the layer asked; the graph's own (``layer`` or its fold) numbers the
    seeds."""
    layer = graph.layer
    words = _WORD.findall(query)
    claimed = [False] * len(words)
    found: dict[int, Seed] = {}
    for size in range(min(MAX_NGRAM, len(words)), 0, -1):
        for i in range(len(words) - size + 1):
            if any(claimed[i : i + size]):
                continue
            surface = " ".join(words[i : i + size])
            norm = normalize_surface(surface)
            named = [e for e in layer.aliases.get(norm, []) if graph.chunk_count(e) > 0]
            named = named or graph.described(norm)
            if not named:
                continue
            claimed[i : i + size] = [True] * size
            holding = spread(surface) if spread is not None else 0
            if holding is None:
                continue
            for e in named:
                count = max(graph.chunk_count(e), holding)
                if count <= MAX_SEED_CHUNKS and e not in found:
                    found[e] = Seed("entity", e, layer.entity_names[e], surface, 1.0 / count)
    ranked = sorted(found.values(), key=lambda s: (-s.weight, layer.entity_ids[s.node]))
    return ranked[:MAX_SEEDS]


def chunk_seeds(graph: Graph, dense: Sequence[ArmHit], entity_mass: float) -> list[Seed]:
    """The top ``DENSE_SEEDS`` dense chunks, weighted 1/rank, together holding
    ``CHUNK_SHARE`` of the seeds' mass (all of it when no entity is a seed)."""
    top = sorted(dense, key=lambda h: h.rank)[:DENSE_SEEDS]
    if not top:
        return []
    total = CHUNK_SHARE / (1 - CHUNK_SHARE) * entity_mass if entity_mass > 0 else 1.0
    norm = sum(1.0 / h.rank for h in top)
    return [
        Seed(
            "chunk",
            graph.n_entities + h.row,
            graph.chunk_ids[h.row],
            f"dense rank {h.rank}",
            total / h.rank / norm,
        )
        for h in top
    ]


def graph_arm(
    layer: KnowledgeLayer,
    graph: Graph,
    query: str,
    dense: Sequence[ArmHit],
    depth: int,
    spread: Spread | None = None,
) -> Walk:
    """Rank chunks by the walk from the query's entity seeds and its best dense chunks.

    Only the rows of ``graph`` can rank; a query with no seed ranks nothing. ``spread``
    (:func:`text_spread`) lets a seed's specificity count the chunks whose text holds
    the words that linked it.
    """
    seeds = entity_seeds(layer, graph, query, spread)
    seeds += chunk_seeds(graph, dense, sum(s.weight for s in seeds))
    if not seeds:
        return Walk((), (), graph)
    start = np.zeros(graph.size, dtype=np.float32)
    for seed in seeds:
        start[seed.node] += seed.weight
    # Summed in the graph's node order, so that any numbering of the same graph (a
    # window's overlaid layer, a whole one) starts from the same numbers.
    start /= np.float32(np.sum(start[graph.in_node_order(seed.node for seed in seeds)]))
    full = graph.walk(start)
    mass = full[graph.n_entities :]
    reached = np.flatnonzero(mass > 0)
    # Rows are in chunk-id order, so the row is the chunk-id tie-break.
    order = np.lexsort((reached, -mass[reached]))[:depth]
    hits = tuple(
        ArmHit(int(reached[i]), rank, round(float(mass[reached[i]]), SCORE_DECIMALS))
        for rank, i in enumerate(order, start=1)
    )
    return Walk(tuple(seeds), hits, graph, full)
