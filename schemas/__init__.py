"""Record shapes shared by the build pipeline and the query module.

Every element that crosses a transform is a NamedTuple defined here, and every
Parquet table is written with the explicit pyarrow schema defined beside it.
"""

from schemas.records import (
    CHUNK_SCHEMA,
    DEAD_LETTER_SCHEMA,
    DOCUMENT_SCHEMA,
    Chunk,
    DeadLetter,
    Document,
    EmbeddedChunk,
    ann_key,
    chunk_id,
    chunk_table_schema,
    normalize_text,
    register_coders,
    revision_of,
)

__all__ = [
    "CHUNK_SCHEMA",
    "DEAD_LETTER_SCHEMA",
    "DOCUMENT_SCHEMA",
    "Chunk",
    "DeadLetter",
    "Document",
    "EmbeddedChunk",
    "ann_key",
    "chunk_id",
    "chunk_table_schema",
    "normalize_text",
    "register_coders",
    "revision_of",
]
