"""Map files (store.knowledge_maps): the layer a reader opens in place from them answers
every lookup as the layer built from the rows of the same tables."""

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from query.knowledge import load_knowledge, whole_layer
from query.mapped_layer import mapped_layer
from query.whole_graph import build_whole
from schemas.knowledge import COMMUNITY_SCHEMA, ENTITY_SCHEMA, RELATION_SCHEMA, with_vectors
from store.bundles import COMMUNITIES, ENTITIES, RELATIONS
from store.knowledge_layers import layer_files
from store.knowledge_maps import map_name, open_map, write_maps
from store.walk_counts import WALK_MAP

NORMS = ["acme", "acme corp", "bolt", "upi", "rupay", "npci"]
CHUNKS = [f"c{i}" for i in range(6)]


def _tables(entities: list, relations: list, communities: int) -> dict[str, pa.Table]:
    ids = [f"e{i:02d}" for i in range(len(entities))]
    entity_rows = [
        {
            "entity_id": ids[i],
            "name": f"Entity {i}",
            "label": "ORG",
            "norm": f"entity {i}",
            "mention_count": 1,
            "aliases": norms,
            "alias_counts": [1] * len(norms),
            "chunk_ids": sorted(chunks),
            "alias_norms": norms,
        }
        for i, (norms, chunks) in enumerate(entities)
    ]
    relation_rows = [
        {
            "relation_id": f"r{r:02d}",
            "subject_id": ids[s],
            "predicate": "limit of" if functional else "relates to",
            "object_id": None if o is None else (ids[o] if o >= 0 else "not-an-entity"),
            "object_text": "an object",
            "category": "limit" if functional else "other",
            "confidence": 0.5,
            "support": 1 + r % 3,
            "chunk_ids": chunks,
            "sentence_doc_ids": [],
            "sentence_starts": [],
            "sentence_ends": [],
            "summary": f"relation {r}",
            "ann_key": 2**63 + r * 7919 % 101,  # above int64: keys are uint64
            "embedding": None,
        }
        for r, (s, o, functional, chunks) in enumerate(relations)
    ]
    community_rows = [
        {
            "community_id": f"k{k}",
            "level": 0,
            "parent_id": None,
            "title": f"community {k}",
            "size": 1,
            "entity_ids": [],
            "relation_ids": [],
            "chunk_ids": [],
            "evidence_chunk_ids": CHUNKS[: k + 1],
            "report": f"report {k}",
            "ann_key": 1000 - k,
            "embedding": None,
        }
        for k in range(communities)
    ]
    return {
        ENTITIES: pa.Table.from_pylist(entity_rows, schema=ENTITY_SCHEMA),
        RELATIONS: pa.Table.from_pylist(relation_rows, schema=with_vectors(RELATION_SCHEMA)),
        COMMUNITIES: pa.Table.from_pylist(community_rows, schema=with_vectors(COMMUNITY_SCHEMA)),
    }


def _write(path: str, tables: dict[str, pa.Table]) -> None:
    os.makedirs(path, exist_ok=True)
    for name, table in tables.items():
        pq.write_table(table, os.path.join(path, name))


def _same(mapped, whole) -> None:
    """Every lookup the reader makes, from the map files and from the rows."""
    assert list(mapped.entity_ids) == list(whole.entity_ids)
    assert list(mapped.entity_chunks) == list(whole.entity_chunks)
    assert dict(mapped.aliases) == dict(whole.aliases)
    for norm in [*NORMS, "no such alias"]:
        assert mapped.aliases.get(norm) == whole.aliases.get(norm)
    assert list(mapped.subjects) == list(whole.subjects)
    assert list(mapped.objects) == list(whole.objects)
    assert [mapped.objects[r] for r in range(len(mapped.objects))] == list(whole.objects)
    entities = range(len(whole.entity_ids))
    assert {e: mapped.adjacency.get(e) for e in entities} == {
        e: whole.adjacency.get(e) for e in entities
    }
    assert dict(mapped.adjacency) == dict(whole.adjacency)
    assert dict(mapped.functional) == dict(whole.functional)
    assert {c: mapped.functional.get(c) for c in CHUNKS} == {
        c: whole.functional.get(c) for c in CHUNKS
    }
    for surface in ("relations", "communities"):
        mine, theirs = getattr(mapped, surface), getattr(whole, surface)
        assert dict(mine.row_of_key) == dict(theirs.row_of_key)
        assert list(mine.ids) == list(theirs.ids) and list(mine.texts) == list(theirs.texts)
        assert list(mine.chunk_ids) == list(theirs.chunk_ids)
    assert list(mapped.supports) == list(whole.supports)
    assert list(mapped.confidences) == list(whole.confidences)
    assert list(mapped.categories) == list(whole.categories)
    seen = lambda chunks: True  # noqa: E731
    for e in entities:
        hops = {"hops": 2, "fan_out": 2, "limit": 8}
        assert mapped.expand([e], seen, **hops) == whole.expand([e], seen, **hops)
    assert mapped.contradictions(set(CHUNKS)) == whole.contradictions(set(CHUNKS))


