"""Knowledge tables as a base and a delta (store.knowledge_layers): what a window writes,
and what readers see, equal the table written whole."""

import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from store import knowledge_layers as layers
from store import table_cache

NAME = "entities.parquet"
SCHEMA = pa.schema([("entity_id", pa.string()), ("name", pa.string()), ("count", pa.int64())])


def _table(rows: dict[str, tuple[str, int]]) -> pa.Table:
    ids = sorted(rows)
    return pa.table(
        {
            "entity_id": ids,
            "name": [rows[i][0] for i in ids],
            "count": [rows[i][1] for i in ids],
        },
        schema=SCHEMA,
    )


def _write(table: pa.Table, path: str) -> None:
    pq.write_table(table, path)


def _generation(root, name: str, rows: dict[str, tuple[str, int]]) -> str:
    path = os.path.join(root, name)
    os.makedirs(path)
    _write(_table(rows), os.path.join(path, NAME))
    return path


def _change(rows, rng: random.Random, *, size: int) -> tuple[dict, list[str]]:
    """Some rows rewritten, some added, some removed: (upserts, removed ids)."""
    ids = sorted(rows)
    removed = rng.sample(ids, min(size, len(ids)))
    rewritten = rng.sample(ids, min(size, len(ids)))
    upserts = {i: (f"renamed {i}", rng.randint(0, 9)) for i in rewritten if i not in removed}
    upserts |= {f"e{rng.randint(0, 10**9):012d}": ("new", 1) for _ in range(size)}
    return upserts, removed


def _apply(rows, upserts, removed) -> dict:
    out = {k: v for k, v in rows.items() if k not in removed}
    out.update(upserts)
    return out


def _window(parent: str, staging: str, upserts, removed, expected, fold_share=0.5) -> str:
    os.makedirs(staging)
    return layers.write_change(
        staging,
        NAME,
        parent,
        upserts=_table(upserts),
        removed=removed,
        whole=lambda: _table(expected),
        write=_write,
        fold_share=fold_share,
    )


def test_windows_write_the_change_and_readers_see_the_whole_table(tmp_path):
    rng = random.Random(53)
    rows = {f"e{i:012d}": (f"name {i}", i % 7) for i in range(0, 4000, 3)}
    parent = _generation(tmp_path, "g0", rows)
    for n in range(1, 6):
        upserts, removed = _change(rows, rng, size=5)
        rows = _apply(rows, upserts, removed)
        staging = str(tmp_path / f"g{n}")
        assert _window(parent, staging, upserts, removed, rows) == "layered"
        assert layers.is_layered(staging, NAME) and layers.has_table(staging, NAME)
        assert not os.path.exists(os.path.join(staging, NAME))
        # The base is the first generation's file itself, linked, never rewritten.
        assert os.path.samefile(
            os.path.join(staging, "entities.base.parquet"), os.path.join(tmp_path, "g0", NAME)
        )
        # The delta holds the change since the base, not the table.
        delta = pq.read_table(os.path.join(staging, "entities.delta.parquet"))
        assert 0 < delta.num_rows <= 10 * n
        assert layers.read_table(staging, NAME).to_pylist() == _table(rows).to_pylist()
        assert layers.read_table(staging, NAME, ["name"]).column_names == ["name"]
        parent = staging


def test_a_delta_past_the_fold_share_is_written_whole(tmp_path):
    rows = {f"e{i:04d}": (f"name {i}", i) for i in range(100)}
    parent = _generation(tmp_path, "g0", rows)
    upserts = {f"n{i:04d}": ("new", 0) for i in range(20)}
    rows = _apply(rows, upserts, [])
    staging = str(tmp_path / "g1")
    assert _window(parent, staging, upserts, [], rows, fold_share=0.1) == "whole"
    assert not layers.is_layered(staging, NAME)
    assert pq.read_table(os.path.join(staging, NAME)).to_pylist() == _table(rows).to_pylist()
    assert not os.path.exists(os.path.join(staging, "entities.delta.parquet"))


