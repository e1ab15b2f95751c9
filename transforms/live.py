"""What a stream window need not process again: the documents the active generation
already holds in the same state, and the vectors of the passages an edit left as they
were. Both read the active generation when they run (again whenever ``ACTIVE`` moves),
not when the pipeline is built: a stream's windows build on one another.
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from schemas import Document
from store import bundles, storage
from store.activation import read_active
from store.segments import LiveDocument, document_state, live_revisions, open_segments
from transforms.delta import edited_vectors
from transforms.gather import Gather

logger = logging.getLogger(__name__)

SEEN = "seen"
"""Tag of :class:`SkipLive`'s output of every document id read in the window."""


class ActiveView:
    """The active generation's live documents, as of the last :meth:`read` (which reads
    them again only when ``ACTIVE`` moved).

    ``documents()`` is empty when nothing is active or the active generation predates
    segments (the stream's committer then hands the window to a full refresh).
    """

    def __init__(self, root: str) -> None:
        self._root = root
        self._active: str | None = None
        self._live: dict[str, LiveDocument] = {}
        self._segments: list[Any] = []
        self._tables: dict[str, str] | None = None

    def read(self) -> None:
        """Look at ``ACTIVE`` again, and read its generation if it moved."""
        active = read_active(self._root)
        if active == self._active:
            return
        self._active, self._live, self._segments, self._tables = active, {}, [], None
        if active is None:
            return
        path = bundles.bundle_path(self._root, active)
        try:
            manifest = bundles.read_manifest(path)
            if not manifest.segments:
                return
            segments = open_segments(
                path, manifest, verify=False, locate=lambda b: bundles.bundle_path(self._root, b)
            )
            self._live, self._segments = live_revisions(segments), segments
        except (bundles.BundleError, OSError, ValueError) as exc:
            logger.warning("active generation %s unreadable (%s): nothing skipped", active, exc)

    @property
    def active(self) -> str | None:
        return self._active

    def documents(self) -> dict[str, LiveDocument]:
        """Each live document of the active generation (id -> where, in what state)."""
        return self._live

    def chunk_tables(self) -> dict[str, str]:
        """Each live document -> the chunk table of the segment holding it."""
        if self._tables is None:
            self._tables = {
                doc_id: storage.join(self._segments[doc.position].path, bundles.CHUNKS)
                for doc_id, doc in self._live.items()
            }
        return self._tables


class _SkipLiveFn(beam.DoFn):
    def __init__(self, root: str) -> None:
        self._root = root

    def setup(self) -> None:
        self._view = ActiveView(self._root)

    def start_bundle(self) -> None:
        self._view.read()  # once a bundle, not once a document (the committer checks again)

    def process(self, doc: Document) -> Iterator[Any]:
        yield beam.pvalue.TaggedOutput(SEEN, doc.doc_id)
        # With nothing active, the first generation is a batch build of the whole input.
        if self._view.active is not None:
            live = self._view.documents().get(doc.doc_id)
            if live is None or live.state != document_state(doc):
                yield doc


class SkipLive(beam.PTransform):
    """``PCollection[Document]`` -> ``{"documents": the new and changed ones, "seen": the
    id of every one}``, against the active generation of ``root`` as it is when each
    document is looked at. Same document, same revision: no work.

    With nothing active yet, no document goes on: the stream's first generation is
    built by a batch refresh of the whole input.
    """

    def __init__(self, root: str) -> None:
        super().__init__()
        self._fn = _SkipLiveFn(root)

    def expand(self, docs: beam.PCollection) -> dict[str, beam.PCollection]:
        out = docs | "SkipLive" >> beam.ParDo(self._fn).with_outputs(SEEN, main="documents")
        return {"documents": out["documents"], SEEN: out[SEEN]}


class _LiveVectorsFn(beam.DoFn):
    def __init__(self, root: str) -> None:
        self._root = root

    def setup(self) -> None:
        self._view = ActiveView(self._root)

    def process(self, doc_ids: list[str]) -> Iterator[tuple[str, Any]]:
        self._view.read()
        yield from edited_vectors(doc_ids, where=self._view.chunk_tables())


class LiveVectors(beam.PTransform):
    """``PCollection[Document]`` (a window's changed documents) -> ``(text_key, vector)``
    of the chunks the edited ones have in the active generation, so a passage an edit
    left as it was keeps its vector (the stream's form of
    :class:`transforms.delta.ReadEditedVectors`). One gathering per window."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self._fn = _LiveVectorsFn(root)

    def expand(self, docs: beam.PCollection) -> beam.PCollection:
        return (
            docs
            | "DocIds" >> beam.Map(lambda d: d.doc_id)
            | "GatherIds" >> _PerWindow()
            | "LiveVectors" >> beam.ParDo(self._fn)
        )


class _PerWindow(beam.PTransform):
    """``PCollection`` -> one list per window that has elements (``CollectAll`` adds an
    element in the global window, which a windowed stream never groups with)."""

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        return {"items": pcoll} | "Gather" >> Gather() | "Items" >> beam.Map(lambda g: g["items"])
