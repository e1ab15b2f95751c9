"""A knowledge layer read in place from its map files (:mod:`store.knowledge_maps`).

Opening maps each table's file and wraps its columns and lookups: nothing is built over
the rows, so a cold open costs the same at 10k documents as at 300k, and a lookup reads
the pages it touches (a bisection over sorted keys: a few dozen values; many keys of one
width at once, a vectorized search of their prefixes). The graph arm's walk reads the
edges of the nodes it reaches through the same lookups (:mod:`query.local_graph`).
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.columns import ArrowSequence, Converted, get_many
from query.knowledge_layer import (
    SURFACE_COLUMNS,
    EdgeCounts,
    KnowledgeLayer,
    Surface,
    index_file_view,
)
from store.bundles import COMMUNITIES, COMMUNITY_INDEX, ENTITIES, RELATION_INDEX, RELATIONS, numbers
from store.knowledge_maps import MAPPED, fenced, map_column, open_map
from store.sorted_columns import Fenced
from store.walk_counts import open_walk_edges


class SortedColumn(ArrowSequence):
    """A sorted column of a map file (a table's ids), with the row of a value (``find``,
    through the column's fence; -1: not there)."""

    def __init__(self, keys: Fenced) -> None:
        super().__init__(keys.values)
        self.find = keys.find
        self.find_many = keys.find_many


class SortedIndex(Mapping[Any, list[int]]):
    """key -> rows, from a map file's index (keys sorted, each key's rows ascending)."""

    def __init__(self, batch: pa.RecordBatch, name: str) -> None:
        index = map_column(batch, name)
        self._labels = index.field("key")
        self._keys = fenced(batch, name, self._labels)
        lists = index.field("rows")
        self._offsets = numbers(lists.offsets)
        self._values = numbers(lists.values) if len(lists.values) else np.empty(0, np.int64)

    def __getitem__(self, key: Any) -> list[int]:
        at = self._keys.find(key) if isinstance(key, str) else -1
        if at < 0:
            raise KeyError(key)
        return self._values[self._offsets[at] : self._offsets[at + 1]].tolist()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._keys.find(key) >= 0

    def get_many(self, keys: Sequence[str]) -> list[list[int]]:
        """Each key's rows (``[]``: not a key), the keys searched in one pass."""
        offsets, values = self._offsets, self._values
        return [
            values[offsets[at] : offsets[at + 1]].tolist() if at >= 0 else []
            for at in self._keys.find_many(keys).tolist()
        ]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._labels.to_pylist())

    def __len__(self) -> int:
        return len(self._keys)


class AnnKeyRows(Mapping[int, int]):
    """ANN key -> row, from a map file's ``keys`` (sorted keys, one row each)."""

    def __init__(self, index: pa.StructArray) -> None:
        self._keys = _ints(index.field("key"))
        self._rows = _ints(index.field("row"))

    def __getitem__(self, key: int) -> int:
        at = int(np.searchsorted(self._keys, key))
        if at < len(self._keys) and self._keys[at] == key:
            return int(self._rows[at])
        raise KeyError(key)

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys.tolist())

    def __len__(self) -> int:
        return len(self._keys)


class Numbers(Converted):
    """A numeric column read in place (a numpy view of its buffer); items as Python
    numbers."""

    def __init__(self, values: pa.Array) -> None:
        self._values = numbers(values) if len(values) else np.empty(0)

    def __len__(self) -> int:
        return len(self._values)

    def item(self, index: int) -> Any:
        return self._values[index].item()

    def tolist(self) -> list[Any]:
        return self._values.tolist()  # type: ignore[no-any-return]

    def items_at(self, rows: Sequence[int]) -> list[Any]:
        return self._values[np.asarray(rows, dtype=np.int64)].tolist()  # type: ignore[no-any-return]


def _ints(values: pa.Array) -> np.ndarray:
    return numbers(values) if len(values) else np.empty(0, np.int64)


class EntityRows(Converted):
    """Each relation's entity row (-1: no entity), from its entity id, found when asked
    for by ``find`` (one id) or ``find_all`` (the column at once)."""

    def __init__(
        self,
        ids: pa.Array,
        find: Callable[[str], int],
        find_all: Callable[[pa.Array], np.ndarray],
        find_many: Callable[[Any], np.ndarray] | None = None,
    ) -> None:
        self._ids, self._find, self._find_all = ids, find, find_all
        self._find_many = find_many

    def __len__(self) -> int:
        return len(self._ids)

    def item(self, index: int) -> int:
        value = self._ids[index].as_py()
        return -1 if value is None else self._find(value)

    def tolist(self) -> list[int]:
        return self._find_all(self._ids).tolist()

    def items_at(self, rows: Sequence[int]) -> list[int]:
        """The entity rows of relations ``rows``, their ids found in one pass when the
        entities' ids can be (``find_many``)."""
        ids = self._ids.take(pa.array(rows, pa.int64()))
        named = np.flatnonzero(~pc.is_null(ids).to_numpy(zero_copy_only=False))
        wanted = ids.filter(pc.is_valid(ids))
        found = np.full(len(ids), -1, dtype=np.int64)
        if self._find_many is not None:
            found[named] = self._find_many(wanted)
        else:
            found[named] = [self._find(value) for value in wanted.to_pylist()]
        return found.tolist()  # type: ignore[no-any-return]


