"""The query side of the knowledge layer, on a small real bundle built by the pipeline:
relation and community surfaces, anchor-gated graph expansion, contradictions, access."""

import datetime as dt
import json
from pathlib import Path

import pytest

from query import open_bundle
from query.answers import answer
from query.fusion import ArmHit, fuse
from tests.conftest import write_corpus

PAYMENTS = {
    "upi.md": "# UPI\n\nThe Unified Payments Interface (UPI) is a real-time payment system "
    "developed by the National Payments Corporation of India. UPI Lite payments are capped at "
    "Rs 500 per transaction. NPCI operates UPI for member banks.",
    "upi-circular.md": "# Circular\n\nUnder the new circular, UPI Lite payments are capped at "
    "Rs 1000 per transaction. The Reserve Bank of India regulates UPI and NPCI.",
    "rbi.md": "# RBI\n\nThe Reserve Bank of India supervises NPCI. NPCI operates the RuPay card "
    "network and UPI. The Reserve Bank of India is the central bank of India.",
    "cards.md": "# Cards\n\nRuPay cards are issued by member banks. NPCI settles RuPay card "
    "payments daily. Member banks connect to NPCI and UPI.",
}
METADATA = [{"source_id": "upi-circular.md", "access_class": "confidential"}]
TODAY = dt.date(2026, 1, 15)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, query_encoder):
    from pipelines.build_index import run

    base = tmp_path_factory.mktemp("payments")
    corpus = write_corpus(base / "corpus", PAYMENTS)
    sidecar = base / "meta.jsonl"
    sidecar.write_text("\n".join(json.dumps(m) for m in METADATA), encoding="utf-8")
    result = run(
        [
            "--input",
            str(corpus),
            "--root",
            str(base / "root"),
            "--metadata",
            str(sidecar),
            "--surface_vectors",
        ],
        bundle_id="k1",
    )
    return open_bundle(result.path, model=query_encoder)


def test_bundle_has_entities_relations_and_cross_source_communities(bundle):
    layer = bundle.knowledge
    assert layer is not None
    names = set(layer.entity_names)
    assert {"UPI", "NPCI", "Reserve Bank of India"} <= names
    assert "UPI Lite payments" in names or "UPI Lite" in names
    limits = [layer.object_texts[r] for r, c in enumerate(layer.categories) if c == "limit"]
    assert sorted(limits) == ["1000 INR", "500 INR"]
    assert layer.communities.ids, "a community spanning several documents"


def test_synthesis_uses_relation_and_community_surfaces(bundle):
    result = answer(bundle, "Summarize the main points about NPCI and UPI", k=4, today=TODAY)
    assert result.route.operation == "synthesis"
    kinds = {d.kind for d in result.knowledge}
    assert kinds == {"relations", "communities"}
    cited = {e.chunk_id for e in result.evidence}
    proposed = {c for d in result.knowledge for c in d.chunk_ids}
    assert cited & proposed, "derived rows propose chunks that are then cited"
    assert any({"relations", "communities"} & set(e.arms) for e in result.evidence)


def test_graph_expansion_is_gated_by_anchors(bundle):
    ok = answer(bundle, "Compare NPCI and RuPay", k=4, access=["public"], today=TODAY)
    assert ok.route.operation == "comparison"
    assert ok.expansion is not None and not ok.expansion.blocked
    assert ok.expansion.relations and any("graph" in e.arms for e in ok.evidence)
    blocked = answer(bundle, "Compare NPCI and Zorblax", k=4, access=["public"], today=TODAY)
    assert blocked.expansion is not None and blocked.expansion.blocked
    assert blocked.expansion.unresolved == ("Zorblax",)
    assert not any("graph" in e.arms for e in blocked.evidence)
    assert "expansion_blocked" in [r.code for r in blocked.admission.reasons]
    assert blocked.status == "UNKNOWN"


