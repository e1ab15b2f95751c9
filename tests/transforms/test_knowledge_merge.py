"""A refresh's knowledge rows are put in place among the parent's sorted rows
(store.knowledge_layers.merged) instead of sorting every row again, and looked up
in them by bisection (_Lookup) instead of reading every row into Python."""

import random

import pyarrow as pa
import pytest

from store.knowledge_layers import merged as _merged
from transforms.knowledge_update import _Lookup

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


@pytest.mark.parametrize("shuffled", [False, True])
def test_lookups_find_what_a_dict_finds(shuffled):
    rng = random.Random(5)
    ids = sorted(f"{x:05d}" for x in rng.sample(range(100_000), 200))
    if shuffled:
        rng.shuffle(ids)  # not sorted: a plain dict, same answers
    table = _table(ids)
    lookup = _Lookup.of(table, "id", "n")
    assert isinstance(lookup, _Lookup) != shuffled
    assert all(lookup[i] == int(i) for i in ids) and len(lookup) == 200
    absent = [f"{x:05d}" for x in range(0, 100_000, 997) if f"{x:05d}" not in set(ids)]
    assert absent and not any(i in lookup for i in absent)
    keys = lookup.keys()  # the set link_mentions is given as the known entity ids
    assert all(i in keys for i in ids[:20]) and "x" not in keys
    with pytest.raises(KeyError):
        lookup[absent[0]]
    if not shuffled:
        assert lookup.whole() == {i: int(i) for i in ids} == dict(lookup)
