"""The graph arm (query.graph): a Personalized PageRank walk that reaches the bridge passage
of a multi-hop question, on a small knowledge layer written out by hand (the real
KnowledgeLayer class, five chunks), and the router's multi-hop cues."""

import numpy as np
import pytest

import query.whole_graph as graph_module
from algorithms.normalize import normalize_surface
from query.fusion import ArmHit, fuse
from query.graph import MAX_SEED_CHUNKS, Walk, entity_seeds, graph_arm, text_spread, walk_graph
from query.knowledge_layer import KnowledgeLayer, Surface
from query.lexical import LexicalIndex
from query.router import route
from query.slots import BRIDGE_MAX_CHUNKS, bridging_names
from store.config import LexicalConfig
from transforms.lexical import build_bm25

QUESTION = "Who was the first president of the association which published Journal Zeta?"
# c1 names the journal and its publisher; c2, the bridge, names the publisher's first
# president and shares no content word with the question but "first president"; c3 and
# c4 mention neither; c5 is another journal.
CHUNKS = ["c1", "c2", "c3", "c4", "c5"]
ENTITIES = [
    ("Journal Zeta", ["c1"]),
    ("Omega Society", ["c1", "c2"]),
    ("Ada Quill", ["c2"]),
    ("Kestrel", ["c3", "c4"]),
    ("Journal Eta", ["c5"]),
]


def _layer(entities=ENTITIES) -> KnowledgeLayer:
    names = [name for name, _ in entities]
    aliases: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        aliases.setdefault(normalize_surface(name), []).append(i)
    empty = Surface(ids=[], texts=[], chunk_ids=[], index=None)
    relations = Surface(
        ids=["r1"], texts=["Ada Quill president of Omega Society"], chunk_ids=[["c2"]], index=None
    )
    return KnowledgeLayer(
        entity_ids=[f"e{i}" for i in range(len(names))],
        entity_names=names,
        entity_chunks=[chunks for _, chunks in entities],
        aliases=aliases,
        relations=relations,
        subjects=[2],
        objects=[1],
        predicates=["president of"],
        object_texts=["Omega Society"],
        categories=["role"],
        supports=[1],
        confidences=[0.9],
        communities=empty,
        adjacency={2: [0], 1: [0]},
    )


def _graph(layer, visible=None, chunks=CHUNKS):
    return walk_graph(layer, chunks, {c: i for i, c in enumerate(chunks)}, visible)


def test_the_walk_reaches_the_bridge_passage_the_question_does_not_resemble():
    layer = _layer()
    walk = graph_arm(layer, _graph(layer), QUESTION, dense=[], depth=10)
    assert [(s.kind, s.name, s.surface) for s in walk.seeds] == [
        ("entity", "Journal Zeta", "Journal Zeta")
    ]
    ranked = [CHUNKS[h.row] for h in walk.hits]
    assert ranked[:2] == ["c1", "c2"]
    assert "c3" not in ranked and "c5" not in ranked  # no path from the seed: no mass
    seed, steps = walk.paths([1])[1]
    assert seed == "entity: Journal Zeta"
    assert [s.node for s in steps][-1] == "chunk: c2"
    assert "entity: Omega Society" in [s.node for s in steps]


def test_dense_chunks_seed_the_walk_when_no_entity_links():
    layer = _layer()
    walk = graph_arm(layer, _graph(layer), "nothing known here?", [ArmHit(2, 1, 0.5)], 10)
    assert [(s.kind, s.name) for s in walk.seeds] == [("chunk", "c3")]
    assert {CHUNKS[h.row] for h in walk.hits} == {"c3", "c4"}  # through Kestrel
    no_seed = graph_arm(layer, _graph(layer), "nothing known here?", [], 10)
    assert no_seed.hits == () and no_seed.seeds == ()


