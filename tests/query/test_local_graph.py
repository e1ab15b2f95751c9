"""The walk graph read node by node (query.local_graph) on a layer held as Python lists
and dicts (the lookups' plain fallbacks), and its chunk index."""

import numpy as np
import pyarrow as pa
import pytest

import query.graph as graph_module
from algorithms.normalize import normalize_surface
from query.graph import graph_arm, walk_graph
from query.local_graph import ChunkIndex, LocalGraph, has_lookups
from query.whole_graph import build_whole
from tests.query.test_graph_arm import CHUNKS, ENTITIES, QUESTION, _layer
from tests.query.walk_checks import assert_same_walks, local_hops, read_node_by_node


def _with_lookups(layer):
    """The layer with the two lookups a node-by-node graph reads, made from its rows."""
    chunk_entities: dict[str, list[int]] = {}
    for e, chunks in enumerate(layer.entity_chunks):
        for c in dict.fromkeys(chunks):
            chunk_entities.setdefault(c, []).append(e)
    descriptions: dict[str, list[int]] = {}
    for r, (category, text) in enumerate(zip(layer.categories, layer.object_texts, strict=True)):
        norm = normalize_surface(text) if category == "definition" and text else ""
        if " " in norm:
            descriptions.setdefault(norm, []).append(r)
    layer.chunk_entities, layer.descriptions = chunk_entities, descriptions
    return layer


def _described_layer():
    layer = _layer([*ENTITIES, ("Beekeepers Guild Hall", ["c4", "c5"])])
    layer.relations.ids = ["r1", "r2", "r3"]
    layer.relations.texts = ["a", "b", "c"]
    layer.relations.chunk_ids = [["c2"], ["c1"], ["c3", "c4"]]
    layer.subjects, layer.objects = [2, 1, 3], [1, -1, 5]
    layer.predicates = ["president of", "is_a", "near"]
    layer.categories = ["role", "definition", "location"]
    layer.object_texts = ["Omega Society", "learned beekeepers' guild", "Beekeepers Guild Hall"]
    layer.adjacency = {2: [0], 1: [0, 1], 3: [2], 5: [2]}
    return _with_lookups(layer)


@pytest.mark.parametrize("hops", [1, 3])
@pytest.mark.parametrize("visible", [None, np.array([0, 1, 2, 4])])
def test_a_layer_of_lists_walks_as_its_whole_graph(hops, visible, monkeypatch):
    local_hops(monkeypatch, hops)
    layer = _described_layer()
    titles = ["Journal Zeta", "Ada Quill", "Kestrel (bird)", "Kestrel (bird)", "Journal Eta"]
    rows = {c: i for i, c in enumerate(CHUNKS)}
    walked = assert_same_walks(layer, layer, CHUNKS, rows, visible, lambda: titles)
    assert walked.stayed > 0 or hops == 3
    assert walked.counted == 0  # a layer of plain lists has no edges counted at build time


def test_the_arm_ranks_as_on_the_whole_graph(monkeypatch):
    read_node_by_node(monkeypatch)
    layer = _described_layer()
    rows = {c: i for i, c in enumerate(CHUNKS)}
    local = walk_graph(layer, CHUNKS, rows, None)
    assert isinstance(local, LocalGraph) and has_lookups(layer)
    whole = build_whole(layer, CHUNKS, rows, None)
    question = "Who was the first president of the learned beekeepers' guild?"
    for text in (QUESTION, question):
        mine, theirs = graph_arm(layer, local, text, [], 10), graph_arm(layer, whole, text, [], 10)
        assert mine.hits == theirs.hits and mine.seeds == theirs.seeds and mine.hits
        rows_hit = [h.row for h in mine.hits]
        assert mine.paths(rows_hit) == theirs.paths(rows_hit)


def test_a_layer_without_the_lookups_or_a_small_graph_gets_the_whole_graph(monkeypatch):
    rows = {c: i for i, c in enumerate(CHUNKS)}
    layer = _layer()
    assert not has_lookups(layer)
    read_node_by_node(monkeypatch)
    assert not isinstance(walk_graph(layer, CHUNKS, rows, None), LocalGraph)
    monkeypatch.setattr(graph_module, "LOCAL_FROM", 12)  # 6 entities and 5 chunks
    small = _described_layer()
    assert has_lookups(small) and not isinstance(walk_graph(small, CHUNKS, rows, None), LocalGraph)
    monkeypatch.setattr(graph_module, "LOCAL_FROM", 11)
    small.walk_graphs.clear()
    assert isinstance(walk_graph(small, CHUNKS, rows, None), LocalGraph)
    with pytest.raises(ValueError, match="lookups"):
        LocalGraph(layer, CHUNKS, {}, None)


@pytest.mark.parametrize("ordered", [True, False])
def test_the_chunk_index_finds_each_id_as_the_row_map_does(ordered):
    ids = [f"{i:064x}" for i in range(0, 4000, 7)]
    if not ordered:
        ids = ids[::-1]
    index = ChunkIndex(ids)
    wanted = [ids[5], "f" * 64, ids[-1], ids[0], "0" * 63 + "z"]
    assert index.rows(pa.array(wanted)).tolist() == [5, -1, len(ids) - 1, 0, -1]
    other = ChunkIndex(["b", "a", "ccc"])  # not one width: hashed
    assert other.rows(pa.array(["ccc", "a", "x"])).tolist() == [2, 1, -1]
