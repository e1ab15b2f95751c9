"""Rows of a table found by the value of one column without a pass over every row: a
window updates a few hundred rows of knowledge tables with millions.

An index (:class:`RowIndex`) groups a column's row numbers by value, built in one
vectorized pass (a dictionary encoding and a stable sort of its codes). Built for a
file (:func:`file_index`), it is held by :mod:`store.table_cache` under the file's
identity, so a process that keeps tables (a stream) builds it once per file, whichever
hard link of it a later generation reads, and looks values up from then on.

Example:
    >>> index = RowIndex.of(mentions["doc_id"])
    >>> index.rows(["doc-1", "doc-7"])  # ascending row numbers
    array([   4,    5, 1031])
"""

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import table_cache

__all__ = ["RowIndex", "file_index", "file_rows", "matching_rows", "squashed_column"]


class RowIndex:
    """Row numbers of one column grouped by value; a list column's row is found by each
    of its items. Nulls are found by no value."""

    def __init__(
        self, codes: dict[Any, int], rows: np.ndarray, starts: np.ndarray, *, lists: bool
    ) -> None:
        self._codes = codes
        self._rows = rows
        self._starts = starts
        self._lists = lists  # a list column's: a row may hold one value twice

    @classmethod
    def of(cls, column: pa.Array | pa.ChunkedArray) -> "RowIndex":
        """The index of ``column`` (row ``i`` is the column's ``i``-th value)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        owners = None
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            owners = pc.list_parent_indices(column).to_numpy()
            column = pc.list_flatten(column)
        encoded = pc.dictionary_encode(column)
        codes = pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64)
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes + 1, minlength=len(encoded.dictionary) + 1)
        starts = np.cumsum(counts)  # code c's rows: order[starts[c] : starts[c + 1]]
        rows = (order if owners is None else owners[order]).astype(np.int64)
        values = encoded.dictionary.to_pylist()
        codes_of = dict(zip(values, range(len(values)), strict=True))
        return cls(codes_of, rows, starts, lists=owners is not None)

    def rows(self, values: Iterable[Any]) -> np.ndarray:
        """Ascending distinct row numbers holding any of ``values`` (unknown ones find
        nothing)."""
        parts = []
        for value in values:
            code = self._codes.get(value)
            if code is not None:
                parts.append(self._rows[self._starts[code] : self._starts[code + 1]])
        if not parts:
            return np.zeros(0, dtype=np.int64)
        if len(parts) == 1 and not self._lists:  # one value's rows: ascending, distinct
            return parts[0]
        return np.unique(np.concatenate(parts)).astype(np.int64)

    def values(self) -> set[Any]:
        """Every value the column holds."""
        return set(self._codes)

    @property
    def nbytes(self) -> int:
        """Rough bytes held (the row arrays and ~100 bytes a distinct value)."""
        return int(self._rows.nbytes + self._starts.nbytes + 100 * len(self._codes))


def squashed_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value without its spaces (``algorithms.normalize.squashed``, column-wise)."""
    return pc.replace_substring(column, " ", "")


def file_index(
    path: str,
    table: pa.Table,
    column: str,
    key: Callable[[pa.ChunkedArray], pa.ChunkedArray] | None = None,
) -> RowIndex:
    """The index of ``column`` of ``table`` (read from the file at ``path``), or of
    ``key(column)``: built once while :mod:`store.table_cache` keeps what this process
    read, under the file's identity (any hard link of it finds it).

    Raises:
        ValueError: ``key`` is not a module-level function (its name tells the indexes
            of one column apart).
    """

    name = "" if key is None else f"{key.__module__}.{key.__qualname__}"
    if "<lambda>" in name or "<locals>" in name:
        raise ValueError(f"an index key must be a module-level function, got {name}")

    def build() -> RowIndex:
        values = table[column] if key is None else key(table[column])
        return RowIndex.of(values)

    tag = f"row-index:{column}:{name}"
    return table_cache.remember(path, tag, build, 16 * table.num_rows)


def matching_rows(column: pa.Array | pa.ChunkedArray, values: list[Any]) -> np.ndarray:
    """Ascending row numbers of ``column`` holding one of ``values`` (a list column: any
    of its items), by one pass over it."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        value_set = pa.array(values, type=column.type.value_type)
        hit = pc.is_in(pc.list_flatten(column), value_set=value_set).to_numpy(False)
        return np.unique(pc.list_parent_indices(column).to_numpy()[hit]).astype(np.int64)
    hit = pc.is_in(column, value_set=pa.array(values, type=column.type))
    return np.flatnonzero(hit.to_numpy(zero_copy_only=False)).astype(np.int64)


def file_rows(
    path: str,
    table: pa.Table,
    column: str,
    values: list[Any],
    key: Callable[[pa.ChunkedArray], pa.ChunkedArray] | None = None,
) -> np.ndarray:
    """Ascending row numbers of ``table`` (read from ``path``) whose ``column`` (or
    ``key(column)``) holds one of ``values``: through the file's index where this
    process keeps what it reads (:func:`file_index`), by one pass over the column where
    it does not (an index built for one lookup would cost more than the pass)."""
    if table_cache.enabled():
        return file_index(path, table, column, key).rows(values)
    return matching_rows(table[column] if key is None else key(table[column]), values)
