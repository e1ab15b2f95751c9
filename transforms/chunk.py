"""Chunking: ``Document`` -> ``Chunk`` with exact ``[start, end)`` spans.

Sections (between headings) bound every chunk; inside a section, blocks (code,
tables, lists, paragraphs), then sentences, then word windows are packed up to a
target size and never beyond the embedding model's own token window, counted
with the model's own tokenizer. Optionally (``ChunkConfig.semantic``) a chunk
also ends where adjacent sentences' embeddings grow apart. PDF chunks carry the
pages they are on.
"""

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.shared import Shared

from algorithms.chunk import Span, chunk_spans, heading_paths, markup_of, page_range
from schemas import Chunk, DeadLetter, Document, chunk_id
from store.config import ChunkConfig
from transforms.progress import Progress
from transforms.tags import BAD, GOOD, typed

logger = logging.getLogger(__name__)

STAGE = "chunk"


class TokenCounter:
    """Counts a text's tokens with a Hugging Face tokenizer, without special tokens.

    Example:
        >>> TokenCounter.load("/path/to/model")("Hello world")
        2
    """

    def __init__(self, tokenizer: Any) -> None:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:
            backend.no_truncation()
            backend.no_padding()
        self._backend = backend
        self._tokenizer = tokenizer

    @classmethod
    def load(cls, model: str) -> "TokenCounter":
        """Load the tokenizer of a sentence-transformers model folder or cached name."""
        from store.models import force_offline

        force_offline()
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(model), local_files_only=True))

    def __call__(self, text: str) -> int:
        if self._backend is not None:
            return len(self._backend.encode(text, add_special_tokens=False).ids)
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])


def document_pages(doc: Document) -> list[Span]:
    """The ``[start, end)`` of each page in ``doc.text`` (PDFs), else ``[]``."""
    try:
        pages = json.loads(doc.metadata_json or "{}").get("pages") or []
    except (ValueError, AttributeError):
        return []
    return [(int(s), int(e)) for s, e in pages]


def chunk_document(
    doc: Document,
    *,
    count_tokens: TokenCounter,
    config: ChunkConfig,
    max_tokens: int,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> list[Chunk]:
    """All chunks of one document, in order, with deterministic ids.

    Args:
        embed: unit-norm sentence vectors, used only when ``config.semantic``.
    """
    markup = markup_of(doc.source_uri)
    spans = chunk_spans(
        doc.text,
        count_tokens=count_tokens,
        target_tokens=config.target_tokens,
        max_tokens=max_tokens,
        embed=embed if config.semantic else None,
        min_tokens=config.min_tokens,
        percentile=config.breakpoint_percentile,
        markup=markup,
    )
    chunks = []
    paths = heading_paths(doc.text, [start for start, _ in spans], markup=markup)
    pages = document_pages(doc)
    for index, (start, end) in enumerate(spans):
        text = doc.text[start:end]
        first, last = page_range(pages, start, end)
        chunks.append(
            Chunk(
                chunk_id=chunk_id(doc.doc_id, index, text),
                doc_id=doc.doc_id,
                revision=doc.revision,
                chunk_index=index,
                start=start,
                end=end,
                text=text,
                n_tokens=count_tokens(text),
                access_class=doc.access_class,
                heading_path=paths[index],
                page_start=first,
                page_end=last,
            )
        )
    return chunks


class SentenceVectors:
    """Unit-norm vectors of sentences, from the embedding model, for semantic breaks."""

    def __init__(self, model: Any) -> None:
        self._model = model

    @classmethod
    def load(cls, model: str) -> "SentenceVectors":
        """Load the sentence-transformers model at ``model`` (name or local path)."""
        from store.models import load_sentence_transformer

        return cls(load_sentence_transformer(model))

    def __call__(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)


class _ChunkDocumentFn(beam.DoFn):
    """Document -> Chunks (main) or a DeadLetter (tagged ``bad``)."""

    def __init__(self, *, model: str, config: ChunkConfig, max_tokens: int) -> None:
        self._model = model
        self._config = config
        self._max_tokens = max_tokens
        self._shared = Shared()
        self._counter: TokenCounter | None = None
        self._vectors: Callable[[list[str]], np.ndarray] | None = None
        self._shared_model = Shared()
        self._chunks = Metrics.counter(STAGE, "chunks")
        self._bad = Metrics.counter(STAGE, "dead_letters")
        self._sentences = Metrics.counter(STAGE, "sentences_embedded")
        self._progress: Progress | None = None

    def setup(self) -> None:
        self._counter = self._shared.acquire(lambda: TokenCounter.load(self._model))
        if self._config.semantic:
            vectors = self._shared_model.acquire(lambda: SentenceVectors.load(self._model))
            self._vectors = self._counted(vectors)
        self._progress = Progress(logger, "chunked", "documents", every=100)

    def _counted(self, vectors: SentenceVectors) -> Callable[[list[str]], np.ndarray]:
        def embed(texts: list[str]) -> np.ndarray:
            self._sentences.inc(len(texts))
            return vectors(texts)

        return embed

    def process(self, doc: Document) -> Iterator[Any]:
        if self._counter is None:
            raise RuntimeError("_ChunkDocumentFn.setup() was not called")
        try:
            chunks = chunk_document(
                doc,
                count_tokens=self._counter,
                config=self._config,
                max_tokens=self._max_tokens,
                embed=self._vectors,
            )
        except (ValueError, RuntimeError) as exc:
            self._bad.inc()
            yield TaggedOutput(BAD, DeadLetter(STAGE, doc.doc_id, type(exc).__name__, str(exc)))
            return
        if not chunks:
            self._bad.inc()
            yield TaggedOutput(BAD, DeadLetter(STAGE, doc.doc_id, "empty", "no text to chunk"))
            return
        self._chunks.inc(len(chunks))
        if self._progress is not None:
            self._progress.add(1)
        yield from chunks


class ChunkDocuments(beam.PTransform):
    """``PCollection[Document]`` -> ``{good: PCollection[Chunk], bad: PCollection[DeadLetter]}``.

    Example:
        >>> out = docs | ChunkDocuments(model=path, config=ChunkConfig(), max_tokens=254)

    Args:
        model: sentence-transformers name or local path whose tokenizer measures chunks.
        config: chunking options.
        max_tokens: hard limit per chunk: the model's window less its special tokens.
    """

    def __init__(self, *, model: str, config: ChunkConfig, max_tokens: int) -> None:
        super().__init__()
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self._fn = _ChunkDocumentFn(model=str(model), config=config, max_tokens=max_tokens)

    def expand(self, docs: beam.PCollection) -> Any:
        out = docs | "SplitIntoChunks" >> beam.ParDo(self._fn).with_outputs(BAD, main=GOOD)
        return {
            GOOD: typed(out[GOOD], Chunk),
            BAD: typed(out[BAD], DeadLetter),
        }
