"""What a table's rows changed since the parent generation, and whole-column checks
done with Arrow compute, so a refresh's knowledge tables are checked row by row only
where they could have broken.

A refresh copies almost every knowledge row from its parent, whose tables passed the
gate. A row equal, column for column, to the parent's row of the same id passed every
check that looks at the row alone; what can break it is the rest of the generation (a
chunk, entity or document it names that is gone or changed). So those references are
checked on every row here, vectorized, and the row checks run on what changed.
"""

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_MAX_RUNS = 2000
"""More stretches than this and :func:`changed_rows` compares taken rows instead."""


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


def changed_rows(table: pa.Table, parent: pa.Table, id_column: str) -> np.ndarray:
    """Per row of ``table``: it has no row of the same id in ``parent``, or that row
    differs in some column. Every row is changed when the two tables' columns differ.

    Both tables are usually in the same order (by id), so the matched rows fall in a
    few long stretches of consecutive parent rows: each stretch is compared column by
    column in one call, and row by row only where it differs.
    """
    if table.schema.names != parent.schema.names:
        return np.ones(table.num_rows, dtype=bool)
    found = pc.index_in(table[id_column], value_set=flat(parent[id_column]))
    index = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
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


def increasing(values: pa.Array) -> bool:
    """Whether every value is greater than the one before it (no nulls)."""
    if len(values) < 2:
        return values.null_count == 0
    if values.null_count:
        return False
    later = pc.greater(values.slice(1), values.slice(0, len(values) - 1))
    return bool(pc.all(later).as_py())


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
