"""Refreshes: split the input against the active generation's live documents.

A document whose ``(doc_id, state)`` is live in the parent generation (the same
revision, and the same title, source, access class and other fields) is
*unchanged*: it stays in the segment that holds it, nothing about it is read,
chunked, embedded or parsed again. One that differs only in where it was read from
(a re-exported file, a renamed folder, a new date partition: the same
``(doc_id, content_state)``) is *moved*: it stays where it is too, and only its new
source is recorded (the generation's segment ref, ``SegmentRef.sources``). Everything
else is *changed* (new or edited) and goes into the refresh's new segment. Documents
absent from the input are deleted from their segments by the launcher (see
``pipelines.build_index``).

Reuse is only sound when chunking and the embedding model are the same as the
parent's; :func:`reusable_parent` decides that before the pipeline is built.
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from schemas import DeadLetter, Document
from store.bundles import embedding_matrix
from store.segments import content_state, document_state
from transforms.gather import CollectAll
from transforms.ingest import duplicate_letter
from transforms.tags import typed

logger = logging.getLogger(__name__)

CHANGED = "changed"
UNCHANGED = "unchanged"
MOVED = "moved"
DUPLICATE = "duplicate"


class _SplitFn(beam.DoFn):
    def __init__(self, untouched: dict[str, str]) -> None:
        self._untouched = untouched
        self._changed = Metrics.counter("delta", "documents_changed")
        self._unchanged = Metrics.counter("delta", "documents_unchanged")
        self._moved = Metrics.counter("delta", "documents_moved")

    def process(self, item: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
        doc_id, grouped = item
        # Live in a file that did not change, and no explicit delete names it: it stays
        # (its id is among the kept batch, :func:`_kept_batch`).
        kept = doc_id in self._untouched and not grouped["deleted"]
        parent = set(grouped["parent"])
        for doc in grouped["docs"]:
            if kept:
                # The id is live from a file that did not change: that document stays.
                source = self._untouched[doc.doc_id]
                yield TaggedOutput(DUPLICATE, duplicate_letter(doc.doc_id, source, doc.source_uri))
            elif document_state(doc) in parent:
                self._unchanged.inc()
                yield TaggedOutput(UNCHANGED, [doc.doc_id])
            elif content_state(doc) in grouped.get("content", ()):
                # Read from elsewhere, nothing indexed changed: kept, its new source noted.
                self._moved.inc()
                yield TaggedOutput(UNCHANGED, [doc.doc_id])
                yield TaggedOutput(MOVED, (doc.doc_id, doc.source_uri))
            else:
                self._changed.inc()
                yield doc


def _kept_batch(untouched: list[str]) -> Any:
    """The untouched ids no delete names, as one batch (none when that is empty)."""

    def batch(deleted: list[str]) -> Iterator[list[str]]:
        gone = set(deleted)
        kept = [doc_id for doc_id in untouched if doc_id not in gone]
        if kept:
            yield kept

    return batch


class SplitByDelta(beam.PTransform):
    """Split documents against the parent generation's live document states.

    Example:
        >>> out = docs | SplitByDelta(parent_revisions, untouched={"a": "/in/a.txt"})
        >>> out["changed"]      # PCollection[Document] for the new segment
        >>> out["unchanged"]    # PCollection[list[str]]: batches of the ids of the
        ...                     # documents kept where they are
        >>> out["duplicate"]    # PCollection[DeadLetter]: ids an untouched file holds
        >>> out["moved"]        # PCollection[tuple[str, str]]: (doc_id, new source_uri)
        ...                     # of kept documents read from another location

    Args:
        parent_revisions: ``(doc_id, state)`` pairs live in the parent generation (see
            :func:`store.segments.document_state`).
        parent_contents: ``(doc_id, content_state)`` pairs live in the parent generation
            (:func:`store.segments.content_state`): a read document that matches one but
            not its state is moved (also among the unchanged ids). None: nothing moves.
        deletes: the input's explicit deletes (``PCollection[Tombstone]``): an untouched
            document they name is deleted, not kept.
        untouched: live documents kept without being read (their files did not change),
            each with its source file: they are unchanged (their pairs in
            ``parent_revisions`` are not needed), and a read document with one
            of their ids is a duplicate, dead-lettered (the untouched one stays: a refresh
            does not reread it to compare, where a full build keeps the record with the
            smaller source). They leave as one batch, not one element each: a window of a
            stream keeps thousands and reads a few.
    """

    def __init__(
        self,
        parent_revisions: list[tuple[str, str]],
        *,
        parent_contents: list[tuple[str, str]] | None = None,
        untouched: dict[str, str] | None = None,
        deletes: beam.PCollection | None = None,
    ) -> None:
        super().__init__()
        self._untouched = dict(untouched or {})
        self._revisions = sorted(r for r in parent_revisions if r[0] not in self._untouched)
        self._contents = sorted(c for c in parent_contents or () if c[0] not in self._untouched)
        self._deletes = deletes

    def expand(self, docs: beam.PCollection) -> Any:
        pipeline = docs.pipeline
        revisions = pipeline | "ParentRevisions" >> beam.Create(self._revisions, reshuffle=False)
        joined: dict[str, Any] = {"parent": revisions}
        if self._contents:
            joined["content"] = pipeline | "ParentContents" >> beam.Create(
                self._contents, reshuffle=False
            )
        deletes = self._deletes
        if deletes is None:
            deletes = pipeline | "NoDeletes" >> beam.Create([], reshuffle=False)
        deleted = deletes | "DeletedIds" >> beam.Map(lambda t: t.doc_id)
        split = (
            {
                "docs": docs
                | "KeyDocs"
                >> beam.Map(lambda d: (d.doc_id, d)).with_output_types(tuple[str, Document]),
                **joined,
                "deleted": deleted | "KeyDeleted" >> beam.Map(lambda doc_id: (doc_id, True)),
            }
            | "JoinParent" >> beam.CoGroupByKey()
            | "SplitChangedUnchanged"
            >> beam.ParDo(_SplitFn(self._untouched)).with_outputs(
                UNCHANGED, DUPLICATE, MOVED, main=CHANGED
            )
        )
        kept = (
            deleted
            | "GatherDeletedIds" >> CollectAll()
            | "KeptIds" >> beam.FlatMap(_kept_batch(sorted(self._untouched)))
        )
        return {
            CHANGED: typed(split[CHANGED], Document),
            UNCHANGED: (split[UNCHANGED], kept) | "UnchangedBatches" >> beam.Flatten(),
            DUPLICATE: typed(split[DUPLICATE], DeadLetter),
            MOVED: typed(split[MOVED], tuple[str, str]),
        }


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


def edited_vectors(
    doc_ids: list[str], *, where: dict[str, str]
) -> Iterator[tuple[str, np.ndarray]]:
    """The parent's chunk vectors of the edited documents among ``doc_ids`` (those
    ``where`` names: live in the parent, in the segment with that chunk table), keyed by
    text."""
    from transforms.embed import text_key

    by_table: dict[str, list[str]] = {}
    for doc_id in sorted(set(doc_ids)):
        if doc_id in where:
            by_table.setdefault(where[doc_id], []).append(doc_id)
    for path, ids in sorted(by_table.items()):
        with FileSystems.open(path) as handle:
            table = pq.read_table(
                pa.BufferReader(handle.read()), columns=["doc_id", "text", "embedding"]
            )
        table = table.filter(pc.is_in(table["doc_id"], value_set=pa.array(ids, pa.string())))
        table = table.filter(pc.is_valid(table["embedding"]))
        if not table.num_rows:
            continue
        matrix = embedding_matrix(table["embedding"])
        for text, vector in zip(table["text"].to_pylist(), matrix, strict=True):
            yield text_key(text), vector


class ReadEditedVectors(beam.PTransform):
    """``PCollection[Document]`` of a refresh's changed documents -> ``(text_key, vector)``
    of the chunks the edited ones (those live in the parent) had there, so a passage an
    edit left as it was keeps its vector instead of being embedded again.

    Only the chunk tables of the segments holding edited documents are read, once per
    refresh; a refresh of new documents only reads nothing.

    Args:
        where: each parent document a refresh may read again (id -> the chunk table of
            the segment holding it); documents kept unread are left out.
    """

    def __init__(self, where: dict[str, str]) -> None:
        super().__init__()
        self._where = dict(where)

    def expand(self, changed: beam.PCollection) -> beam.PCollection:
        return (
            changed
            | "ChangedIds" >> beam.Map(lambda d: d.doc_id)
            | "GatherChanged" >> CollectAll()
            | "EditedVectors" >> beam.FlatMap(edited_vectors, where=self._where)
        )
