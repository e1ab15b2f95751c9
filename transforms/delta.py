"""Delta builds: reuse the parent bundle's chunks and vectors for unchanged documents.

A document whose ``(doc_id, revision)`` is in the parent bundle is *unchanged*:
its chunk rows and vectors are read back from the parent's ``chunks.parquet``
instead of being chunked and embedded again. Everything else is *changed*
(new or edited) and goes through chunking and embedding. Documents absent
from the input simply do not appear in the new bundle.

Reuse is only sound when chunking and the embedding model are the same as the
parent's; :func:`reusable_parent` decides that before the pipeline is built.
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from schemas import CHUNK_SCHEMA, Chunk, Document, EmbeddedChunk
from transforms.tags import typed

logger = logging.getLogger(__name__)

CHANGED = "changed"
UNCHANGED = "unchanged"


class _SplitFn(beam.DoFn):
    def __init__(self) -> None:
        self._changed = Metrics.counter("delta", "documents_changed")
        self._unchanged = Metrics.counter("delta", "documents_unchanged")

    def process(self, item: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
        _, grouped = item
        parent = set(grouped["parent"])
        for doc in grouped["docs"]:
            if doc.revision in parent:
                self._unchanged.inc()
                yield TaggedOutput(UNCHANGED, (doc.doc_id, (doc.doc_id, doc.revision)))
            else:
                self._changed.inc()
                yield doc


def _row_to_embedded(row: dict[str, Any]) -> EmbeddedChunk:
    chunk = Chunk(**{name: row[name] for name in CHUNK_SCHEMA.names})
    return EmbeddedChunk(chunk=chunk, embedding=[float(x) for x in row["embedding"]])


class _ReuseRowsFn(beam.DoFn):
    """(doc_id, {unchanged, rows}) -> the parent's EmbeddedChunks of an unchanged document."""

    def __init__(self) -> None:
        self._reused = Metrics.counter("delta", "chunks_reused")

    def process(self, item: tuple[str, dict[str, list[Any]]]) -> Iterator[EmbeddedChunk]:
        _, grouped = item
        if not grouped["unchanged"]:
            return
        _, revision = grouped["unchanged"][0]
        for row in grouped["rows"]:
            if row["revision"] == revision:
                self._reused.inc()
                yield _row_to_embedded(row)


class SplitByDelta(beam.PTransform):
    """Split documents against the parent bundle, and read back reusable chunk rows.

    Example:
        >>> out = docs | SplitByDelta(parent_revisions, parent_chunks_path)
        >>> out["changed"]      # PCollection[Document] to chunk and embed
        >>> out["reused"]       # PCollection[EmbeddedChunk] from the parent

    Args:
        parent_revisions: ``(doc_id, revision)`` pairs of the parent bundle.
        parent_chunks: path of the parent's ``chunks.parquet``.
    """

    def __init__(self, parent_revisions: list[tuple[str, str]], parent_chunks: str) -> None:
        super().__init__()
        self._revisions = sorted(parent_revisions)
        self._chunks = parent_chunks

    def expand(self, docs: beam.PCollection) -> Any:
        pipeline = docs.pipeline
        revisions = pipeline | "ParentRevisions" >> beam.Create(self._revisions, reshuffle=False)
        split = (
            {
                "docs": docs
                | "KeyDocs"
                >> beam.Map(lambda d: (d.doc_id, d)).with_output_types(tuple[str, Document]),
                "parent": revisions,
            }
            | "JoinParent" >> beam.CoGroupByKey()
            | "SplitChangedUnchanged"
            >> beam.ParDo(_SplitFn()).with_outputs(UNCHANGED, main=CHANGED)
        )
        rows = (
            pipeline
            | "ReadParentChunks" >> beam.io.ReadFromParquet(self._chunks)
            | "KeyRowsByDoc" >> beam.Map(lambda r: (r["doc_id"], r))
        )
        reused = (
            {"unchanged": split[UNCHANGED], "rows": rows}
            | "JoinUnchanged" >> beam.CoGroupByKey()
            | "ReuseRows" >> beam.ParDo(_ReuseRowsFn())
        )
        return {CHANGED: typed(split[CHANGED], Document), "reused": typed(reused, EmbeddedChunk)}


def reusable_parent(parent_manifest: Any, *, config: Any, model: Any) -> bool:
    """Whether the parent's chunks and vectors are valid for this build's config and model."""
    if parent_manifest is None:
        return False
    same_chunking = parent_manifest.config.get("chunk") == config.chunk.model_dump(mode="json")
    same_model = (
        parent_manifest.model.tokenizer_sha256 == model.tokenizer_sha256
        and parent_manifest.model.dimension == model.dimension
        and parent_manifest.config.get("embed", {}).get("model") == config.embed.model
    )
    return bool(same_chunking and same_model)


def _known_vector(row: dict[str, Any], *, text_column: str) -> Iterator[tuple[str, list[float]]]:
    from transforms.embed import text_key

    if row.get("embedding") is not None:
        yield text_key(row[text_column]), [float(x) for x in row["embedding"]]


class ReadKnownVectors(beam.PTransform):
    """A parent table's embedded texts -> ``PCollection[(text_key, vector)]`` to reuse.

    Example:
        >>> known = p | ReadKnownVectors(parent_relations_path, text_column="summary")
    """

    def __init__(self, path: str, *, text_column: str) -> None:
        super().__init__()
        self._path = path
        self._text_column = text_column

    def expand(self, pipeline: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pipeline
            | "ReadParentTable"
            >> beam.io.ReadFromParquet(self._path, columns=[self._text_column, "embedding"])
            | "KnownVectors" >> beam.FlatMap(_known_vector, text_column=self._text_column)
        )
