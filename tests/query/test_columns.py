"""Arrow columns as Python sequences and grouped indexes (query.columns)."""

import numpy as np
import pyarrow as pa
import pytest

from query.columns import ArrowSequence, Grouped


def test_a_sequence_converts_one_item_or_the_whole_column():
    column = pa.chunked_array([pa.array([["a"], []]), pa.array([["b", "c"]])])
    items = ArrowSequence(column)
    assert len(items) == 3
    assert items[2] == ["b", "c"] and items[-1] == ["b", "c"] and items[1] == []
    assert items._items is None  # one item at a time: nothing converted whole
    assert items[1:] == [[], ["b", "c"]]
    assert list(items) == [["a"], [], ["b", "c"]]
    assert items[0] == ["a"]
    with pytest.raises(IndexError):
        items[3]
    with pytest.raises(IndexError):
        ArrowSequence(pa.array([1]))[-2]


def test_grouping_keeps_each_group_in_order_and_drops_repeats_when_asked():
    codes = np.array([2, 0, 2, 0, 2])
    values = np.array([9, 4, 1, 4, 1])
    plain = Grouped.of(codes, values, 4)
    assert plain[0] == [4, 4] and plain[2] == [9, 1, 1]
    assert 1 not in plain and 3 not in plain and plain.get(1, []) == []
    assert sorted(plain) == [0, 2] and len(plain) == 2
    distinct = Grouped.of(codes, values, 4, distinct=True)
    assert distinct[0] == [4] and distinct[2] == [1, 9]
    named = distinct.labelled(["zero", "one", "two", "three"])
    assert dict(named) == {"zero": [4], "two": [1, 9]}
    assert "one" not in named and named.get("four") is None
    with pytest.raises(KeyError):
        plain[-1]
    with pytest.raises(ValueError, match="2 labels for 4 groups"):
        plain.labelled(["a", "b"])