def test_a_multi_hop_question_runs_the_graph_arm_and_explains_its_paths(bundle):
    question = "Which bank supervises the operator of the RuPay card network?"
    result = answer(bundle, question, k=4, access=["public"], today=TODAY)
    assert result.route.operation == "multihop"
    assert "walk" in result.route.surfaces
    assert result.walk is not None and result.walk.hits
    assert any(s.kind == "entity" for s in result.walk.seeds)
    walked = [e for e in result.evidence if "walk" in e.arms]
    assert walked and all(e.walk_rank is not None for e in walked)
    paths = result.to_json()["walk"]["paths"]
    assert {p["chunk_id"] for p in paths} == {e.chunk_id for e in walked}
    assert all(p["seed"] for p in paths)
    # The public caller's walk never ranks, nor passes through, a confidential chunk.
    hidden = {i for i, a in enumerate(bundle.access_classes) if a == "confidential"}
    assert hidden and not hidden & {h.row for h in result.walk.hits}
    for p in paths:
        assert not any(bundle.chunk_ids[i] in step["node"] for step in p["steps"] for i in hidden)
    # A claim is not a question: no walk.
    claim = answer(bundle, "NPCI operates the RuPay card network.", k=4, today=TODAY)
    assert claim.walk is None and "walk" not in claim.route.surfaces


def test_conflicting_limits_in_admitted_evidence_are_a_contradiction(bundle):
    everything = ["public", "confidential"]
    result = answer(
        bundle, "What is the UPI Lite limit per transaction?", k=4, access=everything, today=TODAY
    )
    admitted = {e.doc_id for e in result.admission.admitted}
    assert {"upi.md", "upi-circular.md"} <= admitted
    codes = {r.code: r.detail for r in result.admission.reasons}
    assert "contradiction" in codes and "500 INR" in codes["contradiction"]
    assert result.status == "UNKNOWN"
    # The public caller sees one limit only: no contradiction, and no confidential row leaks.
    public = answer(bundle, "What is the UPI Lite limit per transaction?", k=4,
                    access=["public"], today=TODAY)  # fmt: skip
    assert "contradiction" not in {r.code for r in public.admission.reasons}
    assert all(e.doc_id != "upi-circular.md" for e in public.evidence)


def test_derived_rows_need_all_their_evidence_visible(bundle):
    hidden = {
        bundle.chunk_ids[i] for i, a in enumerate(bundle.access_classes) if a == "confidential"
    }
    for query in ("Summarize the main points about NPCI and UPI", "Compare NPCI and UPI"):
        result = answer(bundle, query, k=5, access=["public"], today=TODAY)
        for derived in result.knowledge:
            assert not hidden & set(derived.chunk_ids), derived


def test_knowledge_arms_propose_candidates_but_add_no_score():
    dense = [ArmHit(0, 1, 0.9), ArmHit(1, 2, 0.8)]
    fused = fuse(
        dense,
        [],
        chunk_ids=["a", "b", "c"],
        k=3,
        n_eligible=3,
        extra={"graph": [ArmHit(1, 1, 3.0), ArmHit(2, 2, 1.0)]},
    )
    # Graph proximity does not lift row 1 above the dense arm's first row ...
    assert [f.row for f in fused] == [0, 1, 2]
    assert fused[1].score == pytest.approx(1 / 62, abs=1e-6)
    assert fused[1].extra_ranks == (("graph", 1),)
    # ... but a row only the graph proposes is still a candidate, scored by no chunk arm.
    assert fused[2].score == 0.0
    assert fused[2].dense_rank is None and fused[2].extra_ranks == (("graph", 2),)


def test_a_knowledge_proposal_breaks_a_tie_in_the_fused_score():
    lexical = [ArmHit(0, 1, 2.0)]
    dense = [ArmHit(1, 1, 0.7)]
    plain = fuse(dense, lexical, chunk_ids=["a", "b"], k=2, n_eligible=2)
    assert [f.row for f in plain] == [1, 0]  # equal scores: the dense-backed row first
    proposed = fuse(
        dense,
        lexical,
        chunk_ids=["a", "b"],
        k=2,
        n_eligible=2,
        extra={"relations": [ArmHit(0, 1, 0.5)]},
    )
    assert [f.row for f in proposed] == [0, 1]
    assert proposed[0].score == proposed[1].score


