"""The knowledge tables in the form a reader memory-maps: one Arrow IPC file per table
file that holds whole rows (a whole table, or a layered table's base).

A reader of a 300k-document layer spent over a second turning Parquet into columns and
building its lookups (alias index, relation ends, functional chunks, ANN keys) over every
row, at each cold open. A map file holds those columns and lookups, built once when the
table file is written, uncompressed, so that opening it maps the file and reads its
schema: the open costs the same at any size, and lookups read the pages they touch.

Each map file holds one record batch of one row; each column is a list:

- ``rows``: the reader's columns of the table, in the table's (id) order;
- an index per lookup, ``key`` (sorted) and ``rows`` (the table rows with that key,
  ascending): ``aliases`` (normalized alias -> entities), ``ends`` (entity id -> the
  relations it is the subject or the object of; a relation from an entity to itself
  twice), ``functional`` (chunk id -> the functional relations it states), and ``keys``
  (ANN key -> row) for relations and communities;
- a fence (``<name>_fence``) of the ids in ``rows`` and of each lookup keyed by strings.

A window that keeps a table's base links the base's map file with it
(:func:`write_maps`), so a stream writes map files only when it folds. The schema
metadata names the table file's size: a map whose table file changed is not used.
"""

import os
from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import storage
from store.bundles import COMMUNITIES, ENTITIES, RELATIONS, numbers
from store.knowledge_layers import (
    has_table,
    read_file,
    rows_file,
    table_files,
    table_schema,
)
from store.sorted_columns import Fenced, fence, group
from store.walk_counts import WALK_MAP, write_walk_map

MAPPED = (ENTITIES, RELATIONS, COMMUNITIES)
"""The tables a reader opens (``query.knowledge``)."""
FUNCTIONAL_CATEGORIES = frozenset({"limit"})
DESCRIPTION = "definition"
"""The relation category of "X is a Y" and of an appositive ("X, a Y"): stated with a
literal object, it describes its subject (the graph arm seeds the subject from it)."""
"""Relation categories whose object is a single value: two different objects for one
subject contradict."""
ROW_COLUMNS = {
    ENTITIES: ("entity_id", "name", "chunk_ids"),
    RELATIONS: (
        "relation_id",
        "summary",
        "chunk_ids",
        "ann_key",
        "subject_id",
        "object_id",
        "predicate",
        "object_text",
        "category",
        "support",
        "confidence",
    ),
    COMMUNITIES: ("community_id", "report", "evidence_chunk_ids", "ann_key"),
}
"""The columns of each table a reader uses, in its map file's ``rows``."""
SIZE_KEY = b"evidex.table_size"
STRING_KEYED = ("aliases", "ends", "functional", "mentions", "descriptions")
"""The lookups keyed by strings; each, and the ``rows``' ids, has a fence (every
:data:`store.sorted_columns.FENCE`-th key, ``<name>_fence``): a lookup in a file mapped
cold reads the fence and one block of keys, not a page per probe."""
FENCE_SUFFIX = "_fence"


def map_name(table_file: str) -> str:
    """The map file of a table file (``entities.base.parquet`` ->
    ``entities.base.map.arrow``)."""
    return table_file.removesuffix(".parquet") + ".map.arrow"


Normalize = Callable[[str], str]
"""How the build normalizes a surface (``algorithms.normalize.normalize_surface``: the
store does not import the algorithms, so the writer hands it in)."""


