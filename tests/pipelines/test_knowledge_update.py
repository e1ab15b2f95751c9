"""A refresh updates its parent's knowledge layer instead of recomputing it: new mentions
linked to existing entities, touched relations aggregated again, communities kept until
enough changed, and the HNSW files updated in place; the result passes the gate."""

import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from algorithms.communities import detect_communities
from pipelines.build_index import run
from schemas import Relation
from store import knowledge_layers
from store.bundles import bundle_path, read_manifest, sha256_file
from store.config import DEFAULT_SEED, KnowledgeConfig
from tests.conftest import validate_and_activate, write_corpus
from tests.query.test_knowledge_query import PAYMENTS
from tests.validation.test_gate import _rewrite_with_checksum
from validation import validate_bundle

EDITED = dict(PAYMENTS)
EDITED["cards.md"] = PAYMENTS["cards.md"] + " NPCI also runs the FASTag toll programme."


def _table(root: str, bundle_id: str, name: str) -> list[dict]:
    """A table's rows without their vectors, sorted by id."""
    table = knowledge_layers.read_table(bundle_path(root, bundle_id), f"{name}.parquet")
    if "embedding" in table.column_names:
        table = table.drop_columns(["embedding"])
    return sorted(table.to_pylist(), key=lambda row: row[table.column_names[0]])


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """``k1`` (full), ``k2`` (an edit, communities kept), ``k3`` (a deletion, clustered
    again), ``k4`` (an addition) in one root; from-scratch builds of k2's and k3's inputs
    in others."""
    base = tmp_path_factory.mktemp("knowledge-update")
    root = str(base / "root")
    corpus = write_corpus(base / "corpus", PAYMENTS)
    run(["--input", str(corpus), "--surface_vectors", "--root", root], bundle_id="k1")
    validate_and_activate(root, "k1")
    write_corpus(corpus, EDITED)
    edited = run(
        ["--input", str(corpus), "--surface_vectors", "--root", root, "--recluster_share=1"],
        bundle_id="k2",
    )
    validate_and_activate(root, "k2")
    run(
        [
            "--input",
            str(corpus),
            "--surface_vectors",
            "--root",
            str(base / "fresh2"),
            "--delta=false",
        ],
        bundle_id="f2",
    )
    (corpus / "rbi.md").unlink()
    deleted = run(["--input", str(corpus), "--surface_vectors", "--root", root], bundle_id="k3")
    validate_and_activate(root, "k3")
    run(
        [
            "--input",
            str(corpus),
            "--surface_vectors",
            "--root",
            str(base / "fresh3"),
            "--delta=false",
        ],
        bundle_id="f3",
    )
    # A pure addition after k3 (below the re-clustering threshold): nothing any
    # community names is gone.
    (corpus / "fastag.md").write_text(
        "# FASTag\n\nNPCI runs the FASTag toll programme with member banks.", encoding="utf-8"
    )
    run(
        ["--input", str(corpus), "--surface_vectors", "--root", root, "--recluster_share=1"],
        bundle_id="k4",
    )
    validate_and_activate(root, "k4")
    return root, str(base / "fresh2"), str(base / "fresh3"), edited, deleted


@pytest.mark.slow
def test_an_edit_links_new_mentions_and_keeps_the_communities(roots):
    root, fresh2, _, edited, _ = roots
    state = edited.manifest.knowledge_state
    assert state.communities_from == "k1" and 0 < state.entities_changed < 1
    # Entities, mentions and relations are what a from-scratch build of the same input
    # gives (nothing here merges old and new entities differently).
    for name in ("mentions", "entities", "relations"):
        assert _table(root, "k2", name) == _table(fresh2, "f2", name), name
    # The kept communities are k1's, cut to what is live: same ids and reports.
    before = {c["community_id"]: c for c in _table(root, "k1", "communities")}
    after = _table(root, "k2", "communities")
    assert after and all(c["report"] == before[c["community_id"]]["report"] for c in after)
    # Only the new relation summaries were embedded, not every summary and report.
    summaries = len(
        [r for r in _table(root, "k2", "relations") if r["category"] != "co-occurrence"]
    )
    assert 0 < edited.manifest.delta["knowledge_texts_embedded"] < summaries