ENTITY = st.tuples(
    st.lists(st.sampled_from(NORMS), min_size=1, max_size=3),  # two aliases, one norm
    st.lists(st.sampled_from(CHUNKS), max_size=3, unique=True),
)


@st.composite
def _layers(draw):
    entities = draw(st.lists(ENTITY, min_size=1, max_size=8))
    relation = st.tuples(
        st.integers(0, len(entities) - 1),
        st.one_of(st.none(), st.integers(-1, len(entities) - 1)),  # -1: not an entity
        st.booleans(),
        st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=3, unique=True),
    )
    return entities, draw(st.lists(relation, max_size=12)), draw(st.integers(0, 3))


@settings(max_examples=40, deadline=None)
@given(_layers())
def test_a_layer_read_from_its_map_files_answers_as_one_built_from_its_rows(
    tmp_path_factory, drawn
):
    entities, relations, communities = drawn
    path = str(tmp_path_factory.mktemp("maps"))
    _write(path, _tables(entities, relations, communities))
    maps = [map_name(t) for t in (ENTITIES, RELATIONS, COMMUNITIES)]
    assert write_maps(path) == [*maps, WALK_MAP]
    mapped = mapped_layer(path)
    assert mapped is not None and mapped.relations_of is not None
    whole = whole_layer(path)
    _same(mapped, whole)
    # The edges counted at build time: each entity's in the whole walk graph of every chunk.
    graph = build_whole(whole, CHUNKS, {c: i for i, c in enumerate(CHUNKS)}, None)
    assert mapped.walk_edges is not None
    n = len(entities)
    counted = mapped.walk_edges.of(range(n)).tolist()
    assert counted == [len(graph.neighbours(e)) for e in range(n)]
    # ... and its partners, each with the relation that names the pair
    owners, partners, via = mapped.walk_edges.partners(range(n))
    named = {(e, p): whole.predicates[r] for e, p, r in zip(owners, partners, via, strict=True)}
    expected = {
        (e, p): graph.predicate_of[(min(e, p), max(e, p))]
        for e in range(n)
        for p in graph.neighbours(e).tolist()
        if p < n
    }
    assert named == expected


def _layer(tmp_path, name="g") -> str:
    path = str(tmp_path / name)
    entities = [(["acme"], ["c1"]), (["bolt", "upi"], ["c2", "c3"]), (["rupay"], [])]
    relations = [(0, 1, True, ["c1"]), (1, 1, False, ["c2"]), (2, None, True, ["c1", "c3"])]
    _write(path, _tables(entities, relations, 2))
    return path


def test_a_map_whose_table_changed_is_not_used(tmp_path):
    path = _layer(tmp_path)
    write_maps(path)
    assert open_map(path, ENTITIES) is not None
    table = pq.read_table(os.path.join(path, ENTITIES))
    renamed = table.set_column(1, "name", pa.array(["A", "B", "C"]))
    pq.write_table(renamed, os.path.join(path, ENTITIES))  # rewritten, its map kept
    assert open_map(path, ENTITIES) is None
    layer = load_knowledge(path)
    assert layer.relations_of is None and list(layer.entity_names) == ["A", "B", "C"]


def test_a_window_links_its_parents_map_for_the_base_it_links(tmp_path):
    parent = _layer(tmp_path, "parent")
    assert len(write_maps(parent)) == 4  # three tables and the walk counts
    child = str(tmp_path / "child")
    os.makedirs(child)
    base, delta, removed = layer_files(ENTITIES)
    os.link(os.path.join(parent, ENTITIES), os.path.join(child, base))  # the window's base
    shutil.copy(os.path.join(parent, ENTITIES), os.path.join(child, delta))
    pq.write_table(pa.table({"id": pa.array([], pa.string())}), os.path.join(child, removed))
    for name in (RELATIONS, COMMUNITIES):  # rewritten whole by the window
        shutil.copy(os.path.join(parent, name), os.path.join(child, name))
    # its walk counts are counted over its rows files: the entities' base and relations
    assert write_maps(child, parent) == [map_name(RELATIONS), map_name(COMMUNITIES), WALK_MAP]
    assert os.path.samefile(
        os.path.join(child, map_name(base)), os.path.join(parent, map_name(ENTITIES))
    )
    assert write_maps(child, parent) == []  # every map is there
    assert not os.path.samefile(os.path.join(child, WALK_MAP), os.path.join(parent, WALK_MAP))


