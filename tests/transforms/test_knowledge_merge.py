"""A refresh's knowledge rows are put in place among the parent's sorted rows
(transforms.knowledge_update._merged) instead of sorting every row again."""

import random

import pyarrow as pa
import pytest

from transforms.knowledge_update import _merged

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
    assert merged["id"].num_chunks <= 1


def test_unsorted_kept_rows_are_sorted_with_the_added():
    merged = _merged(_table(["00009", "00002"]), _table(["00005"]), "id")
    assert merged["id"].to_pylist() == ["00002", "00005", "00009"]
    assert merged["n"].to_pylist() == [2, 5, 9]
