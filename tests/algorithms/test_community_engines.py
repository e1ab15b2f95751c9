"""Community engines: the leiden engine against python-louvain (the reference), its
determinism, its part-by-part split, and the Community rows' levels and parents."""

import itertools
import random

import networkx as nx
import pytest
from community import community_louvain
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.communities import detect_communities
from algorithms.graph import (
    adjacency,
    community_levels,
    entity_graph,
    graph_of,
    internal_edges,
    louvain_levels,
    weighted_degree,
    weighted_edges,
)
from algorithms.leiden import leiden_levels
from schemas import Relation
from store.config import KnowledgeConfig


def relation(a: str, b: str, support: int = 1, doc: str = "d") -> Relation:
    return Relation(
        relation_id=f"{a}-{b}",
        subject_id=a,
        predicate="of",
        object_id=b,
        object_text=b,
        category="process",
        confidence=0.6,
        support=support,
        chunk_ids=[f"c-{a}-{b}"],
        sentence_doc_ids=[f"{doc}{a}", f"{doc}{b}"],
        sentence_starts=[0, 0],
        sentence_ends=[10, 10],
        summary=f"{a} — of — {b}",
    )


def planted(
    seed: int, groups: int = 6, size: int = 12, islands: int = 3, inside: float = 0.5
) -> list[Relation]:
    """A planted-partition graph (dense groups, sparse links between) plus a few
    disconnected small islands: several components, as real entity graphs have."""
    graph = nx.planted_partition_graph(groups, size, inside, 0.03, seed=seed)
    rng = random.Random(seed)
    rels = [relation(f"n{a:03d}", f"n{b:03d}", support=rng.randint(1, 4)) for a, b in graph.edges]
    for island in range(islands):
        members = [f"i{island}x{k}" for k in range(4)]
        rels += [relation(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    return rels


def modularity(edges, partition) -> float:
    return community_louvain.modularity(partition, graph_of(edges))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_leiden_modularity_matches_python_louvain(seed):
    edges = weighted_edges(planted(seed))
    reference = louvain_levels(graph_of(edges), seed=17)
    found = leiden_levels(edges, seed=17)
    assert modularity(edges, found[-1]) == pytest.approx(modularity(edges, reference[-1]), abs=0.01)
    assert modularity(edges, found[0]) > 0.3


def test_leiden_matches_python_louvain_on_the_karate_club():
    graph = nx.karate_club_graph()
    edges = sorted((f"k{min(a, b):02d}", f"k{max(a, b):02d}", 1.0) for a, b in graph.edges)
    reference = louvain_levels(graph_of(edges), seed=17)
    found = leiden_levels(edges, seed=17)
    assert modularity(edges, found[-1]) == pytest.approx(modularity(edges, reference[-1]), abs=0.01)


@settings(max_examples=10, deadline=None)
@given(st.randoms(use_true_random=False))
def test_leiden_levels_ignore_edge_order_and_direction(rng):
    edges = weighted_edges(planted(7))
    expected = leiden_levels(edges, seed=17)
    shuffled = [(b, a, w) if rng.random() < 0.5 else (a, b, w) for a, b, w in edges]
    rng.shuffle(shuffled)
    assert leiden_levels(shuffled, seed=17) == expected


def test_levels_nest_and_cover_every_node():
    edges = weighted_edges(planted(11))
    nodes = {n for a, b, _ in edges for n in (a, b)}
    levels = leiden_levels(edges, seed=17)
    assert len(levels) >= 2
    for below, above in itertools.pairwise(levels):
        assert set(below) == set(above) == nodes
        upward: dict[int, int] = {}
        for node, community in below.items():
            assert upward.setdefault(community, above[node]) == above[node]  # a coarsening


def test_parts_and_workers_keep_the_objective():
    """Components alone (tiny parts, in two processes) or all in one part: the same
    objective, so the same modularity within tolerance; workers never change levels."""
    edges = weighted_edges(planted(13, islands=6))
    together = leiden_levels(edges, seed=17, part_edges=10**9)
    alone = leiden_levels(edges, seed=17, part_edges=1)
    assert modularity(edges, alone[-1]) == pytest.approx(modularity(edges, together[-1]), abs=0.01)
    assert leiden_levels(edges, seed=17, part_edges=1, workers=2) == alone
    for island in range(6):  # a 4-clique island is one community on its own
        assert len({alone[-1][f"i{island}x{k}"] for k in range(4)}) == 1


def test_community_rows_have_valid_levels_and_parents():
    rels = planted(17)
    names = {n: n.upper() for r in rels for n in (r.subject_id, r.object_id)}
    config = KnowledgeConfig(community_engine="leiden", min_community_documents=1)
    communities = detect_communities(rels, names, config=config, seed=17)
    assert communities
    by_id = {c.community_id: c for c in communities}
    assert len(by_id) == len(communities)
    for c in communities:
        assert c.size == len(c.entity_ids) >= config.min_community_size
        if c.parent_id is not None:
            parent = by_id[c.parent_id]
            assert parent.level > c.level
            assert set(c.entity_ids) <= set(parent.entity_ids)


def test_engines_agree_on_a_clear_structure():
    edges = weighted_edges(planted(19, groups=4, size=10, inside=0.9))
    found = {}
    for engine in ("python-louvain", "leiden"):
        last = community_levels(edges, engine=engine, seed=17)[-1]  # type: ignore[arg-type]
        groups: dict[int, list[str]] = {}
        for node in sorted(last):
            groups.setdefault(last[node], []).append(node)
        found[engine] = sorted(groups.values())
    assert found["leiden"] == found["python-louvain"]


def test_adjacency_sums_equal_the_networkx_graphs():
    rels = planted(23)
    edges = weighted_edges(rels)
    graph, adj = entity_graph(rels), adjacency(edges)
    nodes = sorted(adj)[::3]
    assert weighted_degree(adj, nodes) == weighted_degree(graph, nodes)
    assert sorted(internal_edges(adj, nodes)) == sorted(internal_edges(graph, nodes))


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown community engine"):
        community_levels([("a", "b", 1.0)], engine="nope", seed=1)  # type: ignore[arg-type]
    assert leiden_levels([], seed=1) == []