def test_a_bundle_without_knowledge_reports_contradictions_unchecked(built_root, query_encoder):
    from store.bundles import bundle_path

    plain = open_bundle(bundle_path(str(built_root), "b1"), model=query_encoder)
    plain.knowledge = None  # as a bundle built with --knowledge=false
    result = answer(plain, "How is green tea made?", k=2, today=TODAY)
    assert "contradiction_not_checked" in {r.code for r in result.admission.reasons}
    assert result.knowledge == ()
    assert Path(plain.path).exists()


def test_readers_search_with_the_qualified_expansion(bundle):
    from store.config import SEARCH_EXPANSION

    assert bundle.index.expansion_search == SEARCH_EXPANSION == 256
    assert bundle.knowledge.relations.index.expansion_search == SEARCH_EXPANSION


def test_the_layer_holds_what_the_tables_say_row_by_row(bundle):
    """The vectorized indexes of load_knowledge against the tables read one row at a time."""
    from algorithms.normalize import normalize_surface
    from query.knowledge import whole_layer
    from store.bundles import ENTITIES, RELATIONS, read_parquet
    from store.knowledge_maps import FUNCTIONAL_CATEGORIES

    layer = bundle.knowledge
    entities = read_parquet(f"{bundle.path}/{ENTITIES}").to_pylist()
    relations = read_parquet(f"{bundle.path}/{RELATIONS}").to_pylist()
    row_of = {e["entity_id"]: i for i, e in enumerate(entities)}
    aliases: dict[str, list[int]] = {}
    for i, entity in enumerate(entities):
        for norm in sorted({normalize_surface(a) for a in entity["aliases"]}):
            aliases.setdefault(norm, []).append(i)
    subjects = [row_of[r["subject_id"]] for r in relations]
    objects = [row_of.get(r["object_id"] or "", -1) for r in relations]
    adjacency: dict[int, list[int]] = {}
    functional: dict[str, list[int]] = {}
    for r, relation in enumerate(relations):
        adjacency.setdefault(subjects[r], []).append(r)
        if objects[r] >= 0:
            adjacency.setdefault(objects[r], []).append(r)
        if relation["category"] in FUNCTIONAL_CATEGORIES:
            for chunk in relation["chunk_ids"]:
                functional.setdefault(chunk, []).append(r)
    whole = whole_layer(bundle.path)  # built from the rows, without the map files
    assert layer.relations_of is not None and whole.relations_of is None  # read in place
    for opened in (layer, whole):
        assert dict(opened.aliases) == aliases and len(aliases) >= 10
        assert opened.aliases.get("upi") == aliases["upi"] and "no such alias" not in opened.aliases
        assert list(opened.subjects) == subjects and list(opened.objects) == objects
        assert [opened.subjects[r] for r in range(len(subjects))] == subjects
        assert [opened.objects[r] for r in range(len(objects))] == objects
        assert dict(opened.adjacency) == adjacency and functional
        assert {e: opened.adjacency.get(e, []) for e in range(len(entities))} == {
            e: adjacency.get(e, []) for e in range(len(entities))
        }
        assert dict(opened.functional) == functional
        keys = read_parquet(f"{bundle.path}/{RELATIONS}")["ann_key"].to_pylist()
        assert dict(opened.relations.row_of_key) == {k: r for r, k in enumerate(keys)}
    assert list(layer.entity_ids) == [e["entity_id"] for e in entities]
    assert list(layer.entity_chunks) == [e["chunk_ids"] for e in entities]
    assert [layer.predicates[r] for r in range(len(relations))] == [
        r["predicate"] for r in relations
    ]
    assert list(layer.supports) == [r["support"] for r in relations]
    assert list(layer.confidences) == [r["confidence"] for r in relations]
    assert layer.relations.chunk_ids[0] == relations[0]["chunk_ids"]


