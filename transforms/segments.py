"""A segment's extraction: written with the segment, read back by later refreshes.

A refresh parses only the chunks of its new segment; the mentions, statements and acronym
definitions of every chunk it keeps come from the segments that hold them, so the
knowledge layer is rebuilt without a second spaCy parse.
"""

from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from schemas import (
    ACRONYM_SCHEMA,
    CHUNK_SCHEMA,
    MENTION_SCHEMA,
    STATEMENT_SCHEMA,
    Chunk,
    Document,
    EmbeddedChunk,
    Mention,
    Statement,
)
from store import bundles, storage
from store.segments import (
    EXTRACTED_ACRONYMS,
    EXTRACTED_MENTIONS,
    EXTRACTED_STATEMENTS,
    part_folder,
    part_of,
)
from transforms.extract import ACRONYMS, MENTIONS, STATEMENTS
from transforms.gather import Gather, batched_rows
from transforms.tags import typed
from transforms.write import records_table, write_parquet

TABLES = {
    MENTIONS: (EXTRACTED_MENTIONS, MENTION_SCHEMA),
    STATEMENTS: (EXTRACTED_STATEMENTS, STATEMENT_SCHEMA),
    ACRONYMS: (EXTRACTED_ACRONYMS, ACRONYM_SCHEMA),
}


def _sort_key(row: tuple[Any, ...]) -> tuple[str, ...]:
    # Mentions and statements lead with their id; acronym rows are (doc, chunk, short, long).
    return tuple(str(x) for x in row)


def write_extraction(directory: str, gathered: dict[str, list[Any]]) -> Iterator[tuple[str, int]]:
    """``{mentions, statements, acronyms}`` (lists of rows) -> the segment's sorted
    ``extraction/*.parquet`` under ``directory``; yields ``(path, rows)``."""
    for name, (rel, schema) in sorted(TABLES.items()):
        rows = sorted(batched_rows(gathered[name]), key=_sort_key)
        if name == MENTIONS:
            rows = [m._replace(entity_id="") for m in rows]
        path = storage.join(directory, rel)
        write_parquet(records_table(rows, schema), path)
        yield path, len(rows)


class _WriteExtractionFn(beam.DoFn):
    def __init__(self, directory: str) -> None:
        self._directory = directory

    def process(self, gathered: dict[str, list[Any]]) -> Iterator[tuple[str, int]]:
        yield from write_extraction(self._directory, gathered)