def test_the_walk_only_sees_visible_chunks():
    layer = _layer()
    # c1 hidden: the journal has no visible evidence, so it seeds nothing, and the
    # relation stated in c2 is an edge only while c2 is visible.
    hidden_c1 = _graph(layer, np.array([1, 2, 3, 4]))
    walk = graph_arm(layer, hidden_c1, QUESTION, [], 10)
    assert all(s.name != "Journal Zeta" for s in walk.seeds)
    assert all(CHUNKS[h.row] != "c1" for h in walk.hits)
    assert (1, 2) in hidden_c1.predicate_of
    hidden_c2 = _graph(layer, np.array([0, 2, 3, 4]))
    assert (1, 2) not in hidden_c2.predicate_of
    walk = graph_arm(layer, hidden_c2, QUESTION, [], 10)
    assert [CHUNKS[h.row] for h in walk.hits] == ["c1"]
    # One graph per visible set, built once and kept.
    assert _graph(layer, np.array([0, 2, 3, 4])) is hidden_c2
    assert _graph(layer) is _graph(layer)


def test_seeds_are_specific_entities_most_specific_first():
    common = [f"x{i}" for i in range(MAX_SEED_CHUNKS + 1)]
    layer = _layer([*ENTITIES, ("Society", common)])
    graph = _graph(layer, chunks=CHUNKS + common)
    seeds = entity_seeds(layer, graph, "Omega Society or Journal Zeta or Society?")
    # "Society" occurs in more than MAX_SEED_CHUNKS chunks: it says too little to seed.
    assert [(s.name, s.weight) for s in seeds] == [("Journal Zeta", 1.0), ("Omega Society", 0.5)]


def test_the_longest_name_claims_its_words():
    # "Omega Society" links as a whole; "Omega" and "Society" are names of other entities
    # but the words are taken, so neither seeds (greedy longest match).
    layer = _layer([*ENTITIES, ("Omega", ["c3"]), ("Society", ["c4"])])
    seeds = entity_seeds(layer, _graph(layer), "Who led the Omega Society?")
    assert [(s.name, s.surface) for s in seeds] == [("Omega Society", "the Omega Society")]
    alone = entity_seeds(layer, _graph(layer), "Who led the Society?")
    assert [s.name for s in alone] == ["Society"]


def test_a_description_stated_of_a_thing_seeds_the_thing():
    # "Omega Society is a learned society of beekeepers" (c1): the description is a
    # literal, no entity, but a question that refers to the society by it seeds it.
    layer = _layer()
    layer.relations = Surface(
        ids=["r1", "r2"],
        texts=["Ada Quill president of Omega Society", "Omega Society is a beekeepers' guild"],
        chunk_ids=[["c2"], ["c1"]],
        index=None,
    )
    layer.subjects, layer.objects = [2, 1], [1, -1]
    layer.predicates, layer.categories = ["president of", "is_a"], ["role", "definition"]
    layer.object_texts = ["Omega Society", "learned beekeepers' guild"]
    question = "Who was the first president of the learned beekeepers' guild?"
    seeds = entity_seeds(layer, _graph(layer), question)
    assert [(s.name, s.surface) for s in seeds] == [
        ("Omega Society", "the learned beekeepers' guild")
    ]
    walk = graph_arm(layer, _graph(layer), question, [], 10)
    assert {CHUNKS[h.row] for h in walk.hits[:2]} == {"c1", "c2"}
    # Stated only in a chunk the caller may not see, it seeds nothing.
    hidden = _graph(layer, np.array([1, 2, 3, 4]))
    assert entity_seeds(layer, hidden, question) == []
    # One word says what kind of thing, not which: "Who led the guild?" seeds nothing.
    layer.object_texts = ["Omega Society", "guild"]
    layer.walk_graphs.clear()
    assert entity_seeds(layer, _graph(layer), "Who led the guild?") == []
    layer.object_texts = ["Omega Society", "learned beekeepers' guild"]
    layer.walk_graphs.clear()
    # A description that is also an alias links the entity it names, not the described.
    named = _layer([*ENTITIES, ("learned beekeepers' guild", ["c3"])])
    named.relations, named.subjects, named.objects = layer.relations, [2, 1], [1, -1]
    named.predicates, named.categories = layer.predicates, layer.categories
    named.object_texts = layer.object_texts
    assert [s.name for s in entity_seeds(named, _graph(named), question)] == [
        "learned beekeepers' guild"
    ]


