"""Checks that a walk graph read node by node (query.local_graph) walks as the whole graph
built over every row does (query.graph.build_whole), shared by the query and update tests."""

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


def assert_same_walks(layer, whole_layer, chunk_ids, row_of_chunk, visible, titles=None) -> int:
    """``layer``'s walk graph (read node by node) against the whole graph of
    ``whole_layer`` (the same generation, built whole): the same chunk counts,
    descriptions, neighbours, walks (to the bit) and paths, entities compared by id.
    Returns how many of the walks stayed local (did not walk the whole graph)."""
    layer.walk_graphs.clear()
    local = LocalGraph(layer, chunk_ids, row_of_chunk, visible, titles)
    whole = build_whole(whole_layer, chunk_ids, row_of_chunk, visible, titles)
    n, m = local.n_entities, whole.n_entities
    mine = {entity_id: e for e, entity_id in enumerate(layer.entity_ids)}
    dead = set(layer.dead_entities)
    theirs = [mine[entity_id] for entity_id in whole_layer.entity_ids]  # whole row -> mine
    assert not dead & set(theirs)

    def to_mine(node: int) -> int:
        return theirs[node] if node < m else n + node - m

    for row, e in enumerate(theirs):
        assert local.chunk_count(e) == whole.chunk_count(row), whole_layer.entity_ids[row]
    for norm, subjects in whole.descriptions.items():
        assert local.described(norm) == [theirs[s] for s in subjects], norm
    assert local.pages == whole.pages
    for node in range(whole.size):
        expected = local.in_node_order(to_mine(v) for v in whole.neighbours(node))
        assert local.neighbours(to_mine(node)).tolist() == expected
    stayed = 0
    for seeds in seed_sets(m, len(chunk_ids)):
        start = np.zeros(whole.size, dtype=np.float32)
        start[seeds] = 1.0 / len(seeds)
        mapped = np.zeros(local.size, dtype=np.float32)
        mapped[[to_mine(v) for v in seeds]] = 1.0 / len(seeds)
        hood = whole.neighbourhood(np.asarray(seeds))
        assert local.neighbourhood(np.asarray([to_mine(v) for v in seeds])).tolist() == [
            to_mine(v) for v in hood
        ]
        stayed += len(hood) * 2 <= whole.size
        expected, found = whole.walk(start), local.walk(mapped)
        assert np.array_equal(found[n:], expected[m:])  # to the bit
        assert np.array_equal(found[theirs], expected[:m])
        named = [Seed("entity", v, "", "", 1.0) for v in seeds]
        rows = np.flatnonzero(expected[m:] > 0).tolist()
        assert local.paths(
            [s._replace(node=to_mine(s.node)) for s in named], found, rows
        ) == whole.paths(named, expected, rows)
    return stayed


def local_hops(monkeypatch, hops: int) -> None:
    """Bound the walk's neighbourhood to ``hops`` edges (a small bundle's walks then stay
    local, as a large corpus's do)."""
    monkeypatch.setattr(whole_graph, "MAX_HOPS", hops)


def read_node_by_node(monkeypatch) -> None:
    """Give every layer with the lookups a graph read node by node, however small."""
    monkeypatch.setattr(graph_module, "LOCAL_FROM", 0)