class WriteExtraction(beam.PTransform):
    """``{mentions, statements, acronyms}`` (lists of rows, as
    :class:`transforms.extract.ExtractKnowledge` emits them) -> the segment's
    ``extraction/*.parquet``, sorted; mentions without their entity (that is the
    generation's)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self._fn = _WriteExtractionFn(directory)

    def expand(self, inputs: Any) -> beam.PCollection:
        return (
            {name: inputs[name] for name in TABLES}
            | "GatherExtraction" >> Gather(always=True)
            | "WriteExtraction" >> beam.ParDo(self._fn)
        )


def _row_doc(row: Any) -> str:
    # Mentions and statements name their document; acronym rows lead with it.
    return str(row.doc_id if hasattr(row, "doc_id") else row[0])


def _batches_by_part(batch: list[Any], parts: int) -> Iterator[tuple[int, list[Any]]]:
    by_part: dict[int, list[Any]] = {}
    for row in batch:
        by_part.setdefault(part_of(_row_doc(row), parts), []).append(row)
    yield from sorted(by_part.items(), key=lambda item: item[0])


def _part_number(item: tuple[int, list[Any]], parts: int) -> int:
    return item[0]


def _rows_of(item: tuple[int, list[Any]]) -> list[Any]:
    return item[1]


class WriteExtractionParts(beam.PTransform):
    """:class:`WriteExtraction` for a build that writes ``parts`` segments: each batch of
    rows is split by the part its document hashes to, and each part's extraction is
    written into ``directory/parts/<k>`` by a step of its own."""

    def __init__(self, directory: str, parts: int) -> None:
        super().__init__()
        self._directory = directory
        self._parts = parts

    def expand(self, inputs: Any) -> beam.pvalue.PDone:
        split = {
            name: inputs[name]
            | f"Split[{name}]" >> beam.FlatMap(_batches_by_part, self._parts)
            | f"Partition[{name}]" >> beam.Partition(_part_number, self._parts)
            for name in TABLES
        }
        for number in range(self._parts):
            rows = {
                name: split[name][number] | f"Rows[{name}][{number}]" >> beam.Map(_rows_of)
                for name in TABLES
            }
            folder = storage.join(self._directory, part_folder(number))
            _ = rows | f"Write[{number}]" >> WriteExtraction(folder)
        return beam.pvalue.PDone(next(iter(inputs.values())).pipeline)


def _read_table(path: str) -> pa.Table:
    with FileSystems.open(path) as handle:
        return pq.read_table(pa.BufferReader(handle.read()))


class _ReadExtractionFn(beam.DoFn):
    """(segment directory, deleted chunk ids) -> ``(doc_id, (table, rows))`` for each
    document and table, the rows of chunks the segment has not deleted."""

    def process(self, item: tuple[str, list[str]]) -> Iterator[tuple[str, tuple[str, list[Any]]]]:
        directory, deleted_list = item
        deleted = set(deleted_list)
        for name, (rel, _schema) in sorted(TABLES.items()):
            table = _read_table(storage.join(directory, rel))
            by_doc: dict[str, list[Any]] = {}
            for r in table.to_pylist():
                if r["chunk_id"] in deleted:
                    continue
                if name == MENTIONS:
                    row: Any = Mention(**r)
                elif name == STATEMENTS:
                    row = Statement(**r)
                else:
                    row = (r["doc_id"], r["chunk_id"], r["short"], r["long"])
                by_doc.setdefault(r["doc_id"], []).append(row)
            for doc_id, rows in by_doc.items():
                yield doc_id, (name, rows)


def _kept_rows(item: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
    _, grouped = item
    if not grouped["keep"]:
        return
    for name, rows in grouped["rows"]:
        yield beam.pvalue.TaggedOutput(name, rows)


class ReadExtraction(beam.PTransform):
    """Kept segments' extraction -> ``{mentions, statements, acronyms}`` in the shape
    :class:`transforms.extract.ExtractKnowledge` gives (lists of rows).

    A document's rows are kept when its id is in ``keep``: they are joined by document
    id (one element per document and table, not per row, and no side input).

    Example:
        >>> kept = p | ReadExtraction([(segment_dir, deleted_chunks)], keep=unchanged_ids)

    Args:
        segments: each kept segment's directory and the chunk ids it has deleted.
        keep: ``PCollection[str]`` of the document ids whose rows are kept (the
            documents the refresh found unchanged).
    """

    def __init__(self, segments: Sequence[tuple[str, list[str]]], *, keep: Any) -> None:
        super().__init__()
        self._segments = [(path, sorted(deleted)) for path, deleted in segments]
        self._keep = keep

    def expand(self, pipeline: beam.pvalue.PBegin) -> Any:
        rows = (
            pipeline
            | "KeptSegments" >> beam.Create(self._segments)
            | "ReadSegmentExtraction" >> beam.ParDo(_ReadExtractionFn())
        )
        keep = self._keep | "KeyKept" >> beam.Map(lambda doc_id: (doc_id, None))
        out = (
            {"rows": rows, "keep": keep}
            | "JoinKept" >> beam.CoGroupByKey()
            | "KeptRows" >> beam.FlatMap(_kept_rows).with_outputs(MENTIONS, STATEMENTS, ACRONYMS)
        )
        return {
            MENTIONS: typed(out[MENTIONS], list[Mention]),
            STATEMENTS: typed(out[STATEMENTS], list[Statement]),
            ACRONYMS: out[ACRONYMS],
        }


DOCUMENTS = "documents"


class _ReadLiveRowsFn(beam.DoFn):
    """(segment directory, deleted document ids, deleted chunk ids, moved sources) -> its
    live ``EmbeddedChunk`` rows, and its live ``Document`` rows on the ``documents`` tag
    (a moved document with the source it comes from now)."""

    def process(
        self, item: tuple[str, list[str], list[str], list[tuple[str, str]]]
    ) -> Iterator[Any]:
        directory, deleted_docs_list, deleted_chunks_list, moved_list = item
        deleted_docs, deleted_chunks = set(deleted_docs_list), set(deleted_chunks_list)
        moved = dict(moved_list)
        docs = _read_table(storage.join(directory, bundles.DOCUMENTS))
        for row in docs.to_pylist():
            if row["doc_id"] in moved:
                row["source_uri"] = moved[row["doc_id"]]
            if row["doc_id"] not in deleted_docs:
                yield beam.pvalue.TaggedOutput(DOCUMENTS, Document(**row))
        chunks = _read_table(storage.join(directory, bundles.CHUNKS))
        for row in chunks.to_pylist():
            if row["chunk_id"] in deleted_chunks:
                continue
            chunk = Chunk(**{name: row[name] for name in CHUNK_SCHEMA.names})
            yield EmbeddedChunk(chunk=chunk, embedding=[float(x) for x in row["embedding"]])


class ReadLiveRows(beam.PTransform):
    """Segments -> ``{documents: PCollection[Document], chunks: PCollection[EmbeddedChunk]}``
    of their live rows, vectors included (compaction embeds nothing).

    Example:
        >>> live = p | ReadLiveRows([(segment_dir, deleted_docs, deleted_chunks)])

    Args:
        segments: each segment's directory, its deleted document and chunk ids, and
            optionally the documents it holds that moved (``doc_id -> source_uri``,
            ``SegmentRef.sources``): their rows are read with that source, so compaction
            folds the record of a move into the documents it writes.
    """

    def __init__(self, segments: Sequence[tuple[Any, ...]]) -> None:
        super().__init__()
        self._segments = [
            (path, sorted(d), sorted(c), sorted(dict(moved[0] if moved else {}).items()))
            for path, d, c, *moved in segments
        ]

    def expand(self, pipeline: beam.pvalue.PBegin) -> Any:
        out = (
            pipeline
            | "Segments" >> beam.Create(self._segments)
            | "ReadLive" >> beam.ParDo(_ReadLiveRowsFn()).with_outputs(DOCUMENTS, main="chunks")
        )
        return {
            DOCUMENTS: typed(out[DOCUMENTS], Document),
            "chunks": typed(out["chunks"], EmbeddedChunk),
        }