def test_a_window_that_keeps_both_bases_links_its_parents_walk_counts(tmp_path):
    parent = _layer(tmp_path, "parent")
    write_maps(parent)
    child = str(tmp_path / "child")
    os.makedirs(child)
    for name in (ENTITIES, RELATIONS):
        base, delta, removed = layer_files(name)
        os.link(os.path.join(parent, name), os.path.join(child, base))
        table = pq.read_table(os.path.join(parent, name))
        pq.write_table(table.slice(0, 0), os.path.join(child, delta))
        pq.write_table(pa.table({"id": pa.array([], pa.string())}), os.path.join(child, removed))
    shutil.copy(os.path.join(parent, COMMUNITIES), os.path.join(child, COMMUNITIES))
    assert write_maps(child, parent) == [map_name(COMMUNITIES)]
    assert os.path.samefile(os.path.join(child, WALK_MAP), os.path.join(parent, WALK_MAP))
    base = mapped_layer(child)
    assert base is not None and base.walk_edges is not None
    # acme: c1 and bolt; bolt: c2, c3 and acme; rupay: no chunk
    assert base.walk_edges.of([0, 1, 2]).tolist() == [2, 3, 0]


def test_entities_without_normalized_aliases_get_no_map(tmp_path):
    path = _layer(tmp_path)
    table = pq.read_table(os.path.join(path, ENTITIES)).drop_columns(["alias_norms"])
    pq.write_table(table, os.path.join(path, ENTITIES))
    assert write_maps(path) == [map_name(RELATIONS), map_name(COMMUNITIES)]
    assert mapped_layer(path) is None and load_knowledge(path) is not None


def test_relations_newer_than_the_entities_base_find_the_entities_of_its_delta(tmp_path):
    """Each table folds on its own: a window may write its relations whole while its
    entities stay a base and a delta, and a relation of the whole table may name an
    entity only the delta holds. The reader finds the entity there."""
    parent = _layer(tmp_path, "parent")
    write_maps(parent)
    entities = [(["acme"], ["c1"]), (["bolt", "upi"], ["c2", "c3"]), (["rupay"], [])]
    entities.append((["npci"], ["c4"]))  # e03: new in the window
    relations = [(0, 1, True, ["c1"]), (1, 1, False, ["c2"]), (2, None, True, ["c1", "c3"])]
    relations += [(3, 0, True, ["c4"]), (1, 3, False, ["c3"])]  # naming e03
    tables = _tables(entities, relations, 2)
    child = str(tmp_path / "child")
    os.makedirs(child)
    base, delta, removed = layer_files(ENTITIES)
    os.link(os.path.join(parent, ENTITIES), os.path.join(child, base))
    pq.write_table(tables[ENTITIES].slice(3), os.path.join(child, delta))
    pq.write_table(pa.table({"id": pa.array([], pa.string())}), os.path.join(child, removed))
    for name in (RELATIONS, COMMUNITIES):
        pq.write_table(tables[name], os.path.join(child, name))
    write_maps(child, parent)
    layer, whole = load_knowledge(child), whole_layer(child)
    assert layer.fold is not None  # overlaid on the base's map files
    ids = lambda opened, rows: [opened.entity_ids[r] for r in rows]  # noqa: E731
    names = lambda opened, rows: [opened.relations.ids[r] for r in rows]  # noqa: E731
    assert (
        ids(layer, layer.subjects)
        == ids(whole, whole.subjects)
        == [
            "e00",
            "e01",
            "e02",
            "e03",
            "e01",
        ]
    )
    seen = lambda chunks: True  # noqa: E731
    for row, entity in enumerate(whole.entity_ids):
        mine = list(layer.entity_ids).index(entity)
        assert names(layer, layer.adjacency.get(mine, [])) == names(
            whole, whole.adjacency.get(row, [])
        )
        assert names(layer, layer.expand([mine], seen, hops=2, fan_out=3, limit=9)) == names(
            whole, whole.expand([row], seen, hops=2, fan_out=3, limit=9)
        )
    assert ids(layer, layer.aliases["npci"]) == ["e03"]
    assert dict(layer.adjacency).keys() == {
        list(layer.entity_ids).index(e) for e in ids(whole, dict(whole.adjacency))
    }