@pytest.mark.slow
def test_the_parent_hnsw_files_are_updated_in_place_with_the_tables_keys(roots):
    root, *_ = roots
    from usearch.index import Index

    for bundle_id in ("k2", "k3"):
        path = bundle_path(root, bundle_id)
        for table, index in (
            ("relations", "relations.usearch"),
            ("communities", "communities.usearch"),
        ):
            rows = knowledge_layers.read_table(path, f"{table}.parquet")
            keys = {
                k
                for k, v in zip(
                    rows["ann_key"].to_pylist(), rows["embedding"].to_pylist(), strict=True
                )
                if v is not None
            }
            built = Index.restore(os.path.join(path, index), view=True)
            assert len(built) == len(keys)
            assert all(k in built for k in keys)


@pytest.mark.slow
def test_past_the_threshold_a_refresh_clusters_again(roots):
    root, _, fresh3, _, deleted = roots
    state = deleted.manifest.knowledge_state
    assert (state.communities_from, state.entities_changed) == ("k3", 0.0)

    # The same mentions, grouped into the same entities as a from-scratch build; an
    # entity keeps the id and name it had (RuPay lost its rbi.md mentions, and with them
    # the majority a from-scratch build names it by) until a compaction.
    def grouping(rows):
        by_entity = {}
        for m in rows:
            by_entity.setdefault(m["entity_id"], set()).add(m["mention_id"])
        return {frozenset(group) for group in by_entity.values()}

    assert grouping(_table(root, "k3", "mentions")) == grouping(_table(fresh3, "f3", "mentions"))
    assert len(_table(root, "k3", "relations")) == len(_table(fresh3, "f3", "relations"))
    # The communities are Louvain's over every live relation of k3, not k2's cut down.
    relations = [
        Relation(**{k: v for k, v in r.items() if k != "ann_key"})
        for r in _table(root, "k3", "relations")
    ]
    names = {e["entity_id"]: e["name"] for e in _table(root, "k3", "entities")}
    expected = detect_communities(relations, names, config=KnowledgeConfig(), seed=DEFAULT_SEED)
    communities = _table(root, "k3", "communities")
    assert [c["community_id"] for c in communities] == sorted(c.community_id for c in expected)


def _copy_of(root: str, tmp_path) -> str:
    target = str(tmp_path / "root")
    shutil.copytree(root, target)
    return target


def _outcome(report) -> dict[str, bool]:
    return {c.name: c.success for c in report.checks}


def _mentions_kept_from(path: str, parent: str) -> pa.Table:
    """The refresh's mention rows equal to a row of its parent (unchanged)."""
    rows = knowledge_layers.read_table(path, "mentions.parquet")
    before = {
        tuple(r.values())
        for r in knowledge_layers.read_table(parent, "mentions.parquet").to_pylist()
    }
    return rows.filter(pa.array([tuple(r.values()) in before for r in rows.to_pylist()]))


@pytest.mark.slow
def test_a_refresh_is_checked_row_by_row_only_where_it_changed(roots, tmp_path):
    root = _copy_of(roots[0], tmp_path)
    path = bundle_path(root, "k2")
    incremental = validate_bundle(path, write=False)
    assert incremental.passed and incremental.compared_with == "k1"
    checked, held = incremental.knowledge_rows_checked["mentions"]
    assert 0 < checked < held
    # Checking every row gives the same outcome.
    full = validate_bundle(path, write=False, every_row=True)
    assert full.compared_with is None
    assert all(c == h for c, h in full.knowledge_rows_checked.values())
    assert _outcome(full) == _outcome(incremental)