def test_a_parent_written_with_other_columns_is_written_whole(tmp_path):
    rows = {f"e{i:04d}": (f"name {i}", i) for i in range(100)}
    parent = tmp_path / "g0"
    parent.mkdir()
    old = _table(rows).drop_columns(["count"])
    _write(old, str(parent / NAME))
    staging = str(tmp_path / "g1")
    assert _window(str(parent), staging, {"e0001": ("x", 1)}, [], rows) == "whole"


@pytest.mark.parametrize("layered_parent", [False, True])
def test_a_window_that_changes_nothing_links_its_parents_files(tmp_path, layered_parent):
    rows = {f"e{i:04d}": (f"name {i}", i) for i in range(100)}
    parent = _generation(tmp_path, "g0", rows)
    if layered_parent:
        rows = _apply(rows, {"e0001": ("x", 1)}, [])
        _window(parent, str(tmp_path / "g1"), {"e0001": ("x", 1)}, [], rows)
        parent = str(tmp_path / "g1")
    staging = str(tmp_path / "same")
    _window(parent, staging, {}, [], rows)
    files = sorted(os.listdir(staging))
    assert files == sorted(os.listdir(parent))
    assert all(os.path.samefile(os.path.join(parent, f), os.path.join(staging, f)) for f in files)
    assert layers.read_table(staging, NAME).to_pylist() == _table(rows).to_pylist()


def test_a_missing_table_is_an_error(tmp_path):
    assert not layers.has_table(str(tmp_path), NAME)
    with pytest.raises(FileNotFoundError):
        layers.read_table(str(tmp_path), NAME)


@pytest.mark.parametrize("changes", [0, 3, layers.BISECT_LIMIT + 10])
def test_fold_matches_applying_the_change(changes):
    rng = random.Random(changes)
    rows = {f"e{i:06d}": (f"n{i}", i) for i in range(0, 3 * (changes + 50), 2)}
    upserts, removed = _change(rows, rng, size=changes)
    folded = layers.fold(
        _table(rows), _table(upserts), pa.array(sorted(removed), pa.string()), "entity_id"
    )
    assert folded.to_pylist() == _table(_apply(rows, upserts, removed)).to_pylist()


def test_a_reader_that_holds_the_base_reads_only_the_delta(tmp_path):
    rows = {f"e{i:05d}": (f"name {i}", i) for i in range(2000)}
    parent = _generation(tmp_path, "g0", rows)
    table_cache.disable()
    table_cache.enable(64 << 20)
    try:
        layers.read_table(parent, NAME)
        for n in (1, 2):
            upserts = {f"e{n:05d}": ("edited", n)}
            rows = _apply(rows, upserts, [])
            staging = str(tmp_path / f"g{n}")
            _window(parent, staging, upserts, [], rows)
            before = table_cache.stats()
            assert layers.read_table(staging, NAME).to_pylist() == _table(rows).to_pylist()
            after = table_cache.stats()
            # base found by its link (a hit); delta and removed ids read (two misses)
            assert after["hits"] - before["hits"] >= 1
            assert after["misses"] - before["misses"] <= 3
            parent = staging
    finally:
        table_cache.disable()


def test_changed_rows_finds_every_difference_and_nothing_else():
    schema = pa.schema([("id", pa.string()), ("n", pa.int64()), ("items", pa.list_(pa.string()))])
    old = pa.table(
        {
            "id": ["a", "b", "c", "d", "e"],
            "n": [1, 2, None, 4, 5],
            "items": [["x"], ["x", "y"], [], None, ["z"]],
        },
        schema=schema,
    )
    new = pa.table(
        {
            "id": ["a", "b", "c", "d", "f"],
            "n": [1, 2, None, 4, 6],
            "items": [["x"], ["x", "q"], [], ["w"], ["z"]],
        },
        schema=schema,
    )
    upserts, removed = layers.changed_rows(old, new, "id")
    assert upserts["id"].to_pylist() == ["b", "d", "f"]  # an item, a null list, a new row
    assert removed == ["e"]
    assert layers.changed_rows(old, old, "id")[0].num_rows == 0


