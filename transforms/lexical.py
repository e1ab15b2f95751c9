"""Lexical index: chunk texts -> a BM25 index (bm25s) in ``bm25/``, one global step.

Rows of the index are in chunk-id order, the same order as ``chunks.parquet``,
so a BM25 score vector lines up with the chunk table. Files are ``.npy``
arrays and JSON only: nothing is pickled.
"""

import logging
import os
import shutil
import tempfile
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from evidex.config import LexicalConfig
from evidex.lexical import LexicalTokenizer
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


class _BuildBm25Fn(beam.DoFn):
    def __init__(self, *, directory: str, config: LexicalConfig) -> None:
        self._directory = directory
        self._config = config

    def process(self, chunks: list[Any]) -> Any:
        ordered = sorted(chunks, key=lambda c: c.chunk_id)
        index = build_bm25([c.text for c in ordered], config=self._config)
        with tempfile.TemporaryDirectory() as scratch:
            index.save(scratch)
            for name in sorted(os.listdir(scratch)):
                with (
                    open(os.path.join(scratch, name), "rb") as src,
                    FileSystems.create(FileSystems.join(self._directory, name)) as dst,
                ):
                    shutil.copyfileobj(src, dst)
        logger.info("wrote BM25 index of %d chunks to %s", len(ordered), self._directory)
        yield self._directory, len(ordered)


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
