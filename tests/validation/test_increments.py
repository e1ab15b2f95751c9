"""Row changes against a parent table, and the whole-column reference checks."""

import numpy as np
import pyarrow as pa

from validation.increments import (
    all_in,
    changed_rows,
    duplicated,
    increasing,
    is_in,
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
    assert increasing(pa.array(["a", "b", "c"])) and not increasing(pa.array(["a", "a"]))
    # Sorted with a repeat, or with a null: every copy is flagged, as for unsorted ids.
    assert duplicated(pa.array(["a", "b", "b", "c"])).tolist() == [False, True, True, False]
    assert duplicated(pa.array(["a", None, "c", "c"])).tolist() == [False, False, True, True]
    assert not increasing(pa.array(["a", None, "c"]))


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