@pytest.mark.slow
def test_after_an_addition_only_the_changed_rows_references_are_computed(roots, tmp_path):
    root = _copy_of(roots[0], tmp_path)
    edit = validate_bundle(bundle_path(root, "k2"), write=False)
    assert edit.passed and not edit.references_of_changed_rows_only  # a revision changed
    path = bundle_path(root, "k4")
    added = validate_bundle(path, write=False)
    assert added.passed and added.compared_with == "k3"
    assert added.references_of_changed_rows_only
    checked, held = added.knowledge_rows_checked["mentions"]
    assert 0 < checked < held
    assert added.knowledge_rows_checked["communities"][0] == 0  # kept byte for byte
    full = validate_bundle(path, write=False, every_row=True)
    assert not full.references_of_changed_rows_only and _outcome(full) == _outcome(added)
    # A new mention naming no entity fails; the parent's rows are not looked at again.
    mentions = knowledge_layers.read_table(path, "mentions.parquet")
    fresh = pc.invert(
        pc.is_in(
            mentions["mention_id"],
            value_set=_mentions_kept_from(path, bundle_path(root, "k3"))["mention_id"],
        )
    )
    first = pc.index(fresh, True).as_py()
    entity = mentions.schema.get_field_index("entity_id")
    ids = mentions["entity_id"].to_pylist()
    ids[first] = "0" * 64
    _rewrite_with_checksum(
        path,
        "mentions.parquet",
        mentions.set_column(entity, mentions.schema.field(entity), pa.array(ids, pa.string())),
    )
    report = validate_bundle(path, write=False)
    assert report.references_of_changed_rows_only
    failed = {c.name: c.observed for c in report.failed()}
    assert (
        failed["mentions.expect_column_values_to_be_in_set(entity_found)"]["unexpected_count"] == 1
    )
    assert _outcome(validate_bundle(path, write=False, every_row=True)) == _outcome(report)
    # An entity of the parent's removed: every row's references are computed again.
    kept = _mentions_kept_from(path, bundle_path(root, "k3"))
    victim = kept["entity_id"][0].as_py()
    entities = knowledge_layers.read_table(path, "entities.parquet")
    _rewrite_with_checksum(
        path, "entities.parquet", entities.filter(pc.not_equal(entities["entity_id"], victim))
    )
    report = validate_bundle(path, write=False)
    assert not report.references_of_changed_rows_only
    failed = {c.name: c.observed for c in report.failed()}
    victims = sum(1 for e in ids if e == victim)
    assert (
        failed["mentions.expect_column_values_to_be_in_set(entity_found)"]["unexpected_count"]
        == victims + 1
    )


@pytest.mark.slow
def test_an_unchanged_row_whose_reference_broke_duplicates_and_bad_new_spans_fail(roots, tmp_path):
    root = _copy_of(roots[0], tmp_path)
    path, parent = bundle_path(root, "k2"), bundle_path(root, "k1")
    kept = _mentions_kept_from(path, parent)
    assert kept.num_rows
    # An entity that unchanged mentions name is removed: those mentions now fail.
    victim = kept["entity_id"][0].as_py()
    entities = knowledge_layers.read_table(path, "entities.parquet")
    _rewrite_with_checksum(
        path, "entities.parquet", entities.filter(pc.not_equal(entities["entity_id"], victim))
    )
    # An unchanged mention is listed twice.
    mentions = knowledge_layers.read_table(path, "mentions.parquet")
    fresh = mentions.filter(
        pc.invert(pc.is_in(mentions["mention_id"], value_set=kept["mention_id"]))
    )
    assert fresh.num_rows  # the edit's own mentions
    # A new mention quotes text its span does not hold.
    texts = fresh["text"].to_pylist()
    texts[0] = texts[0] + "x"
    column = fresh.schema.get_field_index("text")
    broken = fresh.set_column(column, fresh.schema.field(column), pa.array(texts, pa.string()))
    doubled = pa.concat_tables([kept, kept.slice(0, 1), broken])
    _rewrite_with_checksum(path, "mentions.parquet", doubled)
    report = validate_bundle(path, write=False)
    assert report.compared_with == "k1"
    failed = {c.name: c.observed for c in report.failed()}
    victims = sum(1 for e in doubled["entity_id"].to_pylist() if e == victim)
    assert (
        failed["mentions.expect_column_values_to_be_in_set(entity_found)"]["unexpected_count"]
        == victims
    )
    assert "mentions.expect_column_values_to_be_unique(mention_id)" in failed
    assert (
        failed["mentions.expect_column_values_to_be_in_set(span_text_matches)"]["unexpected_count"]
        == 1
    )
    # Checking every row finds exactly the same failures.
    full = validate_bundle(path, write=False, every_row=True)
    assert full.compared_with is None
    assert _outcome(full) == _outcome(report)


