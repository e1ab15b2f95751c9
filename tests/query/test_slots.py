"""Reserved places per named thing (query.slots, issue 57): a question naming several things
gets each one's best passage before anything else fills the evidence, and a bridge
comparison each side's bridge hop; on a hand-written knowledge layer (the real classes)."""

import numpy as np

from algorithms.normalize import normalize_surface
from query.fusion import ArmHit, Slot, fuse
from query.graph import graph_arm, walk_graph
from query.knowledge_layer import KnowledgeLayer, Surface
from query.router import nested_description, route
from query.slots import entity_slots, named_things

# Two films and their directors; "Film Alder" has a crowd of neighbours (a1-a4) that the
# chunk arms rank above "Film Birch"'s own page.
CHUNKS = ["a0", "a1", "a2", "a3", "a4", "b0", "d1", "d2"]
TITLES = ["Film Alder", "Alder fans", "Alder sequel", "Alder poster", "Alder music",
          "Film Birch (1990)", "Ivy Rowe", "Otto Fenn"]  # fmt: skip
ENTITIES = [
    ("Film Alder", ["a0", "a1", "a2", "a3", "a4"]),
    ("Film Birch", ["b0"]),
    ("Ivy Rowe", ["a0", "d1"]),  # Film Alder's director: her page d1 is Alder's bridge hop
    ("Otto Fenn", ["b0", "d2"]),  # Film Birch's director
]
QUESTION = "Whose director was born first, Film Alder or Film Birch?"


def _layer() -> KnowledgeLayer:
    names = [name for name, _ in ENTITIES]
    aliases: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        aliases.setdefault(normalize_surface(name), []).append(i)
    empty = Surface(ids=[], texts=[], chunk_ids=[], index=None)
    return KnowledgeLayer(
        entity_ids=[f"e{i}" for i in range(len(names))],
        entity_names=names,
        entity_chunks=[chunks for _, chunks in ENTITIES],
        aliases=aliases,
        relations=empty,
        subjects=[],
        objects=[],
        predicates=[],
        object_texts=[],
        categories=[],
        supports=[],
        confidences=[],
        communities=empty,
        adjacency={},
    )


def _graph(layer, visible=None):
    rows = {c: i for i, c in enumerate(CHUNKS)}
    return walk_graph(layer, CHUNKS, rows, visible, lambda: TITLES)


def _flat(rows):
    return lambda picked: np.asarray([1.0 - 0.01 * r for r in picked])


def test_named_things_keep_the_longest_name():
    assert named_things(["Nolan", "Christopher Nolan", "Kalathil"]) == [
        "Christopher Nolan",
        "Kalathil",
    ]


def test_each_named_thing_gets_its_page_and_only_when_two_resolve():
    layer = _layer()
    graph = _graph(layer)
    slots = entity_slots(graph, ["Film Alder", "Film Birch"], _flat(CHUNKS))
    assert [(s.label, [CHUNKS[r] for r in s.rows]) for s in slots] == [
        ("named 'Film Alder'", ["a0"]),
        ("named 'Film Birch'", ["b0"]),  # its page, titled with a parenthesis
    ]
    assert entity_slots(graph, ["Film Alder", "Nowhere"], _flat(CHUNKS)) == []
    # A hidden page is no passage, and mentions are no page: Film Birch gets no slot.
    hidden = _graph(layer, np.array([0, 1, 2, 3, 4, 6, 7]))
    assert entity_slots(hidden, ["Film Alder", "Film Birch"], _flat(CHUNKS)) == []


def test_a_comparison_gets_each_named_things_best_passage_in_the_evidence():
    # The chunk arms rank Film Alder's crowd first; Film Birch's page b0 is 6th.
    dense = [ArmHit(r, rank, 0.9 - rank / 100) for rank, r in enumerate([0, 1, 2, 3, 4, 5], 1)]
    plain = fuse(dense, [], chunk_ids=CHUNKS, k=5, n_eligible=8)
    assert 5 not in [f.row for f in plain]
    layer = _layer()
    slots = entity_slots(_graph(layer), ["Film Alder", "Film Birch"], _flat(CHUNKS))
    fused = fuse(dense, [], chunk_ids=CHUNKS, k=5, n_eligible=8, slots=slots)
    assert [f.row for f in fused] == [0, 5, 1, 2, 3]
    assert [f.holds for f in fused[:2]] == ["named 'Film Alder'", "named 'Film Birch'"]
    assert all(f.holds is None for f in fused[2:])


def test_a_slot_no_arm_ranks_is_filled_by_its_first_row():
    dense = [ArmHit(0, 1, 0.9)]
    fused = fuse(dense, [], chunk_ids=CHUNKS, k=3, n_eligible=8,
                 slots=[Slot("named 'X'", (0,)), Slot("named 'Y'", (6, 7))])  # fmt: skip
    assert [(f.row, f.holds, f.score) for f in fused] == [
        (0, "named 'X'", fused[0].score),
        (6, "named 'Y'", 0.0),
    ]


def test_a_bridge_comparison_also_reserves_each_sides_bridge_hop():
    layer = _layer()
    graph = _graph(layer)
    decision = route(QUESTION, available=frozenset({"dense", "lexical", "walk"}))
    assert nested_description(QUESTION, decision.anchors) is not None
    walk = graph_arm(layer, graph, QUESTION, [], 20)
    slots = entity_slots(graph, ["Film Alder", "Film Birch"], _flat(CHUNKS), walk=walk, bridge=True)
    hops = {s.label: [CHUNKS[r] for r in s.rows] for s in slots[2:]}
    assert hops == {"bridge from 'Film Alder'": ["d1"], "bridge from 'Film Birch'": ["d2"]}


def test_generic_of_phrasing_is_no_multihop_cue():
    available = frozenset({"dense", "lexical", "walk"})
    for text in (
        "what is the basic mechanism of the transonic aileron buzz",
        "What is the role of the enzyme in cell division?",
        "what is the function of the protein in the liver?",
    ):
        decision = route(text, available=available)
        assert "walk" not in decision.surfaces, decision
    named = route("Who is the director of Avatar?", available=available)
    assert "walk" in named.surfaces and named.operation == "multihop"