def rows_in(ids: SortedColumn) -> tuple[Callable[[str], int], Callable[[pa.Array], np.ndarray]]:
    """Finders of ids in the sorted id column ``ids``: one through its fence, many by one
    hashed pass (-1: not there)."""

    def find_all(values: pa.Array) -> np.ndarray:
        found = pc.fill_null(pc.index_in(values, value_set=ids.arrow), -1)
        return numbers(found.cast(pa.int64()))

    return ids.find, find_all


class ByEntity(Mapping[int, list[int]]):
    """entity row -> the relation rows it is an end of, from ``ends`` (entity id ->
    relation rows)."""

    def __init__(self, entity_ids: SortedColumn, ends: Mapping[str, list[int]]) -> None:
        self._entity_ids, self._ends = entity_ids, ends
        self._find = entity_ids.find

    def __getitem__(self, row: int) -> list[int]:
        if not isinstance(row, (int, np.integer)) or not 0 <= row < len(self._entity_ids):
            raise KeyError(row)
        return self._ends[self._entity_ids[int(row)]]

    def get_many(self, rows: Sequence[int]) -> list[list[int]]:
        """Each entity row's relation rows (``[]``: none), looked up in one pass."""
        return get_many(self._ends, self._entity_ids.items_at(rows))

    def __iter__(self) -> Iterator[int]:
        found = (self._find(key) for key in self._ends)
        return iter(sorted(row for row in found if row >= 0))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def mapped_layer(path: str, *, with_indexes: bool = True) -> KnowledgeLayer | None:
    """The layer of the rows the generation at ``path`` holds whole (each table itself,
    or its base when it is layered), read in place from their map files, or ``None``
    when a table has no usable map file. A layered generation's change goes on top of
    it (:mod:`query.knowledge_overlay`); with ``with_indexes``, the surfaces search the
    generation's HNSW files."""
    batches = {}
    for table in MAPPED:
        batch = open_map(path, table)
        if batch is None:
            return None
        batches[table] = batch
    entities = map_column(batches[ENTITIES], "rows")
    entity_ids = SortedColumn(fenced(batches[ENTITIES], "rows", entities.field("entity_id")))
    relations = map_column(batches[RELATIONS], "rows")
    find, find_all = rows_in(entity_ids)
    rows_of = entity_ids.find_many
    ends = SortedIndex(batches[RELATIONS], "ends")
    subject_ids, object_ids = relations.field("subject_id"), relations.field("object_id")
    edges = open_walk_edges(path)
    return KnowledgeLayer(
        entity_ids=entity_ids,
        entity_names=ArrowSequence(entities.field("name")),
        entity_chunks=ArrowSequence(entities.field("chunk_ids")),
        aliases=SortedIndex(batches[ENTITIES], "aliases"),
        relations=_surface(path, batches[RELATIONS], RELATIONS, with_indexes),
        subjects=EntityRows(subject_ids, find, find_all, rows_of),
        objects=EntityRows(object_ids, find, find_all, rows_of),
        predicates=ArrowSequence(relations.field("predicate")),
        object_texts=ArrowSequence(relations.field("object_text")),
        categories=ArrowSequence(relations.field("category")),
        supports=Numbers(relations.field("support")),
        confidences=Numbers(relations.field("confidence")),
        communities=_surface(path, batches[COMMUNITIES], COMMUNITIES, with_indexes),
        adjacency=ByEntity(entity_ids, ends),
        functional=SortedIndex(batches[RELATIONS], "functional"),
        subject_ids=ArrowSequence(subject_ids),
        object_ids=ArrowSequence(object_ids),
        relations_of=ends,
        chunk_entities=_lookup(batches[ENTITIES], "mentions"),
        descriptions=_lookup(batches[RELATIONS], "descriptions"),
        walk_edges=None if edges is None else EdgeCounts(edges),
    )


def _lookup(batch: pa.RecordBatch, name: str) -> "SortedIndex | None":
    """The map file's lookup ``name``, or ``None`` in a map file written before it."""
    return SortedIndex(batch, name) if name in batch.schema.names else None


INDEX_FILES = {RELATIONS: RELATION_INDEX, COMMUNITIES: COMMUNITY_INDEX}


def _surface(path: str, batch: pa.RecordBatch, table: str, with_index: bool) -> Surface:
    id_col, text_col, chunk_col = SURFACE_COLUMNS[table]
    rows = map_column(batch, "rows")
    return Surface(
        ids=SortedColumn(fenced(batch, "rows", rows.field(id_col))),
        texts=ArrowSequence(rows.field(text_col)),
        chunk_ids=ArrowSequence(rows.field(chunk_col)),
        index=index_file_view(path, INDEX_FILES[table]) if with_index else None,
        row_of_key=AnnKeyRows(map_column(batch, "keys")),
    )