@pytest.mark.slow
def test_an_addition_keeps_the_parent_communities_byte_for_byte(roots):
    root, *_ = roots
    before, after = bundle_path(root, "k3"), bundle_path(root, "k4")
    for name in ("communities.parquet", "communities.usearch"):
        with (
            open(os.path.join(before, name), "rb") as old,
            open(os.path.join(after, name), "rb") as new,
        ):
            assert old.read() == new.read(), name
    mentions = _table(root, "k4", "mentions")
    assert any("fastag" in m["doc_id"] for m in mentions), {m["doc_id"] for m in mentions}
    assert len(mentions) > len(_table(root, "k3", "mentions"))


LAYERED = ("mentions", "entities", "relations")


@pytest.fixture(scope="module")
def layered(roots, tmp_path_factory):
    """After k4, in a copy of its root: ``k5`` (an edit) and ``k6`` (a deletion and an
    edit), each written as its parent's base and a delta (``--fold_share=1``); ``k6``
    again with the default share (its change is past it: written whole) in another copy."""
    base = tmp_path_factory.mktemp("knowledge-layers")
    root = str(base / "root")
    shutil.copytree(roots[0], root)
    files = {k: v for k, v in EDITED.items() if k != "rbi.md"}
    files["fastag.md"] = "# FASTag\n\nNPCI runs the FASTag toll programme with member banks."
    files["upi.md"] += " UPI Lite also works offline on feature phones."
    corpus = write_corpus(base / "corpus", files)
    common = ["--input", str(corpus), "--surface_vectors", "--recluster_share=1"]
    run([*common, "--root", root, "--fold_share=1"], bundle_id="k5")
    validate_and_activate(root, "k5")
    (corpus / "fastag.md").unlink()
    write_corpus(corpus, {"cards.md": files["cards.md"] + " RuPay cards work abroad."})
    whole_root = str(base / "whole")
    shutil.copytree(root, whole_root)
    run([*common, "--root", root, "--fold_share=1"], bundle_id="k6")
    validate_and_activate(root, "k6")
    run([*common, "--root", whole_root], bundle_id="k6")
    validate_and_activate(whole_root, "k6")
    return root, whole_root


@pytest.mark.slow
def test_windows_write_a_delta_over_their_parents_base(layered):
    root, whole_root = layered
    k4, k5, k6 = (bundle_path(root, b) for b in ("k4", "k5", "k6"))
    for name in LAYERED:
        table = f"{name}.parquet"
        base, delta, _ = knowledge_layers.layer_files(table)
        # k4's table (or its base: a small addition to k3, k4 may be layered by default)
        # is the base of k5, and of k6 where k6's delta (both changes) stays within the
        # share: on this tiny corpus the mentions of two edited documents and a deleted
        # one outnumber the base's, so k6 writes its mentions whole.
        k4_base = os.path.join(k4, base if knowledge_layers.is_layered(k4, table) else table)
        assert knowledge_layers.is_layered(k5, table)
        assert os.path.samefile(k4_base, os.path.join(k5, base))
        # the linked base keeps k4's checksum, which is its own
        entry = read_manifest(k5).files[base]
        assert entry == read_manifest(k4).files[os.path.relpath(k4_base, k4)]
        assert entry.sha256 == sha256_file(os.path.join(k5, base))
        assert knowledge_layers.is_layered(k6, table) == (name != "mentions"), name
        if name != "mentions":
            assert os.path.samefile(k4_base, os.path.join(k6, base))
            rows = pq.ParquetFile(os.path.join(k6, delta)).metadata.num_rows
            assert 0 < rows < len(_table(root, "k6", name)), name
        # Past the default share the same window writes the table whole.
        assert not knowledge_layers.is_layered(bundle_path(whole_root, "k6"), table)
    # An entity the base holds is rewritten with its chunks as a change against its
    # base row: the chunks added since the base, and those removed since it.
    for k in (k5, k6):
        delta = pq.read_table(os.path.join(k, "entities.delta.parquet"))
        changes = delta["chunk_ids_removed"].to_pylist()
        assert any(c is not None for c in changes), k
        base = pq.read_table(os.path.join(k, "entities.base.parquet"), columns=["entity_id"])
        in_base = set(base["entity_id"].to_pylist())
        for entity_id, change in zip(delta["entity_id"].to_pylist(), changes, strict=True):
            assert (change is not None) == (entity_id in in_base), entity_id
    # An edit cuts the kept communities: the rows it changed (here the one community),
    # over the parent's (store.knowledge_layers.changed_rows finds them).
    assert knowledge_layers.is_layered(k5, "communities.parquet")
    delta = pq.read_table(os.path.join(k5, "communities.delta.parquet"))
    assert 0 < delta.num_rows <= len(_table(root, "k5", "communities"))


