"""Checks that a walk graph read node by node (query.local_graph) walks as the whole graph
built over every row does (query.graph.build_whole), shared by the query and update tests."""

from typing import NamedTuple

import numpy as np

import query.graph as graph_module
import query.whole_graph as whole_graph
from query.local_graph import LocalGraph
from query.whole_graph import Seed, build_whole


def seed_sets(n_entities: int, n_chunks: int, count: int = 12) -> list[list[int]]:
    """Seed node sets: single entities and chunks spread over the graph, and mixes."""
    rng = np.random.default_rng(7)
    entities = np.linspace(0, n_entities - 1, num=min(count, n_entities), dtype=int).tolist()
    chunks = [n_entities + r for r in range(0, n_chunks, max(1, n_chunks // 4))]
    sets = [[e] for e in entities] + [[c] for c in chunks]
    for _ in range(count // 2):
        size = int(rng.integers(2, 5))
        sets.append(sorted({int(v) for v in rng.integers(0, n_entities + n_chunks, size)}))
    return sets


class Walked(NamedTuple):
    stayed: int
    """Walks that stayed local (did not walk the whole graph)."""
    counted: int
    """The most entities reached and not read (their edges counted at build time) after a
    walk."""


def assert_same_walks(layer, whole_layer, chunk_ids, row_of_chunk, visible, titles=None) -> Walked:
    """``layer``'s walk graph (read node by node) against the whole graph of
    ``whole_layer`` (the same generation, built whole): the same walks (to the bit) and
    paths on a graph made afresh (so that the walks read only what they need), and the
    same chunk counts, descriptions and neighbours of every node, entities compared by
    id."""
    layer.walk_graphs.clear()
    walker = LocalGraph(layer, chunk_ids, row_of_chunk, visible, titles)
    local = LocalGraph(layer, chunk_ids, row_of_chunk, visible, titles)
    whole = build_whole(whole_layer, chunk_ids, row_of_chunk, visible, titles)
    n, m = local.n_entities, whole.n_entities
    mine = {entity_id: e for e, entity_id in enumerate(layer.entity_ids)}
    dead = set(layer.dead_entities)
    theirs = [mine[entity_id] for entity_id in whole_layer.entity_ids]  # whole row -> mine
    assert not dead & set(theirs)

    def to_mine(node: int) -> int:
        return theirs[node] if node < m else n + node - m

    stayed = counted = 0
    for seeds in seed_sets(m, len(chunk_ids)):
        start = np.zeros(whole.size, dtype=np.float32)
        start[seeds] = 1.0 / len(seeds)
        mapped = np.zeros(walker.size, dtype=np.float32)
        mapped[[to_mine(v) for v in seeds]] = 1.0 / len(seeds)
        hood = whole.neighbourhood(np.asarray(seeds))
        assert walker.neighbourhood(np.asarray([to_mine(v) for v in seeds])).tolist() == [
            to_mine(v) for v in hood
        ]
        stayed += len(hood) * 2 <= whole.size
        expected, found = whole.walk(start), walker.walk(mapped)
        counted = max(counted, walker.nodes_counted)
        assert np.array_equal(found[n:], expected[m:])  # to the bit
        assert np.array_equal(found[theirs], expected[:m])
        named = [Seed("entity", v, "", "", 1.0) for v in seeds]
        rows = np.flatnonzero(expected[m:] > 0).tolist()
        assert walker.paths(
            [s._replace(node=to_mine(s.node)) for s in named], found, rows
        ) == whole.paths(named, expected, rows)
    for row, e in enumerate(theirs):
        assert local.chunk_count(e) == whole.chunk_count(row), whole_layer.entity_ids[row]
    for norm, subjects in whole.descriptions.items():
        assert local.described(norm) == [theirs[s] for s in subjects], norm
    assert local.pages == whole.pages
    for node in range(whole.size):
        expected = local.in_node_order(to_mine(v) for v in whole.neighbours(node))
        assert local.neighbours(to_mine(node)).tolist() == expected
    return Walked(stayed, counted)


def local_hops(monkeypatch, hops: int) -> None:
    """Bound the walk's neighbourhood to ``hops`` edges (a small bundle's walks then stay
    local, as a large corpus's do)."""
    monkeypatch.setattr(whole_graph, "MAX_HOPS", hops)


def small_hubs(monkeypatch, degree: int) -> None:
    """Stop the walk's neighbourhood at nodes of more than ``degree`` edges (hubs, on a
    small bundle)."""
    monkeypatch.setattr(whole_graph, "MAX_EXPAND_DEGREE", degree)


def read_node_by_node(monkeypatch) -> None:
    """Give every layer with the lookups a graph read node by node, however small."""
    monkeypatch.setattr(graph_module, "LOCAL_FROM", 0)
