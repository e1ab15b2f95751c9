"""Embedding: ``Chunk`` -> ``EmbeddedChunk`` with sentence-transformers through RunInference.

The model is loaded once per worker by RunInference; every distinct text is
embedded exactly once (chunks are keyed by a hash of their text), and vectors
are L2-normalized.

Batches are formed deterministically: texts are grouped by length bucket,
sorted by (length, key) and cut into batches of at most ``batch_size`` texts and
at most ``batch_chars`` characters once padded to their longest text, which are
then spread across workers, each with the number of texts the step embeds (a count
of the distinct texts, so progress lines give a share done and time left). A float
computation depends on the shapes it runs
in, so the same input always meeting the model in the same batches is what makes
two builds of the same corpus byte-identical; it also keeps padding small. The
character budget is for speed: on two cores MiniLM embeds 100-token texts
13-28% faster in batches of about eight than of 64, while 10-token texts want the
full 64 (docs/benchmarks.md, "Batches by padded length").
"""

import hashlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import (
    ModelHandler,
    PredictionResult,
    RunInference,
)

from schemas import DeadLetter, EmbeddedChunk
from store.config import DEFAULT_EMBED_BATCH, DEFAULT_EMBED_CHARS
from transforms.progress import Progress, is_global
from transforms.tags import BAD, GOOD, typed

logger = logging.getLogger(__name__)

STAGE = "embed"


def text_key(text: str) -> str:
    """Key under which a text is embedded once: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SentenceTransformerHandler(ModelHandler[tuple[str, str], PredictionResult, Any]):
    """RunInference handler: batches of ``(key, text)`` -> unit-norm float32 vectors.

    Used pre-batched (``.with_no_batching()``): each element is one batch, and
    each result is ``PredictionResult(example=key, inference=vector)``.

    Example:
        >>> batches | RunInference(SentenceTransformerHandler(model=path).with_no_batching())

    Args:
        model: sentence-transformers name or local path (loaded offline).
        batch_size: texts per forward pass inside ``encode``.
    """

    def __init__(self, *, model: str, batch_size: int = 64, counter: str = "texts_embedded"):
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        super().__init__(min_batch_size=1, max_batch_size=batch_size)
        self._model = str(model)
        self._batch_size = batch_size
        self._progress = Progress(logger, "embedded", "texts", every=256)
        self._embedded = Metrics.counter(STAGE, counter)

    def load_model(self) -> Any:
        from store.models import load_sentence_transformer

        return load_sentence_transformer(self._model)

    def run_inference(
        self,
        batch: "Sequence[tuple[str, str]] | TextBatch",
        model: Any,
        inference_args: dict[str, Any] | None = None,
    ) -> Iterable[PredictionResult]:
        total = batch.total if isinstance(batch, TextBatch) else None
        batch = batch.pairs if isinstance(batch, TextBatch) else batch
        for pair in batch:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], str)):
                raise TypeError(f"expected (key, text) pairs, got {type(pair).__name__}")
        vectors = np.asarray(
            model.encode(
                [text for _, text in batch],
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )
        self._progress.add(len(batch), total=total)
        self._embedded.inc(len(batch))
        return [
            PredictionResult(key, vector) for (key, _), vector in zip(batch, vectors, strict=True)
        ]

    def get_metrics_namespace(self) -> str:
        return "evidex_embed"


class TextBatch(NamedTuple):
    """One batch of ``(key, text)`` pairs and how many texts the whole step embeds
    (for the progress line only: the pairs alone decide the vectors)."""

    pairs: list[tuple[str, str]]
    total: int


_BUCKET_CHARS = 200
_MAX_BUCKET = 9


def length_bucket(text: str) -> int:
    """Coarse length class of a text (0-9), so similar lengths batch together."""
    return min(len(text) // _BUCKET_CHARS, _MAX_BUCKET)


def length_batches(
    item: tuple[int, Iterable[tuple[str, str]]], *, batch_size: int, batch_chars: int
) -> Iterator[list[tuple[str, str]]]:
    """One bucket's ``(key, text)`` pairs -> batches that depend only on their content.

    Pairs are sorted by (text length, key) and cut where the next text would make
    the batch hold more than ``batch_size`` texts or, padded to that (longest)
    text, more than ``batch_chars`` characters. A text longer than the budget is
    a batch of its own.
    """
    _, pairs = item
    batch: list[tuple[str, str]] = []
    for pair in sorted(pairs, key=lambda kv: (len(kv[1]), kv[0])):
        if batch and (len(batch) >= batch_size or (len(batch) + 1) * len(pair[1]) > batch_chars):
            yield batch
            batch = []
        batch.append(pair)
    if batch:
        yield batch


def _join(item: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
    """Attach a text's vector to every chunk with that text; without one, each chunk
    becomes a dead letter carrying the inference error (if RunInference reported one)."""
    key, grouped = item
    vectors = grouped["vectors"]
    errors = grouped.get("errors") or [("embedding_failed", f"no embedding for text {key[:12]}")]
    for chunk in grouped["chunks"]:
        if vectors:
            yield EmbeddedChunk(chunk=chunk, embedding=np.asarray(vectors[0], np.float32).tolist())
        else:
            error_type, message = errors[0]
            yield beam.pvalue.TaggedOutput(
                BAD, DeadLetter(STAGE, chunk.chunk_id, error_type, message)
            )


def _failed_inference(failure: Any) -> Iterator[tuple[str, tuple[str, str]]]:
    """``(failed batch, error)`` from RunInference's DLQ -> ``(text key, (type, message))``."""
    batch, error = failure[0], failure[1]
    batch = batch.pairs if isinstance(batch, TextBatch) else batch
    if isinstance(error, tuple) and len(error) >= 2:  # Beam's (type, repr, traceback) form
        error_type, message = getattr(error[0], "__name__", str(error[0])), str(error[1])
    else:
        error_type, message = type(error).__name__, str(error)
    for key, _text in batch:
        yield key, (error_type, message[:500])