def write_maps(
    staging: str, parent: str | None = None, normalize: Normalize | None = None
) -> list[str]:
    """Give every knowledge table file of ``staging`` that holds whole rows its map file:
    a hard link of the ``parent`` generation's when the table file is a hard link of one
    of the parent's (a window's base, an unchanged table), built from its rows otherwise.
    Then the walk counts (:mod:`store.walk_counts`), linked or counted the same way.
    Returns the names of the map files built (not linked). Without ``normalize`` the
    relations' map has no ``descriptions`` (its readers build the walk graph whole).

    A table written before entities held ``alias_norms`` gets no map (its readers build
    the layer from the rows, as before)."""
    built = []
    read: dict[str, pa.Table] = {}  # the rows read for a map, which the walk counts reuse
    for table in MAPPED:
        if not has_table(staging, table):
            continue
        source = rows_file(staging, table)
        target = storage.join(staging, map_name(source))
        if storage.exists(target):
            continue
        linked = _parent_map(parent, table, storage.join(staging, source))
        if linked is not None:
            storage.reuse_file(linked, target)
            continue
        columns = [*ROW_COLUMNS[table], *(["alias_norms"] if table == ENTITIES else [])]
        if not set(columns) <= set(table_schema(staging, table).names):
            continue
        data = read[table] = read_file(storage.join(staging, source), columns)
        size = os.path.getsize(storage.join(staging, source))
        storage.write_bytes(target, map_bytes(table, data, size, normalize))
        built.append(map_name(source))
    mapped = [storage.join(staging, map_name(rows_file(staging, t))) for t in (ENTITIES, RELATIONS)]
    if all(storage.exists(m) for m in mapped) and write_walk_map(staging, parent, read):
        built.append(WALK_MAP)
    return built


def _parent_map(parent: str | None, table: str, source: str) -> str | None:
    """The parent's map file of the file ``source`` is a hard link of, if it has one."""
    if parent is None or storage.is_remote(parent) or storage.is_remote(source):
        return None
    for name in table_files(table):
        theirs = os.path.join(parent, name)
        mapped = os.path.join(parent, map_name(name))
        if os.path.exists(theirs) and os.path.exists(mapped) and os.path.samefile(theirs, source):
            return mapped
    return None