def test_a_description_lists_each_thing_once_in_the_order_first_stated():
    layer = _layer()
    layer.relations = Surface(
        ids=["r1", "r2", "r3", "r4"],
        texts=["a", "b", "c", "d"],
        chunk_ids=[["c5"], ["c2"], ["c5"], ["c1"]],
        index=None,
    )
    layer.subjects, layer.objects = [4, 2, 4, 0], [-1, -1, -1, -1]
    layer.predicates = ["is_a"] * 4
    layer.categories = ["definition", "definition", "definition", "role"]
    layer.object_texts = ["a learned journal"] * 2 + ["A learned journal", "a learned journal"]
    # Journal Eta (4) twice and Ada Quill (2) between: each once, first stated first; the
    # role of Journal Zeta (0) is no description.
    assert _graph(layer).descriptions == {"learned journal": [4, 2]}


def _lexical(tmp_path, texts):
    build_bm25(texts, config=LexicalConfig()).save(str(tmp_path))
    return LexicalIndex.open(str(tmp_path), LexicalConfig(), rows=len(texts))


def test_a_name_whose_words_stand_in_many_chunks_seeds_weakly(tmp_path):
    # "Kestrel" was extracted as an entity in two chunks, but its word stands in three
    # chunk texts: its specificity is 1/3, not 1/2. Every word of "Journal Zeta" stands
    # in c1 and in c5 (words, not the phrase: an upper bound), so its weight is 1/2.
    texts = [
        "Journal Zeta is published by the Omega Society.",
        "Ada Quill was the first president of the Omega Society; a kestrel on its seal.",
        "The kestrel hovers.",
        "A kestrel nest.",
        "Journal Eta; the Zeta function.",
    ]
    lexical = _lexical(tmp_path, texts)
    layer = _layer()
    graph = _graph(layer)
    query = "Which journal did the society that names Kestrel publish, Journal Zeta?"
    plain = {s.name: s.weight for s in entity_seeds(layer, graph, query)}
    assert plain == {"Journal Zeta": 1.0, "Kestrel": 0.5}
    spread = text_spread(lexical, None)
    assert spread("Kestrel") == 3 and spread("Journal Zeta") == 2 and spread("the") is None
    weighted = {s.name: s.weight for s in entity_seeds(layer, graph, query, spread)}
    assert weighted == {"Journal Zeta": 0.5, "Kestrel": 1 / 3}
    # Only the caller's chunks count: with c2 and c4 hidden the word stands in one.
    assert text_spread(lexical, np.array([0, 2, 4]))("Kestrel") == 1
    # Past MAX_SEED_CHUNKS chunk texts, a name is no seed, however rare as an entity.
    many = _lexical(tmp_path / "many", ["kestrel"] * (MAX_SEED_CHUNKS + 1))
    seeds = entity_seeds(layer, graph, query, text_spread(many, None))
    assert [s.name for s in seeds] == ["Journal Zeta"]


def test_a_stopword_alias_is_no_seed(tmp_path):
    lexical = _lexical(tmp_path, ["The the.", "Journal Zeta."])
    layer = _layer([*ENTITIES, ("The", ["c3"])])
    seeds = entity_seeds(layer, _graph(layer), "The Journal Zeta?", text_spread(lexical, None))
    assert [s.name for s in seeds] == ["Journal Zeta"]


def _exact(graph, start):
    """Personalized PageRank by dense power iteration over the whole graph."""
    matrix, mass = graph.matrix.toarray().astype(np.float64), start.astype(np.float64)
    for _ in range(graph_module.ITERATIONS):
        mass = (1 - graph_module.DAMPING) * start + graph_module.DAMPING * (matrix @ mass)
    return mass


