"""The bundle manifest: what a bundle holds and how to check it.

``manifest.json`` is validated against :class:`Manifest` on load; a schema
version this code does not understand is refused.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 5
"""Layout version written by this evidex: 2 added the bundled query encoder (``query_encoder``
and ``encoder/``); 3 made a bundle a generation of segments (``segments``, ``extraction/``);
4 lets one bundle write several segments (``parts/<k>/``, :attr:`SegmentRef.part`); 5 records
documents read from a new source without being rewritten (:attr:`SegmentRef.sources`)."""
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4, 5)
"""Layouts this evidex reads: a version-1 bundle is one without ``query_encoder``; a version-1
or -2 bundle is a generation of one segment, its own, with no deletions."""


class FileEntry(BaseModel):
    """Checksum and size of one file in the bundle."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str = Field(description="sha256 hex of the file's bytes", pattern=r"^[0-9a-f]{64}$")
    size: int = Field(description="size in bytes", ge=0)


class ModelFingerprint(BaseModel):
    """Identifies the embedding model a bundle's vectors came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="model name or local path as given to the build")
    dimension: int = Field(description="embedding width", gt=0)
    max_seq_length: int = Field(description="token window the model truncates to", gt=0)
    tokenizer_sha256: str = Field(description="sha256 of the serialized tokenizer")
    normalized: bool = Field(description="whether vectors are L2-normalized")
    spacy_pipeline: str | None = Field(None, description="spaCy pipeline package, if used")
    spacy_version: str | None = Field(None, description="version of that spaCy pipeline")


class IndexInfo(BaseModel):
    """Header facts of one USearch file, checked before it is memory-mapped."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str = Field(description="USearch metric kind, e.g. 'cos'")
    dimension: int = Field(gt=0)
    count: int = Field(ge=0, description="vectors present")


class QueryEncoderInfo(BaseModel):
    """The bundle's own query encoder: its model as an ONNX graph and its tokenizer as a
    ``tokenizers`` JSON file, checked against the PyTorch model when the bundle was built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    graph: str = Field(description="relative path of the ONNX graph (a protobuf, never a pickle)")
    tokenizer: str = Field(description="relative path of the tokenizers JSON file")
    inputs: list[str] = Field(description="graph inputs, in order, e.g. input_ids, attention_mask")
    opset: int = Field(gt=0, description="ONNX operator set the graph was exported with")
    max_deviation: float = Field(
        ge=0, description="largest vector-component difference from PyTorch on the probe texts"
    )
    probes: int = Field(gt=0, description="probe texts the deviation was measured on")


class SegmentRef(BaseModel):
    """One segment a generation reads: the chunk-level files (documents, chunks, their HNSW
    files, BM25 and the chunks' extraction) that the bundle ``bundle_id`` wrote, and what
    of them is deleted since.

    A segment never changes once written; a later generation lists it again by reference,
    with a deletion set that only grows, until compaction writes its live rows anew.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bundle_id: str = Field(description="the bundle whose directory holds the segment's files")
    part: str | None = Field(
        None,
        description="the folder of that bundle holding the segment (``parts/<k>``, with its "
        "own manifest) when the bundle wrote several; absent: the bundle's top-level files",
        pattern=r"^parts/[0-9]+$",
    )
    digest: str = Field(
        description="sha256 over the segment's files and their checksums, as that bundle's "
        "manifest lists them (see store.segments.segment_digest)",
        pattern=r"^[0-9a-f]{64}$",
    )
    documents: int = Field(ge=0, description="documents the segment holds, deleted or not")
    chunks: int = Field(ge=0, description="chunk rows the segment holds, deleted or not")
    deleted_documents: list[str] = Field(
        default_factory=list,
        description="sorted ids of the segment's documents changed or removed since it was written",
    )
    deleted_chunks: list[str] = Field(
        default_factory=list, description="sorted chunk ids of those documents"
    )
    sources: dict[str, str] = Field(
        default_factory=dict,
        description="doc_id -> source_uri of the segment's live documents that a later input "
        "held at another location with nothing else changed (moved or re-exported): they "
        "stay in the segment as written, and this is where they come from now",
    )

    @property
    def key(self) -> str:
        """The segment's name within a generation: its bundle id, and its part if any."""
        return f"{self.bundle_id}/{self.part}" if self.part else self.bundle_id


class KnowledgeState(BaseModel):
    """How current a generation's knowledge tables are."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    communities_from: str = Field(
        description="the generation whose entity graph the communities were clustered on"
    )
    entities_changed: float = Field(
        ge=0,
        description="share of the canonical entities added, removed or changed in their "
        "chunks since the communities were clustered (0: fresh)",
    )


class Manifest(BaseModel):
    """Contents of ``manifest.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = Field(description="bundle layout version")
    evidex_version: str
    bundle_id: str
    parent_bundle_id: str | None = None
    created_at: str = Field(description="UTC ISO-8601 time the bundle was finalized")
    input_fingerprint: str = Field(description="sha256 over sorted (doc_id, revision) pairs")
    config_hash: str = Field(description="sha256 of the canonical JSON of `config`")
    config: dict[str, Any] = Field(description="resolved build configuration")
    model: ModelFingerprint
    row_counts: dict[str, int]
    dead_letter_counts: dict[str, int]
    delta: dict[str, Any] | None = Field(
        None,
        description="parent bundle id and counts of new/changed/unchanged/deleted documents "
        "and of chunks embedded/reused",
    )
    indexes: dict[str, IndexInfo] = Field(description="USearch file -> header facts")
    files: dict[str, FileEntry] = Field(description="relative path -> checksum and size")
    query_encoder: QueryEncoderInfo | None = Field(
        None, description="the ONNX query encoder the bundle carries (absent in older bundles)"
    )
    segments: list[SegmentRef] = Field(
        default_factory=list,
        description="the segments the generation reads, oldest first (empty in bundles before "
        "schema version 3: the bundle is its own single segment)",
    )
    knowledge_state: KnowledgeState | None = Field(
        None, description="staleness of the knowledge tables (absent without them)"
    )