ENTITIES = "entities.parquet"
LISTED = pa.schema([("entity_id", pa.string()), ("chunk_ids", pa.list_(pa.string()))])


def test_a_list_held_as_a_change_against_its_base_row_reads_whole(tmp_path):
    """An entity's chunks in a delta row are the chunks added since its base row and,
    in ``chunk_ids_removed``, those removed since it; readers see the whole list, as
    they see a row the delta holds whole."""
    base = pa.table(
        {
            "entity_id": ["e1", "e2", "e3"],
            "chunk_ids": [["c1", "c2", "c3"], ["c4"], ["c5", "c6"]],
        },
        schema=LISTED,
    )
    parent = tmp_path / "parent"
    parent.mkdir()
    pq.write_table(base, parent / ENTITIES)
    relative = pa.list_(pa.string())
    upserts = pa.table(
        {
            "entity_id": ["e1", "e3", "e9"],
            "chunk_ids": [["c0", "c7"], [], ["c8"]],
            "chunk_ids_removed": pa.array([["c2"], ["c5"], None], relative),
        }
    )
    child = str(tmp_path / "child")
    os.makedirs(child)
    written = layers.write_change(
        child,
        ENTITIES,
        str(parent),
        upserts=upserts,
        removed=[],
        whole=lambda: pytest.fail("within the share"),
        write=_write,
        fold_share=10.0,
    )
    assert written == "layered"
    assert layers.delta_columns(child, ENTITIES, ["chunk_ids"]) == [
        "chunk_ids",
        "chunk_ids_removed",
    ]
    assert layers.delta_columns(child, ENTITIES, ["entity_id"]) == ["entity_id"]
    expected = {
        "e1": ["c0", "c1", "c3", "c7"],
        "e2": ["c4"],
        "e3": ["c6"],
        "e9": ["c8"],
    }
    for columns in (None, ["chunk_ids"]):
        table = layers.read_table(child, ENTITIES, columns)
        assert table.column_names == (columns or ["entity_id", "chunk_ids"])
        assert dict(zip(sorted(expected), table["chunk_ids"].to_pylist(), strict=True)) == expected
    # the next window's change is folded with this one's, still against the base
    grandchild = str(tmp_path / "grandchild")
    os.makedirs(grandchild)
    again = pa.table(
        {
            "entity_id": ["e2"],
            "chunk_ids": [["c9"]],
            "chunk_ids_removed": pa.array([[]], relative),
        }
    )
    layers.write_change(
        grandchild,
        ENTITIES,
        child,
        upserts=again,
        removed=["e9"],
        whole=lambda: pytest.fail("within the share"),
        write=_write,
        fold_share=10.0,
    )
    table = layers.read_table(grandchild, ENTITIES)
    assert table.to_pylist() == [
        {"entity_id": "e1", "chunk_ids": ["c0", "c1", "c3", "c7"]},
        {"entity_id": "e2", "chunk_ids": ["c4", "c9"]},
        {"entity_id": "e3", "chunk_ids": ["c6"]},
    ]


def test_a_change_whose_base_row_is_gone_is_refused(tmp_path):
    base = pa.table({"entity_id": ["e1"], "chunk_ids": [["c1"]]}, schema=LISTED)
    delta = pa.table(
        {
            "entity_id": ["e2"],
            "chunk_ids": [["c2"]],
            "chunk_ids_removed": pa.array([[]], pa.list_(pa.string())),
        }
    )
    with pytest.raises(ValueError, match="base has no row"):
        layers.absolute(base, delta, "entity_id", "chunk_ids")
