"""The lexical arm: BM25 scores over every chunk row, read from the bundle's ``bm25/``."""

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from query.bm25_files import SavedIndex
from store.config import LexicalConfig
from store.lexical import LexicalTokenizer


class LexicalIndex:
    """BM25 over a bundle's chunks; row ``i`` is row ``i`` of ``chunks.parquet``.

    Example:
        >>> lexical = LexicalIndex.open(bundle_dir, config)
        >>> scores = lexical.scores("gzip file")   # one float per chunk row
    """

    def __init__(self, index: Any, tokenizer: LexicalTokenizer, rows: int) -> None:
        self._index = index
        self._tokenize = tokenizer
        self._rows = rows

    @classmethod
    def open(cls, directory: str, config: LexicalConfig, *, rows: int) -> "LexicalIndex":
        """Memory-map a saved bm25s index (``.npy`` + JSON, nothing unpickled), read by
        :class:`query.bm25_files.SavedIndex` (bm25s itself is not imported)."""
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"bundle has no lexical index at {directory}")
        return cls(SavedIndex.open(directory), LexicalTokenizer(config), rows)

    def tokenize(self, text: str) -> list[str]:
        """``text`` as the index's tokens: lowercase words, stopwords dropped, stems."""
        return self._tokenize.tokens(text)

    def knows(self, token: str) -> bool:
        """Whether any chunk's BM25 text holds ``token`` (whoever may see it)."""
        return token in self._index.vocab_dict

    def postings(self, token: str) -> np.ndarray:
        """Ascending rows whose BM25 text holds ``token``; empty when the index lacks it.

        A token the index lacks reads the postings of token 0 and drops them, so asking
        for a term the corpus lacks costs what asking for a present one does.
        """
        token_id = self._index.vocab_dict.get(token)
        indptr, indices = self._index.scores["indptr"], self._index.scores["indices"]
        first = 0 if token_id is None else int(token_id)
        rows = np.asarray(indices[int(indptr[first]) : int(indptr[first + 1])], dtype=np.int64)
        return rows if token_id is not None else rows[:0]

    @property
    def rows(self) -> int:
        """Rows the index scores (the statistics' document count, deleted rows included)."""
        return self._rows

    def weights(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows holding ``token`` and their stored BM25 weights (the token's IDF in this
        index times its length-normalized term frequency), or ``None`` if it is unknown."""
        token_id = self._index.vocab_dict.get(token)
        if token_id is None:
            return None
        indptr = self._index.scores["indptr"]
        lo, hi = int(indptr[token_id]), int(indptr[token_id + 1])
        rows = np.asarray(self._index.scores["indices"][lo:hi], dtype=np.int64)
        return rows, np.asarray(self._index.scores["data"][lo:hi], dtype=np.float32)

    @property
    def vocabulary(self) -> Any:
        """Every token of the index (a set-like view)."""
        return self._index.vocab_dict.keys()

    def vocabulary_weights(self) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        """``(token, rows, weights)`` of every token of the index (see :meth:`weights`)."""
        indptr, indices = self._index.scores["indptr"], self._index.scores["indices"]
        data = self._index.scores["data"]
        for token, token_id in self._index.vocab_dict.items():
            if token_id + 1 >= len(indptr):
                continue  # bm25s keeps the empty string in its vocabulary, without a column
            lo, hi = int(indptr[token_id]), int(indptr[token_id + 1])
            yield (
                token,
                np.asarray(indices[lo:hi], dtype=np.int64),
                np.asarray(data[lo:hi], dtype=np.float32),
            )

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every row for ``query`` (zeros when no query term is known)."""
        scores = self.token_scores(self._tokenize.tokens(query))
        return np.zeros(self._rows, dtype=np.float32) if scores is None else scores

    def token_scores(self, tokens: list[str]) -> np.ndarray | None:
        """BM25 score of every row for already tokenized ``tokens``, or ``None`` when the
        index knows none of them."""
        tokens = [t for t in tokens if t in self._index.vocab_dict]
        if not tokens:
            return None
        scores = np.asarray(self._index.get_scores(tokens), dtype=np.float32)
        if scores.shape[0] != self._rows:
            raise ValueError(f"BM25 index has {scores.shape[0]} rows, bundle has {self._rows}")
        return scores
