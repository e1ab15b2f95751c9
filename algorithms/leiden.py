"""Louvain levels in C++ (igraph + leidenalg), one part of the graph at a time.

Contract: the same weighted edges in any order give the same levels (nodes are numbered
in sorted order, edges sorted, and every random choice comes from ``seed``), and the
levels have python-louvain's shape: ``levels[0]`` is the partition after the first
local-moving pass over single nodes, each next level the partition after moving the
communities of the one below as nodes (aggregation), until a pass merges nothing; every
level is a coarsening of the one below.

Why parts are sound: the objective (modularity with resolution ``gamma``: the sum over
same-community pairs of ``A_ij - gamma * k_i * k_j / 2m``) is a sum over connected
components, and moving a node into a community of another component only lowers it, so
each component is optimized on its own. A part (one component, or several small ones
packed together) alone has total weight ``m_p``, so it runs with resolution
``gamma * m_p / m``: its null-model term is then the whole graph's. Parts can run in
parallel processes, and no step holds the graph as Python objects: each part is an
igraph graph (a few machine words per edge).
"""

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import NamedTuple

import numpy as np

Edge = tuple[str, str, float]
PART_EDGES = 200_000  # small components are packed into parts of about this many edges


class _Part(NamedTuple):
    """One part of the graph: its nodes (global numbers, sorted) and its edges in local
    numbers."""

    nodes: np.ndarray
    sources: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    resolution: float
    seed: int


def _components(count: int, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Each node's connected component number (numbered by smallest node)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    ones = np.ones(len(sources), dtype=np.int8)
    matrix = coo_matrix((ones, (sources, targets)), shape=(count, count))
    _, labels = connected_components(matrix, directed=False)
    return np.asarray(labels, dtype=np.int64)


def _pack(labels: np.ndarray, sources: np.ndarray, part_edges: int) -> list[np.ndarray]:
    """Component numbers grouped into parts: largest first, a component over
    ``part_edges`` edges alone, smaller ones packed until a part reaches it."""
    sizes = np.bincount(labels[sources], minlength=int(labels.max()) + 1)
    order = sorted((c for c in range(len(sizes)) if sizes[c]), key=lambda c: (-sizes[c], c))
    parts: list[list[int]] = []
    filled = part_edges
    for component in order:
        if filled >= part_edges:
            parts.append([])
            filled = 0
        parts[-1].append(component)
        filled += int(sizes[component])
    return [np.asarray(sorted(p), dtype=np.int64) for p in parts]


def _split(
    edges: Sequence[Edge], *, seed: int, resolution: float, part_edges: int
) -> tuple[list[str], list[_Part]]:
    nodes = sorted({n for a, b, _ in edges for n in (a, b)})
    number = {n: i for i, n in enumerate(nodes)}
    ordered = sorted((min(a, b), max(a, b), w) for a, b, w in edges)
    sources = np.fromiter((number[a] for a, _, _ in ordered), np.int64, len(ordered))
    targets = np.fromiter((number[b] for _, b, _ in ordered), np.int64, len(ordered))
    weights = np.fromiter((w for _, _, w in ordered), np.float64, len(ordered))
    labels = _components(len(nodes), sources, targets)
    total = float(weights.sum())
    parts = []
    for components in _pack(labels, sources, part_edges):
        inside = np.isin(labels, components)
        members = np.flatnonzero(inside)
        local = np.full(len(nodes), -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        chosen = inside[sources]
        part_weights = weights[chosen]
        share = float(part_weights.sum()) / total
        parts.append(
            _Part(
                members,
                local[sources[chosen]],
                local[targets[chosen]],
                part_weights,
                resolution * share,
                seed,
            )
        )
    return nodes, parts


def part_levels(part: _Part) -> list[np.ndarray]:
    """Local community numbers of the part's nodes at each level, finest first."""
    import igraph as ig
    import leidenalg as la

    graph = ig.Graph(
        n=len(part.nodes),
        edges=np.column_stack([part.sources, part.targets]).tolist(),
        edge_attrs={"weight": part.weights.tolist()},
    )
    current = la.RBConfigurationVertexPartition(
        graph, weights="weight", resolution_parameter=part.resolution
    )
    optimiser = la.Optimiser()
    optimiser.set_rng_seed(part.seed)
    membership = np.arange(len(part.nodes))
    levels = []
    while True:
        optimiser.move_nodes(current)
        current.renumber_communities()
        if len(current) == current.graph.vcount():
            break  # nothing merged: the last level stands
        membership = np.asarray(current.membership, dtype=np.int64)[membership]
        levels.append(membership)
        current = current.aggregate_partition()
    return levels


def _joined(nodes: list[str], parts: list[_Part], found: list[list[np.ndarray]]) -> list[dict]:
    """The parts' levels as whole-graph levels: a part with fewer levels keeps its last
    one (it had converged, as python-louvain's communities of that part would have)."""
    depth = max((len(levels) for levels in found), default=0)
    out = []
    for level in range(depth):
        assignment = np.zeros(len(nodes), dtype=np.int64)
        offset = 0
        for part, levels in zip(parts, found, strict=True):
            local = levels[min(level, len(levels) - 1)] if levels else np.arange(len(part.nodes))
            assignment[part.nodes] = local + offset
            offset += int(local.max()) + 1 if len(local) else 0
        out.append(dict(zip(nodes, assignment.tolist(), strict=True)))
    return out


def leiden_levels(
    edges: Sequence[Edge],
    *,
    seed: int,
    resolution: float = 1.0,
    workers: int = 1,
    part_edges: int = PART_EDGES,
) -> list[dict[str, int]]:
    """Node -> community number at each Louvain level, finest first (python-louvain's
    shape), computed part by part with leidenalg's local moving.

    Args:
        edges: ``(a, b, weight)`` undirected edges, at most one per pair.
        seed: leidenalg's random seed (each part's).
        resolution: the modularity resolution ``gamma``.
        workers: processes that run parts side by side (1: in this process).
        part_edges: small components are packed into parts of about this many edges.

    Returns:
        One ``{node: community}`` dict per level; empty for no edges.
    """
    if not edges:
        return []
    nodes, parts = _split(edges, seed=seed, resolution=resolution, part_edges=part_edges)
    if workers > 1 and len(parts) > 1:
        with ProcessPoolExecutor(min(workers, len(parts)), mp_context=get_context("spawn")) as pool:
            found = list(pool.map(part_levels, parts))
    else:
        found = [part_levels(part) for part in parts]
    return _joined(nodes, parts, found)
