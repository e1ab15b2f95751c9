"""Wiring of one segment's chunk-level files: documents, chunks with vectors, the chunk
HNSW file and its access-class partitions, and BM25 (the extraction is written by the
knowledge layer, :mod:`pipelines.knowledge`).

Shared by the build (a new or refreshed segment) and compaction (live rows merged).
"""

import apache_beam as beam

from schemas import DOCUMENT_SCHEMA
from schemas.manifest import ModelFingerprint
from store import bundles, storage
from store.config import BuildConfig
from transforms.ann import BuildAnnIndex, BuildAnnPartitions
from transforms.gather import CollectAll
from transforms.lexical import BuildLexicalIndex
from transforms.write import WriteTable, chunk_rows_table, records_table


def write_segment(
    documents: beam.PCollection,
    embedded: beam.PCollection,
    *,
    staging: str,
    config: BuildConfig,
    model: ModelFingerprint,
) -> None:
    """Write ``documents`` (``Document``) and ``embedded`` (``EmbeddedChunk``) as the
    segment in ``staging``: every table sorted by id, so the bytes are reproducible."""
    join = storage.join
    _ = documents | "WriteDocuments" >> WriteTable(
        join(staging, bundles.DOCUMENTS),
        to_table=lambda rows: records_table(rows, DOCUMENT_SCHEMA),
        sort_key=lambda d: d.doc_id,
    )
    dimension = model.dimension
    # One gathering of the chunk rows feeds the chunk table, its index and BM25.
    collected = embedded | "CollectEmbedded" >> CollectAll()
    _ = collected | "WriteChunks" >> WriteTable(
        join(staging, bundles.CHUNKS),
        to_table=lambda rows: chunk_rows_table(rows, dimension),
        sort_key=lambda e: e.chunk.chunk_id,
        collected=True,
    )
    _ = collected | "BuildChunkIndex" >> BuildAnnIndex(
        join(staging, bundles.CHUNK_INDEX), dimension=dimension, config=config.ann, collected=True
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
