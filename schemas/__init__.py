"""Record shapes shared by the build pipeline and the query module.

Every element that crosses a transform is a NamedTuple defined here, and every
Parquet table is written with the explicit pyarrow schema defined beside it.
"""

from schemas.knowledge import (
    ACRONYM_SCHEMA,
    COMMUNITY_SCHEMA,
    ENTITY_SCHEMA,
    MENTION_SCHEMA,
    RELATION_SCHEMA,
    STATEMENT_SCHEMA,
    Community,
    Entity,
    Mention,
    Relation,
    Statement,
    stable_id,
    with_vectors,
)
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
    "ACRONYM_SCHEMA",
    "CHUNK_SCHEMA",
    "COMMUNITY_SCHEMA",
    "DEAD_LETTER_SCHEMA",
    "DOCUMENT_SCHEMA",
    "ENTITY_SCHEMA",
    "MENTION_SCHEMA",
    "RELATION_SCHEMA",
    "STATEMENT_SCHEMA",
    "Chunk",
    "Community",
    "DeadLetter",
    "Document",
    "EmbeddedChunk",
    "Entity",
    "Mention",
    "Relation",
    "Statement",
    "ann_key",
    "chunk_id",
    "chunk_table_schema",
    "normalize_text",
    "register_coders",
    "revision_of",
    "stable_id",
    "with_vectors",
]
