import bisect

import pyarrow as pa

from store.sorted_columns import Scalars, increasing


def test_increasing_means_strictly_and_without_nulls():
    assert increasing(pa.array(["a", "b", "c"]))
    assert increasing(pa.array([], pa.string())) and increasing(pa.array(["a"]))
    assert not increasing(pa.array(["a", "a"]))
    assert not increasing(pa.array(["b", "a"]))
    assert not increasing(pa.array(["a", None, "c"]))
    assert not increasing(pa.array([None], pa.string()))


def test_a_column_bisects_as_its_list_does():
    values = [f"e{i:04d}" for i in range(0, 2000, 3)]
    column = Scalars(pa.array(values))
    assert len(column) == len(values) and column[5] == values[5]
    for probe in ["", "e0000", "e0001", "e0999", "e1998", "e1999", "z"]:
        assert bisect.bisect_left(column, probe) == bisect.bisect_left(values, probe)
