"""The weighted entity graph and its Louvain dendrogram (pure, seeded, order-free).

Contract: nodes and edges are inserted in sorted order and Louvain runs with a
fixed seed, so the same relations in any order give the same partitions. Edge
weight is the supporting-statement count times a category weight (typed
relations 1.0, sentence co-occurrence 0.3).

Two engines compute the levels (``community_levels``): ``python-louvain`` (the
reference: a networkx graph and python-louvain's dendrogram) and ``leiden`` (the same
Louvain levels by leidenalg's C++ local moving, one connected component or pack of
small ones at a time: ``algorithms.leiden``). The reports read the graph as a plain
adjacency (``adjacency``), not through networkx.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import networkx as nx
from community import community_louvain

from algorithms.summaries import COOCCURRENCE
from schemas import Relation

CATEGORY_WEIGHT = {COOCCURRENCE: 0.3}


Edge = tuple[str, str, float]
Adjacency = Mapping[str, Mapping[str, float]]
ENGINES = ("python-louvain", "leiden")


def weighted_edges(relations: Iterable[Relation]) -> list[Edge]:
    """``(a, b, weight)`` with ``a < b``, sorted: one edge per pair of entities linked by
    relations with entity objects, weights summed and rounded to 6 places."""
    weights: dict[tuple[str, str], float] = {}
    for r in relations:
        if r.object_id is None or r.object_id == r.subject_id:
            continue
        a, b = sorted((r.subject_id, r.object_id))
        weights[(a, b)] = weights.get((a, b), 0.0) + r.support * CATEGORY_WEIGHT.get(
            r.category, 1.0
        )
    return [(a, b, round(w, 6)) for (a, b), w in sorted(weights.items())]


def graph_of(edges: Sequence[Edge]) -> nx.Graph:
    """The networkx graph of sorted ``edges`` (nodes inserted in sorted order)."""
    graph = nx.Graph()
    graph.add_nodes_from(sorted({n for a, b, _ in edges for n in (a, b)}))
    graph.add_weighted_edges_from(edges)
    return graph


def entity_graph(relations: Iterable[Relation]) -> nx.Graph:
    """Undirected weighted graph over entities linked by relations with entity objects."""
    return graph_of(weighted_edges(relations))


def adjacency(edges: Sequence[Edge]) -> dict[str, dict[str, float]]:
    """``node -> {neighbour: weight}`` of sorted ``edges``, in the order networkx's
    ``graph_of(edges).adj`` has (so sums over it give the same floats), at about half
    its memory."""
    adj: dict[str, dict[str, float]] = {n: {} for n in sorted({n for e in edges for n in e[:2]})}
    for a, b, w in edges:
        adj[a][b] = w
        adj[b][a] = w
    return adj


def community_levels(
    edges: Sequence[Edge],
    *,
    engine: Literal["python-louvain", "leiden"],
    seed: int,
    resolution: float = 1.0,
) -> list[dict[str, int]]:
    """Node -> community number at each Louvain level, finest first, by ``engine``.

    Raises:
        ValueError: an unknown engine.
    """
    if engine == "python-louvain":
        return louvain_levels(graph_of(edges), seed=seed, resolution=resolution)
    if engine == "leiden":
        from algorithms.leiden import leiden_levels

        return leiden_levels(edges, seed=seed, resolution=resolution)
    raise ValueError(f"unknown community engine {engine!r}; one of {ENGINES}")


def louvain_levels(graph: nx.Graph, *, seed: int, resolution: float = 1.0) -> list[dict[str, int]]:
    """Node -> community number at each dendrogram level, finest first.

    Returns an empty list for a graph without edges.
    """
    if graph.number_of_edges() == 0:
        return []
    dendrogram = community_louvain.generate_dendrogram(
        graph, weight="weight", resolution=resolution, random_state=seed
    )
    return [
        community_louvain.partition_at_level(dendrogram, level) for level in range(len(dendrogram))
    ]


def weighted_degree(graph: nx.Graph | Adjacency, nodes: Iterable[str]) -> dict[str, float]:
    """Each node's total edge weight inside the subgraph induced by ``nodes``.

    Reads the adjacency directly rather than through a networkx subgraph view, which
    filters every neighbour through its own checks (SciFact's communities: 36 s, was
    40 s). The sum runs in adjacency order, as ``subgraph(nodes).degree(weight=...)``
    does, so the floats are the same; nodes not in the graph are left out, as there.
    """
    if isinstance(graph, nx.Graph):
        adj = graph.adj
        inside = {n for n in nodes if n in adj}
        return {
            n: float(sum(d["weight"] for m, d in adj[n].items() if m in inside)) for n in inside
        }
    inside = {n for n in nodes if n in graph}
    return {n: float(sum(w for m, w in graph[n].items() if m in inside)) for n in inside}


def internal_edges(graph: nx.Graph | Adjacency, nodes: Iterable[str]) -> list[tuple[str, str]]:
    """The edges with both ends in ``nodes``, each once as ``(a, b)`` with ``a < b``."""
    adj = graph.adj if isinstance(graph, nx.Graph) else graph
    inside = {n for n in nodes if n in adj}
    return [(a, b) for a in inside for b in adj[a] if a < b and b in inside]