@pytest.mark.slow
def test_a_layered_generation_holds_what_the_whole_one_holds(layered):
    root, whole_root = layered
    for name in ("mentions", "entities", "relations", "communities"):
        assert _table(root, "k6", name) == _table(whole_root, "k6", name), name


@pytest.mark.slow
def test_readers_answer_from_a_layered_generation_as_from_the_whole_one(layered):
    from query.knowledge import load_knowledge

    root, whole_root = layered
    layers, whole = (load_knowledge(bundle_path(r, "k6")) for r in (root, whole_root))
    assert layers.fold is not None and whole.fold is None  # overlaid on its base's layer
    assert list(layers.folded().entity_ids) == list(whole.entity_ids)
    assert list(layers.folded().relations.ids) == list(whole.relations.ids)
    seen = lambda chunks: True  # noqa: E731
    relation = lambda layer, rows: [layer.relations.ids[r] for r in rows]  # noqa: E731
    for anchor in ("UPI", "NPCI", "RuPay"):
        found, theirs = layers.resolve(anchor, seen), whole.resolve(anchor, seen)
        assert found and _ids(layers, found) == _ids(whole, theirs), anchor
        hops = {"hops": 2, "fan_out": 4, "limit": 20}
        assert relation(layers, layers.expand(found, seen, **hops)) == relation(
            whole, whole.expand(theirs, seen, **hops)
        )


def _ids(layer, rows):
    return [layer.entity_ids[r] for r in rows]


def _same_answers(overlaid, whole) -> None:
    """Every lookup a reader makes gives the same ids from ``overlaid`` (a layer over its
    base's) as from ``whole`` (the same tables read whole)."""
    seen = lambda chunks: True  # noqa: E731
    assert sorted(overlaid.aliases) == sorted(whole.aliases)
    row_of = {}
    for norm in whole.aliases:
        rows = overlaid.aliases[norm]
        assert _ids(overlaid, rows) == _ids(whole, whole.aliases[norm]), norm
        row_of.update(zip(_ids(overlaid, rows), rows, strict=True))
    assert sorted(row_of) == sorted(whole.entity_ids)  # every live entity, no dead one
    relation = lambda layer, rows: [layer.relations.ids[r] for r in rows]  # noqa: E731
    for row, entity in enumerate(whole.entity_ids):
        mine = row_of[entity]
        assert overlaid.entity_names[mine] == whole.entity_names[row]
        assert list(overlaid.entity_chunks[mine]) == list(whole.entity_chunks[row])
        assert relation(overlaid, overlaid.adjacency.get(mine, [])) == relation(
            whole, whole.adjacency.get(row, [])
        )
        hops = {"hops": 2, "fan_out": 3, "limit": 10}
        assert relation(overlaid, overlaid.expand([mine], seen, **hops)) == relation(
            whole, whole.expand([row], seen, **hops)
        )
    assert _relations(overlaid) == _relations(whole)
    chunks = {c for row in whole.entity_chunks for c in row}
    assert overlaid.contradictions(chunks) == whole.contradictions(chunks)
    for surface in ("relations", "communities"):
        mine, theirs = getattr(overlaid, surface), getattr(whole, surface)
        assert {k: mine.ids[r] for k, r in mine.row_of_key.items()} == {
            k: theirs.ids[r] for k, r in theirs.row_of_key.items()
        }


