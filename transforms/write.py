"""Write: one global step per table, Parquet with an explicit schema, rows sorted by id.

Rows are sorted before writing so that the same input always yields the same
file bytes, whatever order the runner delivered them in. Memory bound: a table
is materialized on one worker (about 1.6 KB per chunk row with a 384-d vector);
``WriteRecords`` gathers it as Arrow tables built where the rows are made.
"""

import logging
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from schemas import ann_key, chunk_table_schema, with_vectors
from transforms.gather import CollectAll, Gather

logger = logging.getLogger(__name__)

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True}


def write_parquet(table: pa.Table, path: str) -> None:
    """Write ``table`` to ``path`` (any Beam filesystem) as one Parquet file."""
    with FileSystems.create(path) as handle:
        pq.write_table(table, handle, **PARQUET_OPTIONS)


def records_table(rows: Sequence[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    """NamedTuple rows -> a pyarrow table with exactly ``schema``."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in schema.names]
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def chunk_rows_table(embedded: Sequence[Any], dimension: int) -> pa.Table:
    """EmbeddedChunks -> the ``chunks`` table: chunk fields, ANN key, embedding."""
    schema = chunk_table_schema(dimension)
    chunks = [e.chunk for e in embedded]
    base = records_table(chunks, pa.schema(list(schema)[:-2]))
    keys = pa.array([ann_key(c.chunk_id) for c in chunks], type=pa.uint64())
    flat = pa.array([x for e in embedded for x in e.embedding], type=pa.float32())
    vectors = pa.FixedSizeListArray.from_arrays(flat, dimension)
    return pa.Table.from_arrays([*base.columns, keys, vectors], schema=schema)


def vector_rows_table(
    pairs: Sequence[tuple[Any, Sequence[float] | None]],
    schema: pa.Schema,
    dimension: int,
    *,
    row_id: Callable[[Any], str],
) -> pa.Table:
    """``(record, vector or None)`` pairs -> ``schema`` + ``ann_key`` + nullable ``embedding``."""
    return with_vector_columns(
        records_table([record for record, _ in pairs], schema),
        [row_id(record) for record, _ in pairs],
        [vector for _, vector in pairs],
        dimension,
    )


def with_vector_columns(
    table: pa.Table, ids: Sequence[str], vectors: Sequence[Any], dimension: int
) -> pa.Table:
    """``table`` (rows of a schema) + ``ann_key`` (of each row's id in ``ids``) + the
    nullable ``embedding`` (each row's vector in ``vectors``, or ``None``).

    Raises:
        ValueError: a vector has another length than ``dimension``.
    """
    full = with_vectors(table.schema)
    keys = pa.array([ann_key(row) for row in ids], type=pa.uint64())
    for row, vector in zip(ids, vectors, strict=True):
        if vector is not None and len(vector) != dimension:
            raise ValueError(f"{row}: vector of {len(vector)} values, want {dimension}")
    # Built from one float32 buffer, not from a Python list per row (35k vectors on SciFact).
    missing = np.array([vector is None for vector in vectors], dtype=bool)
    sizes = np.where(missing, 0, dimension)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    present = [np.asarray(vector, dtype=np.float32) for vector in vectors if vector is not None]
    flat = np.concatenate(present) if present else np.zeros(0, dtype=np.float32)
    embeddings = pa.ListArray.from_arrays(
        pa.array(offsets),
        pa.array(flat, type=pa.float32()),
        type=full.field("embedding").type,
        mask=pa.array(missing),
    )
    return pa.Table.from_arrays([*table.columns, keys, embeddings], schema=full)


def write_rows(
    path: str, rows: list[Any], *, to_table: Callable[[list[Any]], pa.Table], sort_key: Any
) -> tuple[str, int]:
    """Sort ``rows``, turn them into a table and write it to ``path``; returns
    ``(path, rows written)``, what the writing steps emit."""
    table = to_table(sorted(rows, key=sort_key))
    write_parquet(table, path)
    logger.info("wrote %d rows to %s", table.num_rows, path)
    return path, table.num_rows


class _WriteTableFn(beam.DoFn):
    def __init__(self, *, path: str, to_table: Callable[[list[Any]], pa.Table], sort_key: Any):
        self._path = path
        self._to_table = to_table
        self._sort_key = sort_key

    def process(self, rows: list[Any]) -> Any:
        yield write_rows(self._path, rows, to_table=self._to_table, sort_key=self._sort_key)


class WriteTable(beam.PTransform):
    """Collect a PCollection on one worker and write it as one sorted Parquet file.

    Example:
        >>> docs | WriteTable(path, to_table=lambda rows: records_table(rows, DOCUMENT_SCHEMA),
        ...                   sort_key=lambda d: d.doc_id)

    Args:
        path: destination file (any Beam filesystem).
        to_table: builds the pyarrow table from the sorted rows.
        sort_key: total order on rows (ids), so output bytes are reproducible.
        collected: the input is already one list (a ``CollectAll`` shared by several
            global steps over the same rows), not the rows themselves.

    Returns:
        ``PCollection[(path, row_count)]`` with one element, once written.
    """

    def __init__(
        self,
        path: str,
        *,
        to_table: Callable[[list[Any]], pa.Table],
        sort_key: Any,
        collected: bool = False,
    ) -> None:
        super().__init__()
        if not path:
            raise ValueError("WriteTable needs a destination path")
        self._fn = _WriteTableFn(path=path, to_table=to_table, sort_key=sort_key)
        self._collected = collected

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        lists = rows if self._collected else rows | "CollectRows" >> CollectAll()
        return lists | "WriteParquet" >> beam.ParDo(self._fn)


def sorted_table(tables: Sequence[pa.Table], schema: pa.Schema, column: str) -> pa.Table:
    """``tables`` (of ``schema``) as one table sorted by ``column``, in one chunk."""
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.take(pc.sort_indices(table, [(column, "ascending")])).combine_chunks()


def _batch_table(batch: list[Any], schema: pa.Schema) -> pa.Table:
    """``records_table`` for one batch (typed as a list: Beam checks ``Map``'s hints)."""
    return records_table(batch, schema)


class _WriteSortedFn(beam.DoFn):
    def __init__(self, *, path: str, schema: pa.Schema, column: str) -> None:
        self._path = path
        self._schema = schema
        self._column = column

    def process(self, tables: list[pa.Table]) -> Any:
        table = sorted_table(tables, self._schema, self._column)
        write_parquet(table, self._path)
        logger.info("wrote %d rows to %s", table.num_rows, self._path)
        yield self._path, table.num_rows


class WriteRecords(beam.PTransform):
    """Write a PCollection of records (NamedTuples of ``schema``) as one Parquet file
    sorted by ``sort_column``, gathered as Arrow: each batch of records becomes a table
    where the records are made, and one worker sorts and writes the tables, holding
    Arrow buffers (a mention is ~0.2 KB there, ~1.9 KB as a Python record).

    Example:
        >>> mentions | WriteRecords(path, schema=MENTION_SCHEMA, sort_column="mention_id")

    Args:
        path: destination file (any Beam filesystem).
        schema: the records' table schema (field order = the NamedTuple's).
        sort_column: a column whose values are unique (an id): the file's row order.
        batch_size: at most this many records per table before gathering.

    Returns:
        ``PCollection[(path, row_count)]`` with one element, once written.
    """

    def __init__(
        self, path: str, *, schema: pa.Schema, sort_column: str, batch_size: int = 16_384
    ) -> None:
        super().__init__()
        if not path:
            raise ValueError("WriteRecords needs a destination path")
        if sort_column not in schema.names:
            raise ValueError(f"sort column {sort_column!r} is not in the schema")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._schema = schema
        self._batch_size = batch_size
        self._fn = _WriteSortedFn(path=path, schema=schema, column=sort_column)

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        return (
            rows
            | "BatchRecords"
            >> beam.BatchElements(min_batch_size=1, max_batch_size=self._batch_size)
            | "ToArrow" >> beam.Map(_batch_table, self._schema)
            | "CollectTables" >> CollectAll()
            | "WriteParquet" >> beam.ParDo(self._fn)
        )


class _WriteTablesFn(beam.DoFn):
    def __init__(self, tables: dict[str, _WriteTableFn]) -> None:
        self._tables = tables

    def process(self, gathered: dict[str, list[Any]]) -> Any:
        for name in sorted(self._tables):
            yield from self._tables[name].process(gathered[name])


class WriteTables(beam.PTransform):
    """``{name: PCollection}`` -> one sorted Parquet file per name, all in one global step.

    For several small tables of the same kind (the dead-letter tables): one gathering
    step instead of one per table, and every file is written, empty ones too.

    Example:
        >>> {"ingest": bad_docs, "chunk": bad_chunks} | WriteTables(
        ...     {"ingest": p1, "chunk": p2}, to_table=dead_letters_table, sort_key=by_id)

    Returns:
        ``PCollection[(path, row_count)]``, one element per table, once written.
    """

    def __init__(
        self, paths: dict[str, str], *, to_table: Callable[[list[Any]], pa.Table], sort_key: Any
    ) -> None:
        super().__init__()
        if not paths or not all(paths.values()):
            raise ValueError("WriteTables needs a destination path for every table")
        self._fn = _WriteTablesFn(
            {
                name: _WriteTableFn(path=path, to_table=to_table, sort_key=sort_key)
                for name, path in paths.items()
            }
        )
        self._names = set(paths)

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        if set(inputs) != self._names:
            wanted = sorted(self._names)
            raise ValueError(f"WriteTables got tables {sorted(inputs)}, wants {wanted}")
        return (
            dict(inputs)
            | "GatherTables" >> Gather(always=True)
            | "WriteParquet" >> beam.ParDo(self._fn)
        )
