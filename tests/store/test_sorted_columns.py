import bisect

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from store.sorted_columns import Fenced, Scalars, fence, finder, increasing


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


@given(
    st.sets(st.text(alphabet="abcde", max_size=4), max_size=60),
    st.lists(st.text(alphabet="abcdef", max_size=5), max_size=20),
    st.integers(1, 8),
)
def test_a_fenced_column_finds_what_a_bisection_of_the_whole_finds(values, wanted, every):
    column = pa.array(sorted(values), pa.string())
    fenced = Fenced(column, fence(column, every), every)
    for value in [*sorted(values), *wanted]:
        expected = sorted(values).index(value) if value in values else -1
        assert fenced.find(value) == Scalars(column).find(value) == expected
    if values:
        assert finder(column)(column[0].as_py()) == 0
    assert finder(fenced) == fenced.find