def _relations(layer) -> dict:
    """Each live relation (every live row has an ANN key): its ends by entity id, its
    predicate and support."""
    ends = {}
    for r in set(layer.relations.row_of_key.values()):
        obj = layer.objects[r]
        ends[layer.relations.ids[r]] = (
            layer.entity_ids[layer.subjects[r]],
            layer.entity_ids[obj] if obj >= 0 else None,
            layer.predicates[r],
            layer.supports[r],
            layer.confidences[r],
        )
    return ends


@pytest.mark.slow
def test_a_reader_that_holds_the_base_reads_only_the_change(layered, monkeypatch):
    """k5 and k6 are written over the same base: a reader that opened k5 opens k6 as
    its base's layer (built once) and k6's delta, building nothing over every row, and
    answers every lookup as the same generation written whole."""
    from query import knowledge

    root, whole_root = layered
    knowledge.drop_held()
    k5 = knowledge.load_knowledge(bundle_path(root, "k5"))
    assert k5.fold is not None
    _same_answers(k5, knowledge.load_knowledge(bundle_path(root, "k5")).folded())

    def no_whole_build(*args, **kwargs):
        raise AssertionError("the reopen built a structure over every row")

    with monkeypatch.context() as patch:
        patch.setattr(knowledge, "_build", no_whole_build)
        k6 = knowledge.load_knowledge(bundle_path(root, "k6"))
    whole = knowledge.load_knowledge(bundle_path(whole_root, "k6"))
    assert k6.fold is not None and whole.fold is None
    _same_answers(k6, whole)
    assert list(k6.folded().entity_ids) == list(whole.entity_ids)
    # the walk graph is read node by node from the overlaid layer (its rows numbered
    # base first, dead rows among them) and walks as the whole generation's graph does
    from tests.query.walk_checks import assert_same_walks, local_hops

    chunk_ids = sorted({c for row in whole.entity_chunks for c in row})
    row_of_chunk = {c: i for i, c in enumerate(chunk_ids)}
    assert k6.dead_entities and k6.chunk_entities is not None
    for hops in (1, 3):  # local walks, and walks of the whole graph (a small one)
        with monkeypatch.context() as patch:
            local_hops(patch, hops)
            for visible in (None, np.arange(0, len(chunk_ids), 2)):
                walked = assert_same_walks(k6, whole, chunk_ids, row_of_chunk, visible)
                assert walked.stayed > 0 or hops == 3
    # The base's edges counted at build time hold for the rows the change did not touch:
    # each as the same generation written whole counts it.
    assert k6.walk_edges is not None and whole.walk_edges is not None
    live = [e for e in range(len(k6.entity_ids)) if e not in k6.dead_entities]
    known = [e for e, c in zip(live, k6.walk_edges.of(live).tolist(), strict=True) if c >= 0]
    assert 0 < len(known) < len(live)
    row = {entity_id: r for r, entity_id in enumerate(whole.entity_ids)}
    theirs = whole.walk_edges.of([row[k6.entity_ids[e]] for e in known]).tolist()
    assert k6.walk_edges.of(known).tolist() == theirs


def _document_rows(segments, doc_id: str) -> dict[str, list]:
    """One document's extraction rows (mentions, statements, acronyms) from the
    segments that hold them, as the stream's committer hands them to the update."""
    from schemas import Mention, Statement
    from store.segments import EXTRACTED_ACRONYMS, EXTRACTED_MENTIONS, EXTRACTED_STATEMENTS

    rows: dict[str, list] = {"mentions": [], "statements": [], "acronyms": []}
    for segment in segments:
        for name, rel, make in (
            ("mentions", EXTRACTED_MENTIONS, lambda r: Mention(**r)),
            ("statements", EXTRACTED_STATEMENTS, lambda r: Statement(**r)),
            ("acronyms", EXTRACTED_ACRONYMS, lambda r: tuple(r.values())),
        ):
            path = os.path.join(segment.path, rel)
            if os.path.exists(path):
                table = pq.read_table(path)
                table = table.filter(pc.equal(table["doc_id"], doc_id))
                rows[name] += [make(r) for r in table.to_pylist()]
    return rows