@pytest.mark.parametrize("half", [False, True])
def test_the_walk_graph_holds_the_edges_the_tables_name(bundle, half):
    """query.graph builds the whole graph's edges with vectorized passes; here they are
    listed one entity and one relation at a time, as the tables say, and must be the
    same (the graph read node by node is checked against it below)."""
    import numpy as np

    from query.whole_graph import build_whole

    layer, rows = bundle.knowledge, bundle.row_of_chunk
    visible = np.arange(0, len(bundle.chunk_ids), 2) if half else None
    shown = set(range(len(bundle.chunk_ids))) if visible is None else set(visible.tolist())
    graph = build_whole(layer, bundle.chunk_ids, rows, visible)
    pairs = [
        (e, rows[c])
        for e, chunks in enumerate(list(layer.entity_chunks))
        for c in chunks
        if c in rows and rows[c] in shown
    ]
    counts = np.bincount([e for e, _ in pairs], minlength=len(layer.entity_ids))
    assert np.array_equal(graph.chunk_counts, counts) and pairs
    named: dict[tuple[int, int], str] = {}
    for r, (s, o) in enumerate(zip(layer.subjects, layer.objects, strict=True)):
        chunks = [rows.get(c) for c in layer.relations.chunk_ids[r]]
        if o < 0 or o == s or not counts[s] or not counts[o] or not chunks:
            continue
        if all(row is not None and row in shown for row in chunks):
            named.setdefault((min(s, o), max(s, o)), layer.predicates[r])
    assert graph.predicate_of == named and list(graph.predicate_of) == list(named)
    assert named or half  # the whole bundle has entity-to-entity edges
    n = len(layer.entity_ids)
    for e, row in pairs:
        assert graph.adjacency[e, n + row] == graph.adjacency[n + row, e] == 1.0
    for s, o in named:
        assert graph.adjacency[s, o] == graph.adjacency[o, s] == 1.0
    assert graph.adjacency.nnz == 2 * len(set(pairs)) + 2 * len(named)


def _calls_to_open(path: str) -> tuple[int, int]:
    """Python function calls made by ``load_knowledge(path)``, and how many of them
    normalized a string."""
    import gc
    import sys

    from query.knowledge import drop_held, load_knowledge

    counts = {"calls": 0, "normalize": 0}

    def count(frame, event, arg):
        if event == "call":
            counts["calls"] += 1
            counts["normalize"] += frame.f_code.co_name == "normalize_surface"

    drop_held()  # the same state for every open counted
    gc.collect()
    gc.disable()  # no finalizer of an earlier object runs inside the count
    sys.setprofile(count)
    try:
        load_knowledge(path)
    finally:
        sys.setprofile(None)
        gc.enable()
    return counts["calls"], counts["normalize"]


