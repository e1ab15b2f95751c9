"""A generation's knowledge table looked up as a window's update reads it
(store.knowledge_rows): the rows holding some values or ids of a whole or layered table,
with or without indexes, are those of the table readers see."""

import os
import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from schemas import stable_id
from store import knowledge_layers as layers
from store import table_cache
from store.knowledge_rows import KnowledgeRows

NAME = "mentions.parquet"
SCHEMA = pa.schema(
    [("mention_id", pa.string()), ("doc_id", pa.string()), ("docs", pa.list_(pa.string()))]
)


def _rows(rng: random.Random, n: int, tag: str) -> dict[str, tuple[str, list[str]]]:
    return {
        stable_id(tag, i): (f"d{rng.randint(0, 9)}", [f"d{rng.randint(0, 9)}"] * rng.randint(0, 2))
        for i in range(n)
    }


def _table(rows: dict[str, tuple[str, list[str]]]) -> pa.Table:
    ids = sorted(rows)
    return pa.table(
        {"mention_id": ids, "doc_id": [rows[i][0] for i in ids], "docs": [rows[i][1] for i in ids]},
        schema=SCHEMA,
    )


def _layered(tmp_path, seed: int) -> str:
    """A generation whose table is a base (an older one's, hard-linked) and a delta:
    rows added, rewritten and removed since it."""
    rng = random.Random(seed)
    rows = _rows(rng, 60, "base")
    parent = tmp_path / "parent"
    parent.mkdir()
    pq.write_table(_table(rows), parent / NAME)
    removed = rng.sample(sorted(rows), 8)
    rewritten = {i: ("d-moved", ["d-moved"]) for i in rng.sample(sorted(rows), 6)}
    upserts = _table({**rewritten, **_rows(rng, 7, "added")})
    child = str(tmp_path / "child")
    os.makedirs(child)
    layers.write_change(
        child,
        NAME,
        str(parent),
        upserts=upserts,
        removed=[r for r in removed if r not in rewritten],
        whole=lambda: pytest.fail("the change is within the share: written as a delta"),
        write=lambda table, path: pq.write_table(table, path),
        fold_share=1.0,
    )
    assert layers.is_layered(child, NAME)
    return child


def _expected(folded: pa.Table, column: str, values: set[str]) -> list[dict]:
    data = folded[column]
    if pa.types.is_list(data.type):
        hit = [bool(set(v or ()) & values) for v in data.to_pylist()]
    else:
        hit = [v in values for v in data.to_pylist()]
    return folded.filter(pa.array(hit)).to_pylist()


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lookups_find_the_rows_of_the_table_readers_see(tmp_path, seed, cached):
    path = _layered(tmp_path, seed)
    if cached:
        table_cache.enable(1 << 24)
    try:
        rows = KnowledgeRows(path, NAME)
        folded = layers.read_table(path, NAME)
        assert rows.count() == folded.num_rows
        for values in ({"d1"}, {"d-moved", "d3"}, {"nowhere"}, set()):
            assert rows.where("doc_id", values).to_pylist() == _expected(folded, "doc_id", values)
            assert rows.where("docs", values).to_pylist() == _expected(folded, "docs", values)
        upper = rows.where("doc_id", {"D2"}, key=_upper)
        assert upper.to_pylist() == _expected(folded, "doc_id", {"d2"})
        some = random.Random(seed).sample(folded["mention_id"].to_pylist(), 5)
        wanted = [*some, stable_id("base", 10_000)]
        assert rows.with_ids(wanted).to_pylist() == _expected(folded, "mention_id", set(some))
        assert rows.values("doc_id") >= set(folded["doc_id"].to_pylist())
    finally:
        table_cache.disable()


def _upper(column):
    return pc.utf8_upper(column)


def test_a_whole_table_is_its_own_base(tmp_path):
    rows = _rows(random.Random(5), 20, "whole")
    pq.write_table(_table(rows), tmp_path / NAME)
    found = KnowledgeRows(str(tmp_path), NAME)
    assert found.count() == 20 and found.delta.num_rows == 0
    assert found.where("doc_id", {"d4"}).to_pylist() == _expected(_table(rows), "doc_id", {"d4"})
