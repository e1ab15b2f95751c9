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


def test_a_shared_position_map_may_name_more_labels_than_groups():
    position = {"a": 0, "b": 1, "c": 2}
    grouped = Grouped.of(np.array([0, 1]), np.array([7, 8]), 2).labelled(["a", "b"], position)
    assert dict(grouped) == {"a": [7], "b": [8]} and "c" not in grouped


def test_alias_norms_normalize_each_new_string_once_and_keep_codes_across_opens():
    from algorithms.normalize import normalize_surface
    from query.knowledge_layer import AliasNorms, alias_index

    norms = AliasNorms()
    first = pa.array(["The Danube", "danube", "Black Sea"])
    codes, labels, position = norms.codes(first)
    assert [labels[c] for c in codes] == [normalize_surface(s) for s in first.to_pylist()]
    assert codes[0] == codes[1] != codes[2]
    again, labels, _ = norms.codes(pa.array(["Black Sea", "Pelicans", "The Danube"]))
    assert again[0] == codes[2] and again[2] == codes[0] and len(labels) == 3
    assert labels[again[1]] == normalize_surface("Pelicans") and position[labels[2]] == 2
    index = alias_index(pa.array([["The Danube", "danube"], ["Black Sea"], ["Danube"]]), norms)
    assert index[normalize_surface("Danube")] == [0, 2] and index.get("pelican") is None
    norms.limit = 4  # past the limit it starts afresh, and what it returns stays right
    codes, labels, _ = norms.codes(pa.array(["Rhine", "Danube"]))
    assert [labels[c] for c in codes] == [normalize_surface("Rhine"), normalize_surface("Danube")]


def test_a_settled_pandas_probe_keeps_pandas_out_until_it_is_needed():
    """query.lean: after the probe, Arrow conversions import no pandas; to_pandas still
    works (pyarrow imports pandas when it is required, not only asked about)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from query.lean import settle_pandas_probe\n"
        "assert settle_pandas_probe()\n"
        "import pyarrow as pa, pyarrow.compute as pc\n"
        "values = pa.array(['b', 'a'])\n"
        "assert pc.is_in(values, value_set=pa.array(['a'])).to_pylist() == [False, True]\n"
        "assert 'pandas' not in sys.modules\n"
        "frame = pa.table({'x': values}).to_pandas()\n"
        "assert list(frame['x']) == ['b', 'a'] and 'pandas' in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