def test_opening_the_layer_does_work_that_does_not_grow_with_it(bundle, tmp_path, monkeypatch):
    """The open reads what the build wrote (normalized aliases included): a layer with
    50 times the entities costs the same number of Python calls, and none normalizes;
    from its map files, the open reads no row of any table, and makes fewer calls."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from algorithms.normalize import normalize_surface
    from query.knowledge import load_knowledge
    from store import knowledge_layers
    from store.bundles import ENTITIES
    from store.knowledge_maps import map_name, write_maps

    entities = pq.read_table(f"{bundle.path}/{ENTITIES}")
    aliases = entities.column("aliases").to_pylist()
    assert entities.column("alias_norms").to_pylist() == [
        [normalize_surface(a) for a in names] for names in aliases
    ]
    calls, mapped = {}, {}
    for extra in (100, 5000):
        path = tmp_path / str(extra)
        shutil.copytree(bundle.path, path)
        template = entities.slice(0, 1).to_pylist()[0]
        rows = [
            {
                **template,
                "entity_id": f"synthetic-{i}",
                "name": f"Synthetic thing {i}",
                "aliases": [f"Synthetic thing {i}", f"synthetic things {i}"],
                "alias_counts": [1, 1],
                "mention_count": 2,
                "alias_norms": [
                    normalize_surface(f"Synthetic thing {i}"),
                    normalize_surface(f"synthetic things {i}"),
                ],
            }
            for i in range(extra)
        ]
        grown = pa.concat_tables([entities, pa.Table.from_pylist(rows, schema=entities.schema)])
        pq.write_table(grown, path / ENTITIES)
        assert load_knowledge(str(path)).relations_of is None  # stale map file: from rows
        calls[extra] = _calls_to_open(str(path))  # (after one open: first-use work is done)
        (path / map_name(ENTITIES)).unlink()
        assert write_maps(str(path)) == [map_name(ENTITIES)]
        load_knowledge(str(path))
        mapped[extra] = _calls_to_open(str(path))
        with monkeypatch.context() as patch:  # read in place: no row of a table is read
            patch.setattr(knowledge_layers, "read_file", _no_rows)
            patch.setattr(pq, "read_table", _no_rows)
            layer = load_knowledge(str(path))
        assert layer.relations_of is not None and len(layer.entity_ids) == len(grown)
        assert layer.resolve(f"synthetic things {extra - 1}", lambda c: True) == [
            grown["entity_id"].to_pylist().index(f"synthetic-{extra - 1}")
        ]
    assert calls[100] == calls[5000]
    assert calls[5000][1] == 0
    assert mapped[100] == mapped[5000] and mapped[5000][0] < calls[5000][0]


def _no_rows(*args, **kwargs):
    raise AssertionError("the open read a table's rows")


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize(("hops", "hubs"), [(1, None), (3, None), (3, 4)])
def test_the_walk_read_node_by_node_is_the_whole_graphs_walk(bundle, half, hops, hubs, monkeypatch):
    """The bundle's layer is read from its map files, so its walk graph is read node by
    node (query.local_graph); every walk, bounded to one hop (local) or not (the
    bundle is small: most walks take the whole graph), with nodes of more than four
    edges as hubs or not, equals the whole graph's. The edges counted at build time
    stand in for reading the nodes a walk does not expand, only for a caller who sees
    every chunk."""
    import numpy as np

    from query.graph import chunk_titles
    from tests.query.walk_checks import assert_same_walks, local_hops, small_hubs

    local_hops(monkeypatch, hops)
    if hubs is not None:
        small_hubs(monkeypatch, hubs)
    visible = np.arange(0, len(bundle.chunk_ids), 2) if half else None
    layer = bundle.knowledge
    assert layer.walk_edges is not None
    walked = assert_same_walks(
        layer,
        layer,
        bundle.chunk_ids,
        bundle.row_of_chunk,
        visible,
        lambda: chunk_titles(bundle),
    )
    assert walked.stayed > 0 or hops == 3
    assert walked.counted == 0 if half else walked.counted > 0


def test_a_walk_lists_no_chunk_of_a_hub_it_reaches(bundle, monkeypatch):
    """An entity with more edges than ``MAX_EXPAND_DEGREE`` that a walk reaches is not
    read: its degree and partners are the ones counted at build time, and its chunk
    list (a hundred thousand ids, on a large corpus) is never taken; the walk is the
    whole graph's, to the bit."""
    import dataclasses
    from collections.abc import Sequence

    import numpy as np

    from query.columns import first_items, lists_at
    from query.local_graph import LocalGraph
    from query.whole_graph import build_whole
    from tests.query.walk_checks import small_hubs

    small_hubs(monkeypatch, 4)
    listed: list[int] = []

    class Listed(Sequence):
        """The layer's chunk lists, noting every list taken whole."""

        def __init__(self, inner):
            self.inner = inner

        def __len__(self):
            return len(self.inner)

        def __getitem__(self, row):
            listed.append(row)
            return self.inner[row]

        def lists_at(self, rows):
            listed.extend(rows)
            return lists_at(self.inner, rows)

        def firsts(self, rows):  # whether an entity occurs in a visible chunk
            return first_items(self.inner, rows)

    layer = dataclasses.replace(
        bundle.knowledge, entity_chunks=Listed(bundle.knowledge.entity_chunks), walk_graphs={}
    )
    whole = build_whole(bundle.knowledge, bundle.chunk_ids, bundle.row_of_chunk, None)
    n = whole.n_entities
    checked = 0
    for hub in [e for e in range(n) if len(whole.neighbours(e)) > 4]:
        # a seed next to the hub that the walk expands (four edges or fewer)
        near = [int(v) for v in whole.neighbours(hub) if len(whole.neighbours(v)) <= 4]
        if not near or checked == 5:
            continue
        checked += 1
        listed.clear()
        seed = near[0]
        start = np.zeros(whole.size, dtype=np.float32)
        start[seed] = 1.0
        graph = LocalGraph(layer, bundle.chunk_ids, bundle.row_of_chunk, None)
        found = graph.walk(start)
        assert found[hub] > 0 and hub not in listed
        assert np.array_equal(found, whole.walk(start))
    assert checked > 0