def _split_known(item: tuple[str, dict[str, list[Any]]]) -> Iterator[Any]:
    """A distinct text with a vector already known is not embedded again."""
    key, grouped = item
    if not grouped["texts"]:
        return
    if grouped["known"]:
        yield beam.pvalue.TaggedOutput("known", (key, np.asarray(grouped["known"][0], np.float32)))
    else:
        yield key, grouped["texts"][0]


def _check_batching(batch_size: int, batch_chars: int) -> None:
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if batch_chars <= 0:
        raise ValueError(f"batch_chars must be positive, got {batch_chars}")


class EmbedTexts(beam.PTransform):
    """``PCollection[str]`` -> ``{good: (text_key, float32 vector), bad: (text_key, (type,
    message))}``.

    Each distinct text is embedded once; texts whose vector is in ``known``
    (``(text_key, vector)`` pairs, e.g. read back from a parent bundle) are not
    embedded at all.

    Example:
        >>> vectors = summaries | EmbedTexts(model=path)

    Args:
        model: sentence-transformers name or local path.
        batch_size: most texts per encode call.
        batch_chars: most characters per encode call, counted as texts x longest text.
        known: optional ``PCollection[(text_key, vector)]`` of reusable vectors.
        counter: name of the Beam counter of texts actually embedded.
    """

    def __init__(
        self,
        *,
        model: str,
        batch_size: int = DEFAULT_EMBED_BATCH,
        batch_chars: int = DEFAULT_EMBED_CHARS,
        known: beam.PCollection | None = None,
        counter: str = "texts_embedded",
    ) -> None:
        super().__init__()
        _check_batching(batch_size, batch_chars)
        self._batch_size = batch_size
        self._batch_chars = batch_chars
        self._known = known
        self._handler = SentenceTransformerHandler(
            model=model, batch_size=batch_size, counter=counter
        ).with_no_batching()

    def expand(self, texts: beam.PCollection) -> Any:
        pairs = (
            texts
            | "KeyTexts" >> beam.Map(lambda t: (text_key(t), t))
            | "DistinctTexts" >> beam.Distinct()
        )
        reused = None
        if self._known is not None:
            split = (
                {"texts": pairs, "known": self._known}
                | "JoinKnown" >> beam.CoGroupByKey()
                | "SplitKnown" >> beam.FlatMap(_split_known).with_outputs("known", main="new")
            )
            pairs, reused = split["new"], split["known"]
        batches = (
            pairs
            | "KeyByLength" >> beam.Map(lambda kv: (length_bucket(kv[1]), kv))
            | "GroupByLength" >> beam.GroupByKey()
            | "LengthBatches"
            >> beam.FlatMap(
                length_batches, batch_size=self._batch_size, batch_chars=self._batch_chars
            )
        )
        if is_global(pairs):
            # How many texts this step embeds, so its progress lines have a total (a
            # windowed stream has no such total: its lines give the rate).
            total = pairs | "CountTexts" >> beam.combiners.Count.Globally()
            batches = batches | "WithTotal" >> beam.Map(
                TextBatch, total=beam.pvalue.AsSingleton(total)
            )
        batches = batches | "SpreadBatches" >> beam.Reshuffle()
        inferred, dlq = (
            batches | "EmbedTexts" >> RunInference(self._handler).with_exception_handling()
        )
        # float32 arrays, not lists of Python floats: Beam pickles an array in one piece
        # where it would encode a list float by float, and every consumer stacks them.
        vectors = inferred | "ToVector" >> beam.Map(
            lambda r: (r.example, np.asarray(r.inference, dtype=np.float32))
        )
        if reused is not None:
            vectors = (vectors, reused) | "WithKnown" >> beam.Flatten()
        errors = dlq.failed_inferences | "KeyFailures" >> beam.FlatMap(_failed_inference)
        return {GOOD: vectors, BAD: errors}