def test_the_walk_on_a_closed_neighbourhood_is_the_exact_walk():
    layer = _layer()
    graph = _graph(layer)
    cut = np.zeros(graph.matrix.shape[0], dtype=np.float32)
    cut[0] = 1.0  # Journal Zeta: its component is 5 of the 10 nodes, walked on its own
    assert len(graph.neighbourhood(np.array([0]))) == 5
    np.testing.assert_allclose(graph.walk(cut), _exact(graph, cut), atol=1e-6)
    whole = np.zeros_like(cut)
    whole[[0, 3, 4]] = 1 / 3  # seeds in every component: the whole graph is walked
    assert len(graph.neighbourhood(np.array([0, 3, 4]))) == 10
    np.testing.assert_allclose(graph.walk(whole), _exact(graph, whole), atol=1e-6)


def test_the_walk_stays_within_its_bounds(monkeypatch):
    layer = _layer()
    graph = _graph(layer)

    def ranked():
        return [CHUNKS[h.row] for h in graph_arm(layer, graph, QUESTION, [], 10).hits]

    assert ranked() == ["c1", "c2"]
    monkeypatch.setattr(graph_module, "MAX_HOPS", 1)  # the bridge c2 is 3 edges away
    assert ranked() == ["c1"]
    monkeypatch.setattr(graph_module, "MAX_HOPS", 3)
    monkeypatch.setattr(graph_module, "MAX_NODES", 2)  # seed and c1; one more is too many
    assert ranked() == ["c1"]
    monkeypatch.setattr(graph_module, "MAX_NODES", 50)
    monkeypatch.setattr(graph_module, "MAX_EXPAND_DEGREE", 1)  # c1 (2 edges): not walked through
    assert ranked() == ["c1"]


def test_the_walk_is_deterministic():
    layer = _layer()
    runs = [graph_arm(layer, _graph(layer), QUESTION, [ArmHit(4, 1, 0.3)], 10) for _ in range(3)]
    assert len({tuple(r.hits) for r in runs}) == 1
    assert isinstance(runs[0], Walk)


def test_a_weighted_knowledge_arm_adds_to_the_fused_score():
    dense = [ArmHit(0, 1, 0.9), ArmHit(1, 2, 0.8)]
    walk = [ArmHit(2, 1, 0.2), ArmHit(1, 2, 0.1)]
    fused = fuse(
        dense, [], chunk_ids=["a", "b", "c"], k=3, n_eligible=3, extra={"walk": walk},
        weights={"walk": 2.0},
    )  # fmt: skip
    scores = {f.row: f.score for f in fused}
    assert scores[1] == pytest.approx(1 / 62 + 2 / 62, abs=1e-6)
    assert scores[2] == pytest.approx(2 / 61, abs=1e-6)
    # By score: 1, 2, 0; but plain fusion's top two rows (0, 1) keep their places against
    # an arm that does not lead (issue 57), so its top row 0 stays first.
    assert [f.row for f in fused] == [0, 1, 2]
    with pytest.raises(ValueError, match="walk"):
        fuse(dense, [], chunk_ids=["a", "b", "c"], k=1, n_eligible=3, extra={"walk": walk},
             weights={"walk": -1.0})  # fmt: skip


def test_a_named_seed_bridges_by_a_relation_only_when_it_is_specific():
    """Issue 57: the walk leads where it bridges from a thing the question names. A name
    with a relation but no page bridges only when it stands in at most BRIDGE_MAX_CHUNKS
    passages: a term standing in dozens (SciFact's acronyms) names a topic."""
    question = "Who was the first president of the Omega Society?"
    layer = _layer()
    walk = graph_arm(layer, _graph(layer), question, [ArmHit(0, 1, 0.3)], 10)
    assert bridging_names(walk, ["Omega Society"]) == ["Omega Society"]
    crowd = [f"x{i}" for i in range(BRIDGE_MAX_CHUNKS)]
    wide = _layer([ENTITIES[0], ("Omega Society", ["c1", "c2", *crowd]), *ENTITIES[2:]])
    walk = graph_arm(wide, _graph(wide, chunks=CHUNKS + crowd), question, [ArmHit(0, 1, 0.3)], 10)
    seed = next(s for s in walk.seeds if s.name == "Omega Society")
    assert seed.weight < 1 / BRIDGE_MAX_CHUNKS
    assert bridging_names(walk, ["Omega Society"]) == []


