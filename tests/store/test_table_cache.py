"""Tables of immutable bundle files kept in memory (store.table_cache)."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from store import table_cache


@pytest.fixture
def cache():
    table_cache.disable()
    table_cache.enable(1 << 20)
    yield table_cache
    table_cache.disable()


def _write(path, rows: int, tag: str = "a") -> str:
    table = pa.table({"id": [f"{tag}{i}" for i in range(rows)], "n": list(range(rows))})
    pq.write_table(table, path)
    return str(path)


def _reader(path, columns, calls):
    def load():
        calls.append(columns)
        return pq.read_table(path, columns=columns)

    return load


def test_off_by_default_every_read_goes_to_disk(tmp_path):
    table_cache.disable()
    path, calls = _write(tmp_path / "t.parquet", 3), []
    for _ in range(2):
        table_cache.read(path, None, _reader(path, None, calls))
    assert len(calls) == 2 and table_cache.stats()["entries"] == 0


def test_disabling_drops_empty_tables_too(cache, tmp_path):
    path = _write(tmp_path / "empty.parquet", 0)
    cache.read(path, None, _reader(path, None, []))
    assert cache.stats()["entries"] == 1
    cache.disable()
    assert cache.stats()["entries"] == 0 and cache.stats()["bytes"] == 0


def test_a_second_read_of_the_same_file_comes_from_memory(cache, tmp_path):
    path, calls = _write(tmp_path / "t.parquet", 3), []
    first = cache.read(path, None, _reader(path, None, calls))
    again = cache.read(path, None, _reader(path, None, calls))
    some = cache.read(path, ["n"], _reader(path, ["n"], calls))
    assert again is first and calls == [None]
    assert some.column_names == ["n"] and some["n"].to_pylist() == [0, 1, 2]
    assert cache.stats()["hits"] == 2 and cache.stats()["misses"] == 1


def test_a_rewritten_file_is_read_again(cache, tmp_path):
    path, calls = _write(tmp_path / "t.parquet", 3), []
    cache.read(path, None, _reader(path, None, calls))
    _write(tmp_path / "t.parquet", 4, tag="b")
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # even within one tick
    table = cache.read(path, None, _reader(path, None, calls))
    assert len(calls) == 2 and table["id"].to_pylist()[0] == "b0"


def test_the_least_recently_used_goes_first_past_the_bound(cache, tmp_path):
    paths = [_write(tmp_path / f"t{i}.parquet", 2000, tag=str(i)) for i in range(3)]
    size = pq.read_table(paths[0]).nbytes
    cache.enable(int(size * 2.5))
    calls: list = []
    for path in paths[:2]:
        cache.read(path, None, _reader(path, None, calls))
    cache.read(paths[0], None, _reader(paths[0], None, calls))  # t0 used last
    cache.read(paths[2], None, _reader(paths[2], None, calls))  # evicts t1
    assert cache.stats()["bytes"] <= size * 2.5 and len(calls) == 3
    cache.read(paths[0], None, _reader(paths[0], None, calls))
    assert len(calls) == 3
    cache.read(paths[1], None, _reader(paths[1], None, calls))
    assert len(calls) == 4


def test_remembered_values_and_remote_paths(cache, tmp_path):
    path = _write(tmp_path / "t.parquet", 3)
    made: list[int] = []

    def make():
        made.append(1)
        return ["state"]

    assert cache.remember(path, "states", make, size=10) == ["state"]
    assert cache.remember(path, "states", make, size=10) == ["state"] and len(made) == 1
    assert cache.remember(path, "other", make, size=10) and len(made) == 2
    assert cache.remember("gs://bucket/t.parquet", "states", make, size=10) and len(made) == 3
    assert cache.remember("gs://bucket/t.parquet", "states", make, size=10) and len(made) == 4
    with pytest.raises(ValueError, match="positive"):
        cache.enable(0)


def test_a_table_just_written_is_read_from_memory_also_after_its_folder_moves(cache, tmp_path):
    staging, published = tmp_path / "staging", tmp_path / "bundles" / "b2"
    staging.mkdir()
    table = pa.table({"id": ["x", "y"], "n": [1, 2]})
    path = str(staging / "t.parquet")
    pq.write_table(table, path)
    cache.written(path, table)
    calls: list = []
    assert cache.read(path, None, _reader(path, None, calls)) is table and calls == []

    published.parent.mkdir()
    os.rename(staging, published)
    cache.moved(str(staging), str(published))
    moved = str(published / "t.parquet")
    assert cache.read(moved, ["n"], _reader(moved, ["n"], calls)).equals(table.select(["n"]))
    assert calls == []  # served from the table written before the move
    assert cache.stats()["entries"] == 1  # one table, now under its new path
    assert pq.read_table(moved).equals(table)


def test_a_table_whose_schema_is_not_the_files_is_not_kept(cache, tmp_path):
    path = _write(tmp_path / "t.parquet", 2)
    other = pa.table({"id": ["a0", "a1"], "n": pa.array([0, 1], type=pa.int32())})
    cache.written(path, other)
    calls: list = []
    assert cache.read(path, None, _reader(path, None, calls)).schema != other.schema
    assert calls == [None]


def test_a_file_is_hashed_once_under_any_of_its_links(cache, tmp_path):
    from store.bundles import _sha256, sha256_file

    path, hashed = _write(tmp_path / "t.parquet", 3), []

    def compute(p):
        hashed.append(p)
        return _sha256(p)

    first = cache.digest(path, compute)
    link = str(tmp_path / "next-generation.parquet")
    os.link(path, link)  # a table kept unchanged by the next generation
    assert cache.digest(link, compute) == first == sha256_file(link)
    assert hashed == [path]
    _write(tmp_path / "t.parquet", 4, tag="b")  # a new file under the old name
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    changed = cache.digest(path, compute)
    assert changed != first and changed == _sha256(path) and hashed == [path, path]


def test_without_the_cache_every_hash_reads_the_file(tmp_path):
    table_cache.disable()
    path, hashed = _write(tmp_path / "t.parquet", 3), []
    for _ in range(2):
        table_cache.digest(path, lambda p: hashed.append(p) or "x")
    assert hashed == [path, path]


def test_a_hard_link_of_a_file_read_before_is_read_from_memory(cache, tmp_path):
    path, calls = _write(tmp_path / "parent.parquet", 3), []
    first = cache.read(path, None, _reader(path, None, calls))
    link = str(tmp_path / "child.parquet")
    os.link(path, link)  # the next generation keeps the table unchanged
    copy = str(tmp_path / "copy.parquet")
    _write(copy, 3)  # the same rows in another file
    assert cache.read(link, ["n"], _reader(link, ["n"], calls))["n"].to_pylist() == [0, 1, 2]
    assert cache.read(link, None, _reader(link, None, calls)) is first
    assert calls == [None]  # the parent's one read
    cache.retain(lambda file: file == os.path.realpath(link))  # the parent's entry goes
    assert cache.read(link, None, _reader(link, None, calls)) is first and calls == [None]
    cache.read(copy, None, _reader(copy, None, calls))
    assert calls == [None, None]
    assert cache.stats()["hits"] == 3 and cache.stats()["misses"] == 2
