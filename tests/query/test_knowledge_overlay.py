"""The views an overlaid knowledge layer is made of: base rows first, delta rows after,
dead base rows never given out, rows from both parts in id order. The whole layer
against the overlaid one, on real builds: tests/pipelines/test_knowledge_update.py."""

import pyarrow as pa
import pytest

from query.columns import ArrowSequence
from query.knowledge_overlay import (
    Change,
    Joined,
    KeyRows,
    Overlaid,
    Patched,
    _live_entity_rows,
    entity_rows,
)

# base rows 0-3 hold e1, e3, e5, e7 (sorted by id); the delta rewrites e5 and adds e4
BASE_IDS = pa.array(["e1", "e3", "e5", "e7"])
DELTA = pa.table({"entity_id": ["e4", "e5"], "name": ["four", "five again"]})


def _change(removed=("e7",)) -> Change:
    return Change(BASE_IDS, DELTA, list(removed), "entity_id")


def test_a_change_finds_the_base_rows_it_kills_and_numbers_its_own_after_the_base():
    change = _change()
    assert change.dead == {2, 3}  # e5 rewritten, e7 removed
    assert change.row_of == {"e4": 4, "e5": 5}
    assert change.rewritten() == {5: 2}
    assert entity_rows(change, BASE_IDS, ["e1", "e5", "e7", "e9", None]) == [0, 5, -1, -1, -1]


def test_joined_rows_are_the_bases_then_the_deltas():
    ids = Joined(ArrowSequence(BASE_IDS), ArrowSequence(DELTA.column("entity_id")))
    assert len(ids) == 6
    assert [ids[0], ids[3], ids[4], ids[-1]] == ["e1", "e7", "e4", "e5"]
    assert ids.tolist() == ["e1", "e3", "e5", "e7", "e4", "e5"]
    assert ids.arrow.to_pylist() == ids.tolist()
    with pytest.raises(IndexError):
        ids[6]


def test_an_overlaid_index_leaves_dead_rows_out_and_orders_both_parts_by_id():
    change = _change()
    ids = Joined(ArrowSequence(BASE_IDS), ArrowSequence(DELTA.column("entity_id")))
    base = {"five": [2], "odd": [0, 1, 2, 3], "seven": [3]}
    delta = {"five": [1], "odd": [0, 1]}  # the delta's own row numbers
    index = Overlaid(base, delta, change.offset, change.dead, ids.__getitem__)
    assert index["five"] == [5]  # the rewritten row only
    assert [ids[r] for r in index["odd"]] == ["e1", "e3", "e4", "e5"]
    assert "seven" not in index  # removed
    assert sorted(index) == ["five", "odd"]


def test_an_overlaid_adjacency_keeps_a_rewritten_entitys_base_relations():
    change = _change()
    rewrote = change.rewritten()
    relation_ids = ["r1", "r2", "r3"]  # r3 is the delta's (row 0 of its own)
    base = {0: [0], 2: [0, 1]}  # e5 (base row 2) is an end of r1 and r2
    delta = {5: [0]}  # the rewritten e5 (row 5) is an end of r3

    def base_key(node):
        return rewrote.get(node) if node >= change.offset else node

    adjacency = Overlaid(base, delta, 2, set(), relation_ids.__getitem__, base_key=base_key)
    assert adjacency[5] == [0, 1, 2]
    assert adjacency[0] == [0]


def test_key_rows_prefer_the_delta_and_refuse_dead_rows():
    keys = KeyRows({10: 0, 11: 1, 12: 2}, {12: 0, 13: 1}, 3, {1, 2})
    assert keys[10] == 0
    assert keys[12] == 3 and keys[13] == 4
    assert keys.get(11) is None
    assert sorted(keys.items()) == [(10, 0), (12, 3), (13, 4)]


def test_base_relations_find_their_entities_among_the_live_ones():
    """A base relation's end is the rewritten entity's new row, a removed entity's -1,
    and an entity the base of the entities does not hold yet is found in the delta
    (the relations' base may be newer than the entities')."""
    change = _change()
    find, find_all, find_many = _live_entity_rows(change, BASE_IDS)
    ids = ["e1", "e5", "e7", "e4", "e9", None]
    expected = entity_rows(change, BASE_IDS, ids)
    assert expected == [0, 5, -1, 4, -1, -1]
    assert [find(i) if i is not None else -1 for i in ids] == expected
    assert find_all(pa.array(ids, pa.string())).tolist() == expected
    assert find_many(ids[:-1]).tolist() == expected[:-1]


def test_a_list_held_as_a_change_is_made_whole_from_its_base_row():
    base = [["c1", "c2", "c3"], ["c4"]]
    patched = Patched(
        [["c0"], ["c9"], ["c5"]],
        [["c2"], None, []],
        [0, None, 1],
        base,
    )
    assert patched.tolist() == [["c0", "c1", "c3"], ["c9"], ["c4", "c5"]]
    assert patched[-1] == ["c4", "c5"] and len(patched) == 3
    with pytest.raises(ValueError, match="base has no row"):
        Patched([["c1"]], [[]], [None], base)[0]