def map_bytes(
    table: str, data: pa.Table, table_size: int, normalize: Normalize | None = None
) -> bytes:
    """The map file of ``data`` (table ``table``'s whole rows, in id order), whose
    Parquet file is ``table_size`` bytes (``normalize``: see :func:`write_maps`)."""
    data = data.combine_chunks()
    rows = pa.StructArray.from_arrays(
        [data.column(c).combine_chunks() for c in ROW_COLUMNS[table]], names=ROW_COLUMNS[table]
    )
    columns: dict[str, pa.Array] = {"rows": rows}
    if table == ENTITIES:
        owners, items = _items(data.column("alias_norms"))
        columns["aliases"] = grouped(items, owners, distinct=True)
        owners, items = _items(data.column("chunk_ids"))
        columns["mentions"] = grouped(items, owners, distinct=True)
    if table == RELATIONS:
        columns["ends"] = _ends(data)
        functional = pc.is_in(data["category"], value_set=pa.array(sorted(FUNCTIONAL_CATEGORIES)))
        named = np.flatnonzero(_flags(functional))
        owners, items = _items(data.column("chunk_ids").take(pa.array(named, pa.int64())))
        columns["functional"] = grouped(items, named[owners])
        if normalize is not None:
            columns["descriptions"] = _descriptions(data, normalize)
    if table in (RELATIONS, COMMUNITIES):
        columns["keys"] = _keys(numbers(data.column("ann_key").combine_chunks()))
    fences = {"rows": rows.field(ROW_COLUMNS[table][0])}
    fences.update((n, c.field("key")) for n, c in columns.items() if n in STRING_KEYED)
    for name, keys in fences.items():
        columns[name + FENCE_SUFFIX] = fence(keys)
    batch = pa.record_batch(
        [_one_row(values) for values in columns.values()],
        schema=pa.schema(
            [pa.field(name, pa.list_(values.type)) for name, values in columns.items()],
            metadata={SIZE_KEY: str(table_size).encode()},
        ),
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _descriptions(relations: pa.Table, normalize: Normalize) -> pa.StructArray:
    """The ``descriptions`` lookup of a relations table (:func:`description_rows`)."""
    rows = np.flatnonzero(_flags(pc.fill_null(pc.equal(relations["category"], DESCRIPTION), False)))
    texts = relations.column("object_text").take(pa.array(rows, pa.int64())).to_pylist()
    found = description_rows(rows.tolist(), texts, normalize)
    keys = pa.array([norm for norm, named in found.items() for _ in named], pa.string())
    return grouped(keys, np.asarray([r for named in found.values() for r in named], np.int64))


def description_rows(
    rows: Iterable[int], texts: Iterable[str | None], normalize: Normalize
) -> dict[str, list[int]]:
    """normalized description -> those of ``rows`` (relations of category
    :data:`DESCRIPTION`, whose object ``texts`` are given) that state it, in the order
    given; a description of one word is left out ("a vocalist" says what kind of thing,
    not which). Each distinct text is normalized once."""
    norm_of: dict[str, str] = {}
    found: dict[str, list[int]] = {}
    for row, text in zip(rows, texts, strict=True):
        if not text:
            continue
        norm = norm_of.get(text)
        if norm is None:
            norm = norm_of[text] = normalize(text)
        if " " in norm:
            found.setdefault(norm, []).append(row)
    return found


def _flags(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow column as a numpy bool array."""
    return numbers(pc.cast(mask, pa.int8())).astype(bool)


def _one_row(values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values)


def _items(lists: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Each item of a list column and the row holding it."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    owners = numbers(pc.list_parent_indices(lists)).astype(np.int64)
    return owners, pc.list_flatten(lists)


def _ends(relations: pa.Table) -> pa.Array:
    """entity id -> relation rows: each relation's subject, then its object (when it
    has one), in relation order."""
    ends = pa.concat_arrays(
        [
            relations.column("subject_id").combine_chunks(),
            relations.column("object_id").combine_chunks(),
        ]
    )
    rows = np.tile(np.arange(relations.num_rows, dtype=np.int64), 2)
    place = np.concatenate(  # row r's subject, then its object
        [np.arange(relations.num_rows) * 2, np.arange(relations.num_rows) * 2 + 1]
    )
    order = np.argsort(place, kind="stable")
    ends, rows = ends.take(pa.array(order)), rows[order]
    valid = ~_flags(pc.is_null(ends))
    return grouped(ends.filter(pa.array(valid)), rows[valid])


def grouped(keys: pa.Array, rows: np.ndarray, *, distinct: bool = False) -> pa.StructArray:
    """``key`` (distinct, sorted) and ``rows`` (each key's rows in the order given,
    or with ``distinct`` each once, ascending) of ``keys[i] -> rows[i]``."""
    encoded = keys.dictionary_encode()
    labels = encoded.dictionary
    order = numbers(pc.sort_indices(labels)).astype(np.int64)
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels))
    codes = rank[numbers(encoded.indices).astype(np.int64)] if len(keys) else np.empty(0, np.int64)
    offsets, rows = group(codes, rows, len(labels), distinct=distinct)
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(rows, pa.int64()))
    return pa.StructArray.from_arrays([labels.take(pa.array(order)), lists], names=["key", "rows"])


def _keys(keys: np.ndarray) -> pa.StructArray:
    """ANN key (sorted, of the column's type; a key held twice keeps its last row) -> row."""
    order = np.argsort(keys, kind="stable")
    sorted_keys, rows = keys[order], order
    last = np.ones(len(order), dtype=bool)
    last[:-1] = sorted_keys[1:] != sorted_keys[:-1]
    return pa.StructArray.from_arrays(
        [pa.array(sorted_keys[last]), pa.array(rows[last], pa.int64())],
        names=["key", "row"],
    )


def open_map(path: str, table: str) -> pa.RecordBatch | None:
    """Table ``table``'s map file in the generation at ``path``, memory-mapped (its
    columns read in place), or ``None``: no map file, a remote bundle, or a map whose
    table file is not the one it was built from."""
    if storage.is_remote(path):
        return None
    source = rows_file(path, table)
    mapped = os.path.join(path, map_name(source))
    try:
        reader = pa.ipc.open_file(pa.memory_map(mapped, "r"))
        size = os.path.getsize(os.path.join(path, source))
    except FileNotFoundError:
        return None
    if (reader.schema.metadata or {}).get(SIZE_KEY) != str(size).encode():
        return None
    return reader.get_batch(0)


def map_column(batch: pa.RecordBatch, name: str) -> pa.Array:
    """Column ``name`` of a map file (its one row's list), in place."""
    return batch.column(name).values


def fenced(batch: pa.RecordBatch, name: str, keys: pa.Array) -> Fenced:
    """The sorted ``keys`` of the map file's ``name`` (``rows``: the table's ids, or a
    lookup's keys), searched through their fence."""
    return Fenced(keys, map_column(batch, name + FENCE_SUFFIX))