class EmbedChunks(beam.PTransform):
    """``PCollection[Chunk]`` -> ``{good: EmbeddedChunk, bad: DeadLetter}``.

    Example:
        >>> out = chunks | EmbedChunks(model=default_model_path())

    Args:
        model: sentence-transformers name or local path.
        batch_size: most texts per encode call.
        batch_chars: most characters per encode call, counted as texts x longest text.
        known: optional ``PCollection[(text_key, vector)]``: chunks whose text has a
            vector there are not embedded again.
    """

    def __init__(
        self,
        *,
        model: str,
        batch_size: int = DEFAULT_EMBED_BATCH,
        batch_chars: int = DEFAULT_EMBED_CHARS,
        known: beam.PCollection | None = None,
    ) -> None:
        super().__init__()
        _check_batching(batch_size, batch_chars)
        self._batch_size = batch_size
        self._batch_chars = batch_chars
        self._model = str(model)
        self._known = known

    def expand(self, chunks: beam.PCollection) -> Any:
        keyed = chunks | "KeyByText" >> beam.Map(lambda c: (text_key(c.text), c))
        embedded = (
            chunks
            | "ChunkTexts" >> beam.Map(lambda c: c.text)
            | "Embed"
            >> EmbedTexts(
                model=self._model,
                batch_size=self._batch_size,
                batch_chars=self._batch_chars,
                known=self._known,
            )
        )
        joined = (
            {"chunks": keyed, "vectors": embedded[GOOD], "errors": embedded[BAD]}
            | "JoinVectors" >> beam.CoGroupByKey()
            | "AttachVectors" >> beam.FlatMap(_join).with_outputs(BAD, main=GOOD)
        )
        return {
            GOOD: typed(joined[GOOD], EmbeddedChunk),
            BAD: typed(joined[BAD], DeadLetter),
        }
