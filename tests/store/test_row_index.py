"""Rows found by a column's value (store.row_index) and ids found in one vectorized pass
(store.sorted_columns.SortedIds), each against a plain scan."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import stable_id
from store import table_cache
from store.row_index import RowIndex, file_index
from store.sorted_columns import Fenced, SortedIds, fence

VALUES = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"]))


def _scan(column: list, wanted: set) -> list[int]:
    def holds(value) -> bool:
        return bool(set(value or ()) & wanted) if isinstance(value, list) else value in wanted

    return [row for row, value in enumerate(column) if holds(value)]


@settings(deadline=None)  # a first example on a loaded machine outran the 200 ms default
@given(st.lists(VALUES, max_size=40), st.sets(st.sampled_from(["a", "b", "c", "x"])))
def test_an_index_finds_the_rows_a_scan_finds(column, wanted):
    index = RowIndex.of(pa.chunked_array([pa.array(column, pa.string())]))
    assert index.rows(wanted).tolist() == _scan(column, wanted)
    assert index.values() == {v for v in column if v is not None}


@given(st.lists(st.one_of(st.none(), st.lists(VALUES, max_size=4)), max_size=30), st.sets(VALUES))
def test_a_list_columns_rows_are_found_by_each_item_once(column, wanted):
    wanted.discard(None)
    index = RowIndex.of(pa.array(column, pa.list_(pa.string())))
    assert index.rows(wanted).tolist() == _scan(column, wanted)


def _upper(column):
    return pc.utf8_upper(column)


def test_a_files_index_is_built_once_and_found_under_a_hard_link(tmp_path):
    table = pa.table({"doc_id": ["d1", "d2", "d1"]})
    path, link = str(tmp_path / "t.parquet"), str(tmp_path / "link.parquet")
    pq.write_table(table, path)
    os.link(path, link)
    table_cache.enable(1 << 20)
    try:
        first = file_index(path, table, "doc_id")
        misses = table_cache.stats()["misses"]
        assert file_index(link, table, "doc_id") is first  # the same file: not built again
        assert table_cache.stats()["misses"] == misses
        upper = file_index(path, table, "doc_id", key=_upper)
        assert upper is not first and upper.rows(["D1"]).tolist() == [0, 2]
        with pytest.raises(ValueError, match="module-level"):
            file_index(path, table, "doc_id", key=lambda c: c)
    finally:
        table_cache.disable()
    assert file_index(path, table, "doc_id") is not first  # kept only while the cache is on


def _ids(n: int) -> list[str]:
    return sorted(stable_id("m", i) for i in range(n))


def test_sorted_ids_find_what_bisection_finds():
    ids = _ids(500)
    column = pa.array(ids)
    search = SortedIds.of(column)
    assert search is not None
    rng = np.random.default_rng(0)
    wanted = [ids[i] for i in rng.choice(500, 40, replace=False)] + ["f" * 64, ids[0][:-1] + "x"]
    assert search.rows(wanted).tolist() == sorted(ids.index(w) for w in wanted[:40])
    # a slice of a column (an offset into its buffers) is searched as itself
    part = SortedIds.of(column.slice(100, 50))
    assert part is not None and part.rows(ids[100:103]).tolist() == [0, 1, 2]
    assert search.rows([]).tolist() == []


def test_sorted_ids_place_each_id_wanted_in_its_order():
    # ids that share their first 8 or 16 bytes are told apart by the rest
    ids = sorted({*_ids(300), "abcdefgh" + "1" * 56, "abcdefgh" + "2" * 56, "a" * 16 + "z" * 48})
    ids = sorted({*ids, "a" * 16 + "y" * 48})
    column = pa.array(ids)
    search = SortedIds.of(column)
    assert search is not None
    wanted = [*ids[::7], "abcdefgh" + "2" * 56, "a" * 16 + "y" * 48, "f" * 64, "abc", ids[3]]
    expected = [ids.index(w) if w in ids else -1 for w in wanted]
    assert search.positions(wanted).tolist() == expected
    one_width = [w for w in wanted if len(w) == 64]
    assert search.positions(pa.array(one_width)).tolist() == [
        ids.index(w) if w in ids else -1 for w in one_width
    ]
    assert search.positions([]).tolist() == []
    fenced = Fenced(column, fence(column, 16), 16)
    assert fenced.find_many(wanted).tolist() == expected
    short = Fenced(pa.array(["a", "b", "d"]), fence(pa.array(["a", "b", "d"]), 2), 2)
    assert short.find_many(pa.array(["d", "c", "a"])).tolist() == [2, -1, 0]  # one by one


def test_ids_of_several_widths_or_with_nulls_are_not_searched_this_way():
    assert SortedIds.of(pa.array(["a" * 20, "b" * 21])) is None
    assert SortedIds.of(pa.array(["short", "other"])) is None  # under the prefix's width
    assert SortedIds.of(pa.array(["a" * 20, None])) is None
    assert SortedIds.of(pa.array([], pa.string())) is None