KNOWLEDGE = frozenset({"dense", "lexical", "relations", "communities", "graph", "walk"})


@pytest.mark.parametrize(
    "question",
    [
        QUESTION,
        "How many stores are in the state where Hello Love's performer lived?",
        "The album was released by a singer from what state?",
        "Which city hosted the games that the sprinter won in 1936?",
    ],
)
def test_a_question_about_a_thing_named_through_another_calls_the_walk(question):
    decision = route(question, available=KNOWLEDGE)
    assert "walk" in decision.surfaces, decision
    assert any("multi-hop cue" in r for r in decision.reasons)


def test_the_walk_serves_questions_naming_two_things_not_compared_claims():
    names = lambda q: [("Kestrel Hall", "ORG"), ("Omega Society", "ORG")]  # noqa: E731
    comparison = route(
        "Which is older, Kestrel Hall or Omega Society?", available=KNOWLEDGE, recognizer=names
    )
    assert comparison.operation == "comparison" and "walk" in comparison.surfaces
    two = route("Are Kestrel Hall and Omega Society both bands?", available=KNOWLEDGE,
                recognizer=names)  # fmt: skip
    assert two.operation in ("comparison", "multihop") and "walk" in two.surfaces
    # A claim that compares (SciFact's "X is more common than Y") is no question: no walk.
    claim = route(
        "Kestrel Hall is more common than Omega Society.", available=KNOWLEDGE, recognizer=names
    )
    assert claim.operation == "comparison" and "walk" not in claim.surfaces


@pytest.mark.parametrize(
    "text",
    [
        # Claims (SciFact's queries are statements) and plain lookups never walk.
        "The risk of breast cancer is lowered by the use of statins.",
        "ALDH1 expression is associated with poorer prognosis in breast cancer.",
        "How do I reset my password?",
        "What is gzip?",
    ],
)
def test_statements_and_plain_lookups_do_not_call_the_walk(text):
    decision = route(text, available=KNOWLEDGE)
    assert "walk" not in decision.surfaces, decision


def test_without_a_knowledge_layer_the_walk_is_reported_missing():
    decision = route(QUESTION)
    assert decision.operation == "multihop"
    assert "walk" not in decision.surfaces
    assert any("surface 'walk' not in this bundle" in r for r in decision.reasons)


def test_an_entity_leads_the_walk_to_the_document_titled_with_its_name():
    """The bridge page is *about* an entity the first passage names: its title is one of
    the entity's aliases (less a parenthesis), so the entity's mass reaches it even where
    its chunks never name the entity in the text."""
    layer = _layer()
    chunks = CHUNKS
    rows = {c: i for i, c in enumerate(chunks)}
    untitled = graph_arm(layer, walk_graph(layer, chunks, rows, None), QUESTION, [], 10)
    assert "c4" not in [chunks[h.row] for h in untitled.hits]  # no edge reaches c4
    titles = ["", "", "", "Omega Society (association)", ""]
    layer.walk_graphs.clear()  # the cache is per visible set; the titles are new here
    titled = graph_arm(
        layer, walk_graph(layer, chunks, rows, None, lambda: titles), QUESTION, [], 10
    )
    ranked = [chunks[h.row] for h in titled.hits]
    assert ranked[:2] == ["c1", "c4"]  # c1 names the seed; c4 is Omega Society's page
    assert ranked.index("c3") > ranked.index("c4")  # c3 is reached only through c4
