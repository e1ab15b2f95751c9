"""A refresh's knowledge rows are put in place among the parent's sorted rows
(store.knowledge_layers.merged) instead of sorting every row again, and looked up
in them (transforms.knowledge_parent) instead of reading every row into Python."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from store.knowledge_layers import merged as _merged
from store.knowledge_rows import KnowledgeRows
from transforms.knowledge_parent import LiveIds, Names

SCHEMA = pa.schema([("id", pa.string()), ("n", pa.int64())])


def _table(ids: list[str]) -> pa.Table:
    return pa.table({"id": ids, "n": [int(i) for i in ids]}, schema=SCHEMA)


@pytest.mark.parametrize("kept, added", [(0, 3), (1, 2), (5, 0), (50, 7), (2, 40), (300, 1)])
def test_added_rows_land_in_key_order_with_their_columns(kept, added):
    rng = random.Random(kept * 100 + added)
    ids = sorted(f"{x:05d}" for x in rng.sample(range(100_000), kept + added))
    chosen = set(rng.sample(range(len(ids)), added))
    old = _table([k for i, k in enumerate(ids) if i not in chosen])
    new = _table([k for i, k in enumerate(ids) if i in chosen][::-1])  # any order
    merged = _merged(old, new, "id")
    assert merged.equals(_table(ids))
    # slices of the kept rows around each added one, not a copy of every row
    assert merged["id"].num_chunks <= 2 * added + 1


def test_unsorted_kept_rows_are_sorted_with_the_added():
    merged = _merged(_table(["00009", "00002"]), _table(["00005"]), "id")
    assert merged["id"].to_pylist() == ["00002", "00005", "00009"]
    assert merged["n"].to_pylist() == [2, 5, 9]


def test_names_and_live_ids_are_looked_up_as_asked(tmp_path):
    """The update's entity names (the parent's live ones, the update's own first, its
    removed ones gone) and the parent's live ids, looked up one by one or prefetched."""
    rng = random.Random(5)
    ids = sorted(f"e{x:05d}" for x in rng.sample(range(100_000), 200))
    parent = pa.table({"entity_id": ids, "name": [f"name {i}" for i in ids]})
    pq.write_table(parent, tmp_path / "entities.parquet")
    rows = KnowledgeRows(str(tmp_path), "entities.parquet")
    added = pa.table({"entity_id": [ids[3], "e-new"], "name": ["renamed", "new one"]})
    names = Names(rows, added, removed={ids[7]})
    assert names[ids[0]] == f"name {ids[0]}" and names[ids[3]] == "renamed"
    assert names["e-new"] == "new one"
    for missing in (ids[7], "e-absent"):
        with pytest.raises(KeyError):
            names[missing]
    names.prefetch(set(ids[10:20]))
    assert [names[i] for i in ids[10:20]] == [f"name {i}" for i in ids[10:20]]
    assert len(names) == 200 and ids[7] not in set(names) and "e-new" in set(names)
    live = LiveIds(rows)
    assert ids[7] in live and "e-new" not in live and len(live) == 200