def test_the_first_walk_reads_the_seeds_neighbourhood_not_the_layer(bundle, tmp_path, monkeypatch):
    """A first walk on a generation opened from its map files reads the edges of the
    seeds' neighbourhood and nothing over every row: no table row, no fold, no whole
    graph; on a layer with 50 times the entities it reads the same nodes and ranks the
    same chunks."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    import query.graph as graph_module
    from algorithms.normalize import normalize_surface
    from query.graph import graph_arm, walk_graph
    from query.knowledge import drop_held, load_knowledge
    from query.knowledge_layer import KnowledgeLayer
    from store import knowledge_layers
    from store.bundles import ENTITIES
    from store.knowledge_maps import map_name, write_maps
    from store.walk_counts import WALK_MAP
    from tests.query.walk_checks import read_node_by_node

    read_node_by_node(monkeypatch)
    entities = pq.read_table(f"{bundle.path}/{ENTITIES}")
    template = entities.slice(0, 1).to_pylist()[0]
    read = {}
    for extra in (100, 5000):
        path = tmp_path / str(extra)
        shutil.copytree(bundle.path, path)
        rows = [
            {
                **template,
                "entity_id": f"synthetic-{i}",
                "name": f"Synthetic thing {i}",
                "aliases": [f"Synthetic thing {i}"],
                "alias_counts": [1],
                "mention_count": 1,
                "alias_norms": [normalize_surface(f"Synthetic thing {i}")],
                "chunk_ids": [],
            }
            for i in range(extra)
        ]
        grown = pa.concat_tables([entities, pa.Table.from_pylist(rows, schema=entities.schema)])
        pq.write_table(grown, path / ENTITIES)
        (path / map_name(ENTITIES)).unlink()
        (path / WALK_MAP).unlink()  # counted again, over the grown entities
        write_maps(str(path), normalize=normalize_surface)
        drop_held()
        layer = load_knowledge(str(path))
        with monkeypatch.context() as patch:
            for module, name in ((knowledge_layers, "read_file"), (pq, "read_table")):
                patch.setattr(module, name, _no_rows)
            patch.setattr(graph_module, "build_whole", _no_rows)
            patch.setattr(KnowledgeLayer, "folded", _no_rows)
            graph = walk_graph(layer, bundle.chunk_ids, bundle.row_of_chunk, None)
            walk = graph_arm(layer, graph, "Who supervises the operator of UPI?", [], 10)
        hits = [bundle.chunk_ids[h.row] for h in walk.hits]
        read[extra] = (graph.nodes_read, hits, [s.name for s in walk.seeds])
        assert hits and graph.nodes_read * 2 < graph.size
    assert read[100] == read[5000]
