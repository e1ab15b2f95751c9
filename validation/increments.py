"""What a table's rows changed since the parent generation, and whole-column checks
done with Arrow compute, so a refresh's knowledge tables are checked row by row only
where they could have broken.

A refresh copies almost every knowledge row from its parent, whose tables passed the
gate. A row equal, column for column, to the parent's row of the same id passed every
check that looks at the row alone; what can break it is the rest of the generation (a
chunk, entity or document it names that is gone or changed). So those references are
checked on every row here, vectorized, and the row checks run on what changed.
"""

import bisect
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.sorted_columns import Scalars, increasing

_MAX_RUNS = 2000
"""More stretches than this and :func:`changed_rows` compares taken rows instead."""
_MAX_GAPS = 256
"""More places than this where two sorted id columns part and :func:`parent_rows`
hashes them instead of walking them."""


def as_flags(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array (nulls as ``False``) as a numpy bool array."""
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def same_values(left: pa.Array | pa.ChunkedArray, right: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: ``left`` equals ``right`` (both null counts as equal; lists compare by
    length and item by item; NaN never equals, so such a row counts as changed)."""
    left, right = flat(left), flat(right)
    if pa.types.is_list(left.type) or pa.types.is_large_list(left.type):
        lengths = pc.fill_null(pc.list_value_length(left), -1).to_numpy()
        same = lengths == pc.fill_null(pc.list_value_length(right), -1).to_numpy()
        rows = np.flatnonzero(same & (lengths > 0))
        if len(rows):
            mine, theirs = left.take(rows), right.take(rows)
            equal = same_values(pc.list_flatten(mine), pc.list_flatten(theirs))
            owners = pc.list_parent_indices(mine).to_numpy()
            same[rows[np.unique(owners[~equal])]] = False
        return same
    both_null = as_flags(pc.and_(pc.is_null(left), pc.is_null(right)))
    return as_flags(pc.equal(left, right)) | both_null


def _runs(index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, parent starts, lengths)`` of the stretches of rows matched to
    consecutive parent rows (``index``: each row's parent row, -1 for none)."""
    matched = index >= 0
    follows = np.zeros(len(index), dtype=bool)
    follows[1:] = matched[1:] & matched[:-1] & (index[1:] == index[:-1] + 1)
    starts = np.flatnonzero(matched & ~follows)
    breaks = np.append(np.flatnonzero(~follows), len(index))
    ends = breaks[np.searchsorted(breaks, starts, side="right")]
    return starts, index[starts], ends - starts


def _changed_by_take(table: pa.Table, parent: pa.Table, index: np.ndarray) -> np.ndarray:
    changed = np.ones(table.num_rows, dtype=bool)
    matched = np.flatnonzero(index >= 0)
    mine, theirs = table.take(matched), parent.take(index[matched])
    same = np.ones(len(matched), dtype=bool)
    for name in table.column_names:
        same &= same_values(mine[name], theirs[name])
    changed[matched[same]] = False
    return changed


def _walked(ids: pa.Array, parent_ids: pa.Array) -> np.ndarray | None:
    """:func:`parent_rows` of two increasing id columns that part in at most
    ``_MAX_GAPS`` places (rows added or removed), else ``None``.

    Where both columns hold the same id, the stretch of ids they share from there is
    bisected for its end (with rows only added, or only removed, a row that matches
    says every row before it matches) and then compared whole; where they part, each
    skips by bisection to the other's next id. Nothing is hashed."""
    mine, theirs = Scalars(ids), Scalars(parent_ids)
    n, m = len(ids), len(parent_ids)
    index = np.full(n, -1, dtype=np.int64)
    i = j = gaps = 0
    while i < n and j < m:
        if gaps > _MAX_GAPS:
            return None
        gaps += 1
        a, b = mine[i], theirs[j]
        if a < b:  # rows the parent does not have
            i = bisect.bisect_left(mine, b, i)
            continue
        if a > b:  # parent rows this table does not have
            j = bisect.bisect_left(theirs, a, j)
            continue
        low, high = 1, min(n - i, m - j)
        while low < high:
            middle = (low + high + 1) // 2
            if mine[i + middle - 1] == theirs[j + middle - 1]:
                low = middle
            else:
                high = middle - 1
        if not ids.slice(i, low).equals(parent_ids.slice(j, low)):
            # Rows added and removed in between cancelled out: the stretch ends at the
            # first difference.
            low = int(np.argmin(as_flags(pc.equal(ids.slice(i, low), parent_ids.slice(j, low)))))
        index[i : i + low] = np.arange(j, j + low)
        i, j = i + low, j + low
    return index


def parent_rows(
    ids: pa.Array | pa.ChunkedArray, parent_ids: pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """Per id: the row of ``parent_ids`` that holds it, -1 for none.

    Knowledge tables are written sorted by id and a refresh changes a few rows, so the
    two columns are usually walked in order (:func:`_walked`); otherwise hashed."""
    ids, parent_ids = flat(ids), flat(parent_ids)
    if increasing(ids) and increasing(parent_ids):
        walked = _walked(ids, parent_ids)
        if walked is not None:
            return walked
    found = pc.index_in(ids, value_set=parent_ids)
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def compared(table: pa.Table, parent: pa.Table, id_column: str) -> tuple[np.ndarray, bool]:
    """:func:`changed_rows`, and whether every id of ``parent`` is still in ``table``."""
    index = parent_rows(table[id_column], parent[id_column])
    kept = np.zeros(parent.num_rows, dtype=bool)
    kept[index[index >= 0]] = True
    return _changed(table, parent, index), bool(kept.all())


def changed_rows(table: pa.Table, parent: pa.Table, id_column: str) -> np.ndarray:
    """Per row of ``table``: it has no row of the same id in ``parent``, or that row
    differs in some column. Every row is changed when the two tables' columns differ."""
    return _changed(table, parent, parent_rows(table[id_column], parent[id_column]))


def _changed(table: pa.Table, parent: pa.Table, index: np.ndarray) -> np.ndarray:
    """:func:`changed_rows`, given each row's parent row (``index``).

    Both tables are usually in the same order (by id), so the matched rows fall in a
    few long stretches of consecutive parent rows: each stretch is compared column by
    column in one call, and row by row only where it differs.
    """
    if table.schema.names != parent.schema.names:
        return np.ones(table.num_rows, dtype=bool)
    starts, origins, lengths = _runs(index)
    if len(starts) > _MAX_RUNS:  # little order in common: compare row by row
        return _changed_by_take(table, parent, index)
    changed = np.ones(table.num_rows, dtype=bool)
    for start, origin, length in zip(
        starts.tolist(), origins.tolist(), lengths.tolist(), strict=True
    ):
        same = np.ones(length, dtype=bool)
        for name in table.column_names:
            mine = table[name].slice(start, length)
            theirs = parent[name].slice(origin, length)
            if not mine.equals(theirs):
                same &= same_values(mine, theirs)
        changed[start : start + length] = ~same
    return changed


def is_in(values: pa.Array | pa.ChunkedArray, known: pa.Array) -> np.ndarray:
    """Per row: the value is one of ``known`` (a null is not)."""
    return as_flags(pc.is_in(values, value_set=known))


def all_in(lists: pa.Array | pa.ChunkedArray, known: pa.Array) -> np.ndarray:
    """Per row: every item of the row's list is one of ``known`` (an empty list is)."""
    lists = flat(lists)
    ok = np.ones(len(lists), dtype=bool)
    missing = ~is_in(pc.list_flatten(lists), known)
    if missing.any():
        owners = pc.list_parent_indices(lists).to_numpy()
        ok[np.unique(owners[missing])] = False
    return ok


def duplicated(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: its id occurs more than once in the column."""
    ids = flat(ids)
    if increasing(ids):  # tables are written sorted by id: one pass, no hash table
        return np.zeros(len(ids), dtype=bool)
    counts = pc.value_counts(ids)
    repeated = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if not len(repeated):
        return np.zeros(len(ids), dtype=bool)
    return is_in(ids, repeated)


@dataclass(frozen=True)
class Baseline:
    """The parent generation, validated, that a refresh's tables are compared with."""

    bundle_id: str
    path: str
    """The parent bundle's directory (its knowledge tables)."""
    same_documents: pa.Array
    """Ids of the documents live in both generations with the same revision: a row
    kept from the parent that quotes one of them quotes the text the parent checked."""
    documents_kept: bool = False
    """Every document live in the parent is live here with the same revision."""
    chunk_ids: pa.Array | None = None
    """The parent's live chunk ids."""


def contains_all(known: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether every one of ``values`` is one of ``known`` (nothing was taken away)."""
    return bool(is_in(values, flat(known)).all())
