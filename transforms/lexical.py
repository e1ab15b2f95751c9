"""Lexical index: chunk texts -> a BM25 index (bm25s) in ``bm25/``, one global step.

Rows of the index are in chunk-id order, the same order as ``chunks.parquet``,
so a BM25 score vector lines up with the chunk table. Files are ``.npy``
arrays and JSON only: nothing is pickled.

Each row indexes its chunk together with ``LexicalConfig.context_chunks``
neighbouring chunks of the same document on each side. Chunks are cut to the
embedding model's window, which BM25 does not have: a claim's terms are often
spread over adjacent chunks of one passage, and scoring the chunk in its context
counts them all (measured on SciFact: lexical NDCG@10 0.659 -> 0.683, fused
0.706 -> 0.724, docs/benchmarks.md). The chunk alone is still what a hit quotes.
"""

import logging
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from store.config import LexicalConfig
from store.lexical import LexicalTokenizer
from transforms.gather import CollectAll

logger = logging.getLogger(__name__)


def build_bm25(texts: list[str], *, config: LexicalConfig) -> Any:
    """A bm25s index over ``texts`` (row i = text i)."""
    import bm25s
    from bm25s.tokenization import Tokenized

    # An empty token list would be dropped by bm25s; a placeholder keeps rows aligned.
    tokens = [t or [""] for t in LexicalTokenizer(config)(texts)]
    # A sorted vocabulary: bm25s would otherwise number tokens in set order, which
    # changes with each process's hash seed and makes the saved files differ.
    vocab = {token: i for i, token in enumerate(sorted({t for doc in tokens for t in doc}))}
    corpus = Tokenized(ids=[[vocab[t] for t in doc] for doc in tokens], vocab=vocab)
    index = bm25s.BM25(k1=config.k1, b=config.b, method="lucene")
    index.index(corpus, show_progress=False)
    return index


def context_texts(chunks: Sequence[Any], width: int) -> list[str]:
    """Each chunk's text with up to ``width`` neighbours of its document on each side.

    Neighbours are the chunks with the adjacent ``chunk_index`` values of the same
    ``doc_id``, joined in document order; the result is in the order of ``chunks``.
    """
    if width == 0:
        return [c.text for c in chunks]
    by_doc: dict[str, dict[int, str]] = defaultdict(dict)
    for c in chunks:
        by_doc[c.doc_id][c.chunk_index] = c.text
    texts = []
    for c in chunks:
        doc = by_doc[c.doc_id]
        window = range(c.chunk_index - width, c.chunk_index + width + 1)
        texts.append("\n".join(doc[i] for i in window if i in doc))
    return texts


def write_bm25(
    chunks: list[Any], directory: str, *, config: LexicalConfig
) -> tuple[str, int] | None:
    """BM25 over ``chunks`` (each with its neighbours' context) -> files under
    ``directory``; returns ``(directory, chunks)``, or ``None`` when there are none."""
    if not chunks:  # nothing got through: the build reports its dead letters instead
        logger.info("no chunks: no BM25 index written")
        return None
    ordered = sorted(chunks, key=lambda c: c.chunk_id)
    texts = context_texts(ordered, config.context_chunks)
    index = build_bm25(texts, config=config)
    with tempfile.TemporaryDirectory() as scratch:
        index.save(scratch)
        for name in sorted(os.listdir(scratch)):
            with (
                open(os.path.join(scratch, name), "rb") as src,
                FileSystems.create(FileSystems.join(directory, name)) as dst,
            ):
                shutil.copyfileobj(src, dst)
    logger.info("wrote BM25 index of %d chunks to %s", len(ordered), directory)
    return directory, len(ordered)


class _BuildBm25Fn(beam.DoFn):
    def __init__(self, *, directory: str, config: LexicalConfig) -> None:
        self._directory = directory
        self._config = config

    def process(self, chunks: list[Any]) -> Any:
        written = write_bm25(chunks, self._directory, config=self._config)
        if written is not None:
            yield written


class BuildLexicalIndex(beam.PTransform):
    """``PCollection[Chunk]`` -> BM25 files under ``directory`` (global step).

    Example:
        >>> chunks | BuildLexicalIndex(staging + "/bm25", config=LexicalConfig())

    Memory bound: every chunk text and its tokens on one worker.

    With ``collected``, the input is already one list of chunks (a ``CollectAll``
    shared with other global steps over the same rows).
    """

    def __init__(self, directory: str, *, config: LexicalConfig, collected: bool = False) -> None:
        super().__init__()
        if not directory:
            raise ValueError("BuildLexicalIndex needs a destination directory")
        self._fn = _BuildBm25Fn(directory=directory, config=config)
        self._collected = collected

    def expand(self, chunks: beam.PCollection) -> beam.PCollection:
        lists = chunks if self._collected else chunks | "CollectTexts" >> CollectAll()
        return lists | "BuildBm25" >> beam.ParDo(self._fn)