def _as_new_document(rows: dict[str, list], doc_id: str) -> dict[str, list]:
    """``rows`` as a new document's: the document, its mentions' ids renamed."""
    from schemas import stable_id

    renamed = {m.mention_id: stable_id("copy", m.mention_id) for m in rows["mentions"]}
    return {
        "mentions": [
            m._replace(mention_id=renamed[m.mention_id], doc_id=doc_id) for m in rows["mentions"]
        ],
        "statements": [
            s._replace(
                doc_id=doc_id,
                subject_mention_id=renamed.get(s.subject_mention_id, s.subject_mention_id),
                object_mention_id=renamed.get(s.object_mention_id, s.object_mention_id),
            )
            for s in rows["statements"]
        ],
        "acronyms": [(doc_id, *a[1:]) for a in rows["acronyms"]],
    }


def _update_into(staging: str, parent: str, segments, change, model_path: str) -> None:
    import numpy as np

    from store.config import AnnConfig
    from transforms.knowledge_update import apply_update

    rows, unchanged, dropped = change
    os.makedirs(staging)

    def plumbing_vectors(texts):  # the same vectors in both runs: the test is of lookups
        return np.ones((len(texts), 384), np.float32) / 384**0.5

    apply_update(
        {name: [batch] for name, batch in rows.items()},
        unchanged,
        dropped=dropped,
        parent=parent,
        segments=[s.path for s in segments],
        staging=staging,
        model=model_path,
        config=KnowledgeConfig(recluster_share=1, fold_share=1),
        changed_since=0.0,
        seed=DEFAULT_SEED,
        dimension=384,
        ann=AnnConfig(),
        embed=plumbing_vectors,
    )


@pytest.mark.slow
@pytest.mark.parametrize("change", ["edit", "deletion", "addition"])
@pytest.mark.parametrize("parent_id", ["k5", "k6"])
def test_an_update_that_looks_rows_up_writes_what_one_that_scans_writes(
    layered, tmp_path, model_path, change, parent_id
):
    """A process that keeps what it reads (a stream) updates by looking rows up in
    indexes of its parent's base (held under any hard link of it); one that does not
    scans the tables. Both write the same tables, on parents whose tables are an older
    generation's base and a delta (k5: every table; k6: all but its mentions)."""
    from store import table_cache
    from store.bundles import read_manifest as manifest_of
    from store.segments import live_revisions, open_segments

    root, _ = layered
    parent = bundle_path(root, parent_id)
    segments = open_segments(parent, manifest_of(parent))
    live = set(live_revisions(segments))
    doc_id = "upi.md"  # edited by k5: some of its forms are only in k5's delta
    assert doc_id in live
    rows = _document_rows(segments, doc_id)
    assert rows["mentions"] and rows["statements"]
    changes = {
        "edit": (rows, live - {doc_id}, {doc_id}),
        "deletion": ({k: [] for k in rows}, live - {doc_id}, {doc_id}),
        "addition": (_as_new_document(rows, "copy.md"), live, set()),
    }
    _update_into(str(tmp_path / "scanned"), parent, segments, changes[change], model_path)
    table_cache.enable(1 << 30)
    try:
        # An update over k4 (whose base k6 links) builds the base's indexes first.
        k4 = bundle_path(root, "k4")
        k4_segments = open_segments(k4, manifest_of(k4))
        k4_rows = _as_new_document(rows, "prime.md"), set(live_revisions(k4_segments)), set()
        _update_into(str(tmp_path / "prime"), k4, k4_segments, k4_rows, model_path)
        before = table_cache.stats()["hits"]
        _update_into(str(tmp_path / "looked-up"), parent, segments, changes[change], model_path)
        assert table_cache.stats()["hits"] > before
    finally:
        table_cache.disable()
    for name in (*LAYERED, "communities"):
        scanned, looked_up = (
            knowledge_layers.read_table(str(tmp_path / run), f"{name}.parquet").to_pylist()
            for run in ("scanned", "looked-up")
        )
        assert scanned == looked_up, name
