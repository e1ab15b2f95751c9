"""Typed records (NamedTuples) and their pyarrow schemas.

Contract: each NamedTuple has a sibling ``pa.schema`` with the same field names
in the same order; ``tests/schemas`` checks the parity. Ids are deterministic
hashes of content, never random.
"""

import hashlib
import unicodedata
from typing import NamedTuple

import pyarrow as pa

_SEP = "\x1f"  # ASCII unit separator between hashed id parts.


class Document(NamedTuple):
    """One source document, its text normalized (NFC, ``\\n`` newlines).

    ``valid_from`` / ``valid_to`` are ISO-8601 dates (``YYYY-MM-DD``) bounding
    when the document's content holds; ``None`` means open-ended.

    Example:
        >>> Document(doc_id="guide.md", revision=revision_of("Hi"), title="Guide",
        ...          text="Hi", source_uri="file:///guide.md", source_role="guide",
        ...          access_class="public", language="en", metadata_json="{}")
    """

    doc_id: str
    revision: str
    title: str
    text: str
    source_uri: str
    source_role: str
    access_class: str
    language: str
    metadata_json: str
    valid_from: str | None = None
    valid_to: str | None = None


class Chunk(NamedTuple):
    """A contiguous piece of a document: ``text == document.text[start:end]``.

    ``heading_path`` names the Markdown sections the chunk starts in, outermost
    first, joined by `` > `` (e.g. ``Guide > Limits > UPI Lite``). ``page_start``
    and ``page_end`` are the 1-based first and last PDF pages the chunk's text is
    on (``None`` for documents without pages).
    """

    chunk_id: str
    doc_id: str
    revision: str
    chunk_index: int
    start: int
    end: int
    text: str
    n_tokens: int
    access_class: str
    heading_path: str = ""
    page_start: int | None = None
    page_end: int | None = None


class EmbeddedChunk(NamedTuple):
    """A chunk with its unit-norm embedding."""

    chunk: Chunk
    embedding: list[float]


class DeadLetter(NamedTuple):
    """A record a stage could not process, with the reason."""

    stage: str
    record_id: str
    error_type: str
    message: str


DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("revision", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("source_uri", pa.string(), nullable=False),
        pa.field("source_role", pa.string(), nullable=False),
        pa.field("access_class", pa.string(), nullable=False),
        pa.field("language", pa.string(), nullable=False),
        pa.field("metadata_json", pa.string(), nullable=False),
        pa.field("valid_from", pa.string(), nullable=True),
        pa.field("valid_to", pa.string(), nullable=True),
    ]
)

CHUNK_SCHEMA = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("revision", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32(), nullable=False),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("end", pa.int64(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("access_class", pa.string(), nullable=False),
        pa.field("heading_path", pa.string(), nullable=False),
        pa.field("page_start", pa.int32(), nullable=True),
        pa.field("page_end", pa.int32(), nullable=True),
    ]
)


def chunk_table_schema(dimension: int) -> pa.Schema:
    """Schema of ``chunks.parquet``: chunk fields, the ANN key and the embedding.

    Args:
        dimension: embedding width (e.g. 384 for all-MiniLM-L6-v2).
    """
    return CHUNK_SCHEMA.append(pa.field("ann_key", pa.uint64(), nullable=False)).append(
        pa.field("embedding", pa.list_(pa.float32(), dimension), nullable=False)
    )


DEAD_LETTER_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("error_type", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
    ]
)


def normalize_text(text: str) -> str:
    """Unicode NFC with ``\\n`` line endings: the form every span refers to."""
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


def revision_of(normalized_text: str) -> str:
    """Document revision: sha256 hex of the normalized text."""
    return hashlib.sha256(normalized_text.encode("utf-8")).hexdigest()


def chunk_id(doc_id: str, index: int, text: str) -> str:
    """Deterministic chunk id: ``sha256(doc_id ␟ index ␟ text)`` hex."""
    payload = _SEP.join((doc_id, str(index), text)).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def ann_key(chunk_id_hex: str) -> int:
    """USearch key for a chunk: the first 64 bits of its id hash."""
    return int(chunk_id_hex[:16], 16)


def register_coders() -> None:
    """Register Beam ``RowCoder`` for every record type (call before building)."""
    from apache_beam import coders

    from schemas.knowledge import KNOWLEDGE_RECORDS

    for record in (Document, Chunk, EmbeddedChunk, DeadLetter, *KNOWLEDGE_RECORDS):
        coders.registry.register_coder(record, coders.RowCoder)
