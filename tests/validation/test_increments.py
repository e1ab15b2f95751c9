"""Row changes against a parent table, and the whole-column reference checks."""

import numpy as np
import pyarrow as pa

from validation.increments import (
    all_in,
    changed_rows,
    compared,
    duplicated,
    is_in,
    parent_rows,
    same_values,
)


def _table(ids, names, lists):
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "name": pa.array(names, pa.string()),
            "items": pa.array(lists, pa.list_(pa.string())),
        }
    )


def test_a_row_is_changed_when_new_or_different_in_any_column():
    parent = _table(["a", "b", "c", "d"], ["A", "B", None, "D"], [["x"], ["y", "z"], [], ["w"]])
    table = _table(
        ["a", "b", "c", "d", "e"],
        ["A", "B", None, "D", "E"],
        [["x"], ["y", "q"], [], ["w", "v"], []],
    )
    # a: same; b: a list item differs; c: same (nulls and empty lists); d: a longer list;
    # e: not in the parent.
    assert changed_rows(table, parent, "id").tolist() == [False, True, False, True, True]
    renamed = table.set_column(1, "name", pa.array(["A", "b", None, "D", "E"]))
    assert changed_rows(renamed, parent, "id")[:2].tolist() == [False, True]


def test_other_columns_make_every_row_changed():
    parent = _table(["a"], ["A"], [["x"]])
    assert changed_rows(parent.drop_columns(["name"]), parent, "id").tolist() == [True]


def test_same_values_compares_nulls_and_nan():
    left = pa.array([1.0, None, float("nan"), 2.0])
    right = pa.array([1.0, None, float("nan"), None])
    assert same_values(left, right).tolist() == [True, True, False, False]


def test_reference_checks_on_whole_columns():
    known = pa.array(["x", "y"])
    lists = pa.array([["x"], [], ["x", "z"], ["y", "y"]], pa.list_(pa.string()))
    assert all_in(lists, known).tolist() == [True, True, False, True]
    assert is_in(pa.array(["x", None, "q"]), known).tolist() == [True, False, False]
    assert duplicated(pa.array(["a", "b", "a", "c"])).tolist() == [True, False, True, False]
    assert not duplicated(pa.array(["a"], pa.string())).any()
    assert isinstance(duplicated(pa.array([], pa.string())), np.ndarray)


def test_duplicates_in_a_sorted_id_column():
    # Sorted and strictly increasing: nothing repeated, found without counting.
    assert not duplicated(pa.chunked_array([["a", "b"], ["c", "d"]])).any()
    # Sorted with a repeat, or with a null: every copy is flagged, as for unsorted ids.
    assert duplicated(pa.array(["a", "b", "b", "c"])).tolist() == [False, True, True, False]
    assert duplicated(pa.array(["a", None, "c", "c"])).tolist() == [False, False, True, True]


def test_stretches_and_row_by_row_comparison_agree():
    rng = np.random.default_rng(7)
    ids = [f"{i:05d}" for i in range(3000)]
    parent = _table(ids, [f"n{i}" for i in range(3000)], [[f"x{i % 7}"] for i in range(3000)])
    keep = np.sort(rng.choice(3000, size=2900, replace=False))
    names = parent["name"].to_pylist()
    for i in rng.choice(3000, size=40, replace=False):
        names[i] = "edited"
    edited = parent.set_column(1, "name", pa.array(names)).take(keep)
    added = _table(["zzzz1", "00000a"], ["new", "new"], [[], ["y"]])
    table = pa.concat_tables([edited, added]).sort_by("id")
    in_order = changed_rows(table, parent, "id")
    # Shuffled, every row is its own stretch: the row-by-row path, same answer.
    order = rng.permutation(table.num_rows)
    shuffled = changed_rows(table.take(order), parent, "id")
    assert (shuffled == in_order[order]).all()
    expected = [row["id"] not in set(ids) or row["name"] == "edited" for row in table.to_pylist()]
    assert in_order.tolist() == expected


def _hashed(ids, parent_ids):
    """Each id's parent row by a dictionary: what parent_rows must agree with."""
    where = {value: row for row, value in enumerate(parent_ids)}
    return [where.get(value, -1) for value in ids]


def test_sorted_ids_are_walked_to_the_same_parent_rows():
    rng = np.random.default_rng(11)
    universe = sorted(f"{value:08x}" for value in rng.choice(10**8, size=4000, replace=False))
    for added, removed in [(0, 0), (3, 0), (0, 5), (30, 30), (400, 400), (900, 0)]:
        parent = sorted(rng.choice(universe[:3000], size=2500, replace=False).tolist())
        gone = set(rng.choice(parent, size=removed, replace=False).tolist())
        new = rng.choice(universe[3000:], size=added, replace=False).tolist()
        ids = sorted([p for p in parent if p not in gone] + new)
        rows = parent_rows(pa.array(ids), pa.chunked_array([parent[:900], parent[900:]]))
        assert rows.tolist() == _hashed(ids, parent), (added, removed)
    # A row added and another removed between two matches: the stretch is cut where
    # they differ, not taken whole.
    parent, ids = ["a", "b", "d", "e"], ["a", "c", "d", "e"]
    assert parent_rows(pa.array(ids), pa.array(parent)).tolist() == [0, -1, 2, 3]
    # Unsorted ids are hashed.
    assert parent_rows(pa.array(["e", "a"]), pa.array(parent)).tolist() == [3, 0]


def test_compared_says_whether_every_parent_id_is_kept():
    parent = _table(["a", "b", "c"], ["A", "B", "C"], [[], [], []])
    grown = _table(["a", "b", "bb", "c"], ["A", "B", "new", "C"], [[], [], [], []])
    changed, kept = compared(grown, parent, "id")
    assert changed.tolist() == [False, False, True, False] and kept
    changed, kept = compared(grown.take([0, 2, 3]), parent, "id")
    assert changed.tolist() == [False, True, False] and not kept
