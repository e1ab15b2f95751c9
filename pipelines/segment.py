"""Wiring of a segment's chunk-level files: documents, chunks with vectors, the chunk
HNSW file and its access-class partitions, and BM25 (the extraction is written by the
knowledge layer, :mod:`pipelines.knowledge`).

Shared by the build (a new or refreshed segment, or the ``K`` segments of a batch build)
and compaction (live rows merged).
"""

from collections.abc import Sequence
from typing import Any

import apache_beam as beam

from schemas import DOCUMENT_SCHEMA
from schemas.manifest import ModelFingerprint
from store import bundles, storage
from store.config import BuildConfig
from store.segments import part_folder, part_of
from transforms.ann import BuildAnnIndex, BuildAnnPartitions, write_index, write_partitions
from transforms.gather import CollectAll
from transforms.lexical import BuildLexicalIndex, write_bm25
from transforms.write import WriteTable, chunk_rows_table, records_table, write_rows


class WriteSegment(beam.PTransform):
    """``{"documents": Document, "embedded": EmbeddedChunk}`` -> the segment's files in
    ``staging``: every table sorted by id, so the bytes are reproducible.

    Memory bound: the segment's chunk rows (about 1.6 KB each with a 384-d vector) and
    their HNSW graph on one worker.
    """

    def __init__(self, staging: str, *, config: BuildConfig, model: ModelFingerprint) -> None:
        super().__init__()
        self._staging = staging
        self._config = config
        self._model = model

    def expand(self, inputs: Any) -> beam.pvalue.PDone:
        documents, embedded = inputs["documents"], inputs["embedded"]
        join, staging, config = storage.join, self._staging, self._config
        _ = documents | "WriteDocuments" >> WriteTable(
            join(staging, bundles.DOCUMENTS),
            to_table=lambda rows: records_table(rows, DOCUMENT_SCHEMA),
            sort_key=lambda d: d.doc_id,
        )
        dimension = self._model.dimension
        # One gathering of the chunk rows feeds the chunk table, its index and BM25.
        collected = embedded | "CollectEmbedded" >> CollectAll()
        _ = collected | "WriteChunks" >> WriteTable(
            join(staging, bundles.CHUNKS),
            to_table=lambda rows: chunk_rows_table(rows, dimension),
            sort_key=lambda e: e.chunk.chunk_id,
            collected=True,
        )
        _ = collected | "BuildChunkIndex" >> BuildAnnIndex(
            join(staging, bundles.CHUNK_INDEX),
            dimension=dimension,
            config=config.ann,
            collected=True,
        )
        _ = embedded | "BuildChunkPartitions" >> BuildAnnPartitions(
            staging, dimension=dimension, config=config.ann
        )
        _ = (
            collected
            | "ChunksOfEmbedded" >> beam.Map(lambda rows: [e.chunk for e in rows])
            | "BuildLexicalIndex"
            >> BuildLexicalIndex(
                join(staging, bundles.LEXICAL_DIR), config=config.lexical, collected=True
            )
        )
        return beam.pvalue.PDone(documents.pipeline)


def _document_part(document: Any, parts: int) -> int:
    return part_of(document.doc_id, parts)


def _chunk_part(embedded: Any, parts: int) -> int:
    return part_of(embedded.chunk.doc_id, parts)


def write_segments(
    documents: beam.PCollection,
    embedded: beam.PCollection,
    *,
    staging: str,
    config: BuildConfig,
    model: ModelFingerprint,
    parts: int = 1,
) -> None:
    """Write ``documents`` and their ``embedded`` chunks as one segment in ``staging``, or
    (``parts`` > 1) as ``parts`` segments in ``staging/parts/<k>``, each with the
    documents whose id hashes to ``k`` (:func:`store.segments.part_of`) and built on its
    own, so no worker holds every chunk."""
    if parts <= 1:
        _ = {"documents": documents, "embedded": embedded} | "WriteSegment" >> WriteSegment(
            staging, config=config, model=model
        )
        return
    split_docs = documents | "SplitDocuments" >> beam.Partition(_document_part, parts)
    split_chunks = embedded | "SplitChunks" >> beam.Partition(_chunk_part, parts)
    for number in range(parts):
        inputs = {"documents": split_docs[number], "embedded": split_chunks[number]}
        _ = inputs | f"WriteSegment{number}" >> WriteSegment(
            storage.join(staging, part_folder(number)), config=config, model=model
        )


def write_segment_rows(
    staging: str,
    documents: Sequence[Any],
    embedded: Sequence[Any],
    *,
    config: BuildConfig,
    model: ModelFingerprint,
) -> None:
    """What :class:`WriteSegment` writes, from rows in memory: the stream's committer
    (``pipelines.commit``) turns one window's documents and embedded chunks into a segment
    with the same writers, without a pipeline of its own."""
    join, dimension = storage.join, model.dimension
    write_rows(
        join(staging, bundles.DOCUMENTS),
        list(documents),
        to_table=lambda rows: records_table(rows, DOCUMENT_SCHEMA),
        sort_key=lambda d: d.doc_id,
    )
    write_rows(
        join(staging, bundles.CHUNKS),
        list(embedded),
        to_table=lambda rows: chunk_rows_table(rows, dimension),
        sort_key=lambda e: e.chunk.chunk_id,
    )
    write_index(
        embedded, join(staging, bundles.CHUNK_INDEX), dimension=dimension, config=config.ann
    )
    write_partitions(embedded, staging, dimension=dimension, config=config.ann)
    write_bm25(
        [e.chunk for e in embedded], join(staging, bundles.LEXICAL_DIR), config=config.lexical
    )
