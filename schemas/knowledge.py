"""Knowledge-layer records (mentions, statements, entities, relations, communities)
and their pyarrow schemas.

Contract: as in ``schemas.records``, each NamedTuple has a sibling schema with the
same fields in the same order. Character offsets are into ``Document.text``
(``document.text[start:end] == mention.text``). Ids are hashes of content.
"""

import hashlib
from typing import NamedTuple

import pyarrow as pa

_SEP = "\x1f"


def stable_id(kind: str, *parts: object) -> str:
    """Deterministic id: sha256 hex of ``kind ␟ part ␟ ...``."""
    payload = _SEP.join((kind, *(str(p) for p in parts))).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


class Mention(NamedTuple):
    """A named entity or salient noun phrase in a chunk.

    ``label`` is the spaCy entity label, or ``NOUN_CHUNK``; ``norm`` is the
    normalized surface form; ``entity_id`` is empty until canonicalization.
    """

    mention_id: str
    chunk_id: str
    doc_id: str
    start: int
    end: int
    text: str
    label: str
    norm: str
    entity_id: str = ""


class Statement(NamedTuple):
    """One relation as stated in one sentence, before canonicalization.

    ``object_mention_id`` is ``None`` for a literal object (e.g. ``500 INR``).
    ``sentence_start``/``sentence_end`` bound the stating sentence in the document.
    """

    statement_id: str
    chunk_id: str
    doc_id: str
    subject_mention_id: str
    predicate: str
    object_mention_id: str | None
    object_text: str
    category: str
    confidence: float
    sentence_start: int
    sentence_end: int


class Entity(NamedTuple):
    """A canonical entity: its chosen name, every alias with its count, its chunks.

    ``alias_norms`` is each alias's ``algorithms.normalize.normalize_surface``, computed
    at build time so that a reader's alias index is read, not normalized on every open.
    """

    entity_id: str
    name: str
    label: str
    norm: str
    mention_count: int
    aliases: list[str]
    alias_counts: list[int]
    chunk_ids: list[str]
    alias_norms: list[str]


class Relation(NamedTuple):
    """A canonical relation between entities (or an entity and a literal).

    ``summary`` is the one sentence embedded for the relation surface;
    ``sentence_*`` lists are parallel and give every stating sentence's span.
    """

    relation_id: str
    subject_id: str
    predicate: str
    object_id: str | None
    object_text: str
    category: str
    confidence: float
    support: int
    chunk_ids: list[str]
    sentence_doc_ids: list[str]
    sentence_starts: list[int]
    sentence_ends: list[int]
    summary: str


class Community(NamedTuple):
    """A Louvain community at one dendrogram level, with its extractive report.

    ``level`` 0 is the finest partition; ``parent_id`` is the community one level up.
    ``chunk_ids`` are its representative chunks; ``evidence_chunk_ids`` are every
    chunk supporting one of its relations (the report's provenance).
    """

    community_id: str
    level: int
    parent_id: str | None
    title: str
    size: int
    entity_ids: list[str]
    relation_ids: list[str]
    chunk_ids: list[str]
    evidence_chunk_ids: list[str]
    report: str


def _str(name: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, pa.string(), nullable=nullable)


def _list(name: str, item: pa.DataType) -> pa.Field:
    return pa.field(name, pa.list_(pa.field("item", item, nullable=False)), nullable=False)


MENTION_SCHEMA = pa.schema(
    [
        _str("mention_id"),
        _str("chunk_id"),
        _str("doc_id"),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("end", pa.int64(), nullable=False),
        _str("text"),
        _str("label"),
        _str("norm"),
        _str("entity_id"),
    ]
)

STATEMENT_SCHEMA = pa.schema(
    [
        _str("statement_id"),
        _str("chunk_id"),
        _str("doc_id"),
        _str("subject_mention_id"),
        _str("predicate"),
        _str("object_mention_id", nullable=True),
        _str("object_text"),
        _str("category"),
        pa.field("confidence", pa.float32(), nullable=False),
        pa.field("sentence_start", pa.int64(), nullable=False),
        pa.field("sentence_end", pa.int64(), nullable=False),
    ]
)

ACRONYM_SCHEMA = pa.schema([_str("doc_id"), _str("chunk_id"), _str("short"), _str("long")])
"""One acronym definition a chunk states ("body mass index (BMI)"), normalized, as a segment
keeps it for canonicalization without parsing the chunk again."""

ENTITY_SCHEMA = pa.schema(
    [
        _str("entity_id"),
        _str("name"),
        _str("label"),
        _str("norm"),
        pa.field("mention_count", pa.int32(), nullable=False),
        _list("aliases", pa.string()),
        _list("alias_counts", pa.int32()),
        _list("chunk_ids", pa.string()),
        _list("alias_norms", pa.string()),
    ]
)

RELATION_SCHEMA = pa.schema(
    [
        _str("relation_id"),
        _str("subject_id"),
        _str("predicate"),
        _str("object_id", nullable=True),
        _str("object_text"),
        _str("category"),
        pa.field("confidence", pa.float32(), nullable=False),
        pa.field("support", pa.int32(), nullable=False),
        _list("chunk_ids", pa.string()),
        _list("sentence_doc_ids", pa.string()),
        _list("sentence_starts", pa.int64()),
        _list("sentence_ends", pa.int64()),
        _str("summary"),
    ]
)

COMMUNITY_SCHEMA = pa.schema(
    [
        _str("community_id"),
        pa.field("level", pa.int32(), nullable=False),
        _str("parent_id", nullable=True),
        _str("title"),
        pa.field("size", pa.int32(), nullable=False),
        _list("entity_ids", pa.string()),
        _list("relation_ids", pa.string()),
        _list("chunk_ids", pa.string()),
        _list("evidence_chunk_ids", pa.string()),
        _str("report"),
    ]
)


def with_vectors(schema: pa.Schema) -> pa.Schema:
    """``schema`` plus ``ann_key`` and a nullable ``embedding`` (null: not embedded).

    The embedding is a variable-length list because Parquet readers reject a null
    inside a fixed-size list; validation checks every non-null one has the model's
    dimension.
    """
    return schema.append(pa.field("ann_key", pa.uint64(), nullable=False)).append(
        pa.field("embedding", pa.list_(pa.field("item", pa.float32(), nullable=False)))
    )


KNOWLEDGE_RECORDS = (Mention, Statement, Entity, Relation, Community)
