"""A generation's knowledge table read for lookups, as a window's update reads its
parent: the rows holding some values of a column, or some ids, without folding or
passing over the table.

A table is its base (the whole table an earlier generation wrote, or the table itself
when it is whole), less the base rows its delta rewrote or removed, plus the delta
(:mod:`store.knowledge_layers`). The base is looked up through a :class:`RowIndex` held
per base file (:func:`store.row_index.file_index`: built once by a process that keeps
tables, whatever hard link of the base a later generation reads) or by bisection of its
sorted ids; the delta, which holds only the change since the base, is filtered as it is.
So a lookup costs what the delta and the rows found cost, not what the table holds.

Example:
    >>> mentions = KnowledgeRows(parent, "mentions.parquet")
    >>> gone = mentions.where("doc_id", ["doc-3"])       # live rows of doc-3, by id
    >>> some = mentions.with_ids(["m-12", "m-40"])
"""

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import knowledge_layers, storage, table_cache
from store.row_index import file_rows, matching_rows
from store.sorted_columns import Scalars, SortedIds, increasing

__all__ = ["KnowledgeRows"]

Key = Callable[[pa.ChunkedArray], pa.ChunkedArray]
"""A column-wise transform of the looked-up column (e.g. squashing spaces)."""


class KnowledgeRows:
    """Table ``name`` of the generation at ``path``, whole or layered, for lookups.

    Args:
        path: the generation's directory.
        name: a layered table's file name (``mentions.parquet``, ...).
    """

    def __init__(self, path: str, name: str) -> None:
        self.path, self.name = path, name
        self.key = knowledge_layers.ID_COLUMNS[name]
        join = storage.join
        if knowledge_layers.is_layered(path, name):
            base_name, delta_name, removed_name = knowledge_layers.layer_files(name)
            self._base_path = join(path, base_name)
            self.delta = knowledge_layers.read_file(join(path, delta_name))
            removed = knowledge_layers.read_file(join(path, removed_name))["id"].to_pylist()
        else:
            self._base_path = join(path, name)
            self.delta, removed = None, []
        self.base = knowledge_layers.read_file(self._base_path)
        if self.delta is None:
            self.delta = self.base.schema.empty_table()
        self._delta_ids = self.delta[self.key].to_pylist()
        self._removed, self._delta_set = set(removed), set(self._delta_ids)
        self._dead = {*removed, *self._delta_ids}  # base ids no longer live as they are
        self._dead_rows: np.ndarray | None = None
        self._base_ids, self._sorted, self._search = table_cache.remember(
            self._base_path, f"ids:{self.key}", self._ids, 80 * self.base.num_rows
        )

    @property
    def columns(self) -> list[str]:
        return self.base.column_names

    @property
    def sorted(self) -> bool:
        """Whether the base is sorted by id (every table a build or fold writes is)."""
        return self._sorted

    def where(self, column: str, values: Iterable[Any], key: Key | None = None) -> pa.Table:
        """The live rows whose ``column`` (or ``key(column)``) holds one of ``values`` (a
        list column: any of its items), sorted by id."""
        wanted = sorted(set(values))
        if not wanted:
            return self.base.schema.empty_table()
        from_base = self._live(self.base_rows(column, wanted, key))
        return self._by_id(from_base, self.delta_where(column, wanted, key))

    def base_rows(self, column: str, values: list[Any], key: Key | None = None) -> np.ndarray:
        """Ascending row numbers of the base whose ``column`` (or ``key(column)``) holds
        one of ``values`` (sorted, distinct), live or not: through the base's index
        where this process keeps what it reads (:mod:`store.table_cache`), by one pass
        over the column where it does not (building an index would cost more)."""
        return file_rows(self._base_path, self.base, column, values, key)

    def delta_where(self, column: str, values: list[Any], key: Key | None = None) -> pa.Table:
        """The delta's rows whose ``column`` (or ``key(column)``) holds one of ``values``."""
        if not self.delta.num_rows:
            return self.delta
        data = self.delta[column] if key is None else key(self.delta[column])
        return self.delta.take(pa.array(matching_rows(data, values), type=pa.int64()))

    def dead_rows(self) -> np.ndarray:
        """Ascending row numbers of the base rows the delta rewrote or removed."""
        if self._dead_rows is None:
            self._dead_rows = np.asarray(self._base_rows(sorted(self._dead)), dtype=np.int64)
        return self._dead_rows

    def base_positions(self, ids: Iterable[str]) -> np.ndarray:
        """Ascending row numbers of the base holding ``ids`` (live or not)."""
        return np.asarray(self._base_rows(sorted(set(ids))), dtype=np.int64)

    def derived(self, tag: str, make: Callable[[pa.Table], Any], size: int) -> Any:
        """``make(base)``, kept with the base's file like its indexes (:func:`file_index`)."""
        return table_cache.remember(self._base_path, tag, lambda: make(self.base), size)

    def values(self, column: str) -> set[Any]:
        """Every value ``column`` holds (a list column: every item) in the base or the
        delta (a base row no longer live may add its values)."""
        found: set[Any] = set()
        for table in (self.base, self.delta):
            data = table[column]
            if pa.types.is_list(data.type):
                data = pc.list_flatten(data)
            found.update(pc.unique(data).to_pylist())
        return found - {None}

    def with_ids(self, ids: Iterable[str]) -> pa.Table:
        """The live rows with one of ``ids``, sorted by id."""
        wanted = sorted(set(ids))
        if not wanted:
            return self.base.schema.empty_table()
        in_delta = self._delta_set.intersection(wanted)
        from_base = self._live(np.asarray(self._base_rows(wanted), dtype=np.int64))
        if not in_delta:
            return from_base
        rows = knowledge_layers.positions(
            self.delta[self.key].combine_chunks(), pa.array(sorted(in_delta), type=pa.string())
        )
        return self._by_id(from_base, self.delta.take(pa.array(rows, type=pa.int64())))

    def in_delta(self, row_id: str) -> bool:
        """Whether the delta holds a row with this id."""
        return row_id in self._delta_set

    def base_list(self, row_id: str, column: str) -> pa.Array | None:
        """The items of list ``column`` in the base row with this id (that row rewritten
        by the delta or not), or ``None`` when the base has no such row or it was
        removed (a relative list is a change against this one)."""
        if row_id in self._removed:
            return None
        found = self._base_rows([row_id])
        if not found:
            return None
        return self.base[column][found[0]].values

    def count(self) -> int:
        """Live rows: the base's, less those the delta rewrote or removed, plus the delta's."""
        return self.base.num_rows - len(self.dead_rows()) + self.delta.num_rows

    def folded(self) -> pa.Table:
        """The whole table as readers see it (every row: for a window that writes it
        whole, or visits every row)."""
        return knowledge_layers.read_table(self.path, self.name)

    def _ids(self) -> tuple[pa.Array, bool, SortedIds | None]:
        """The base's id column in one piece, whether it is sorted, and, where this
        process keeps what it reads, the column searched in one pass (:class:`SortedIds`)."""
        ids = self.base[self.key].combine_chunks()
        ascending = increasing(ids)
        search = SortedIds.of(ids) if ascending and table_cache.enabled() else None
        return ids, ascending, search

    def _base_rows(self, ids: list[str]) -> list[int]:
        """Row numbers of the base holding ``ids`` (sorted, distinct)."""
        if self._search is not None:
            return self._search.rows(ids).tolist()
        if len(ids) > knowledge_layers.BISECT_LIMIT or not self._sorted:
            wanted = pa.array(ids, type=self._base_ids.type)
            return knowledge_layers.true_rows(pc.is_in(self._base_ids, value_set=wanted))
        keys = Scalars(self._base_ids)
        return [at for value in ids if (at := keys.find(value)) >= 0]

    def _live(self, rows: np.ndarray) -> pa.Table:
        """Base rows ``rows`` (ascending) less those no longer live, sorted by id."""
        table = knowledge_layers.take_rows(self.base, rows)
        if self._dead and table.num_rows:
            live = [i not in self._dead for i in table[self.key].to_pylist()]
            table = table.filter(pa.array(live, type=pa.bool_()))
        return table if self._sorted else table.sort_by(self.key)

    def _by_id(self, first: pa.Table, second: pa.Table) -> pa.Table:
        """Base rows and delta rows as one table sorted by id (a delta's column the
        base lacks, the removed items of a relative list, is null in base rows)."""
        if not second.num_rows:
            return first
        return pa.concat_tables([first, second], promote_options="permissive").sort_by(self.key)
