"""A saved bm25s index read without importing bm25s (which imports scipy).

The build writes the lexical index with bm25s (``bm25/``: ``params.index.json``,
``vocab.index.json`` and the term-by-document score matrix as three ``.npy`` arrays,
compressed by column). Reading it needs none of bm25s: the arrays are memory-mapped and
a query's score is the sum, per query token, of that token's stored scores, added in
token order as bm25s adds them, so the scores are the same to the bit (a test compares
them with bm25s' own). Not importing bm25s keeps scipy (about 0.12 s) out of a query
process that does not walk the graph.

Example:
    >>> index = SavedIndex.open(os.path.join(bundle_dir, "bm25"))
    >>> index.get_scores(["gzip", "file"])     # one float32 per document
"""

import json
import os
from typing import Any

import numpy as np

from store.npy import HEADER_LOCK

_ARRAYS = (
    ("data", "data.csc.index.npy"),
    ("indices", "indices.csc.index.npy"),
    ("indptr", "indptr.csc.index.npy"),
)
"""The score matrix compressed by column: its values, their documents, each token's start."""
_NONOCCURRENCE = "nonoccurrence_array.index.npy"
_WITH_NONOCCURRENCE = ("bm25l", "bm25+")
"""The BM25 variants whose saved index adds a score for each query token a document
lacks (bm25s writes it as a fourth array)."""


class SavedIndex:
    """The parts of a ``bm25s.BM25`` a reader uses: ``vocab_dict``, ``scores`` (the
    arrays and ``num_docs``) and :meth:`get_scores`."""

    def __init__(
        self,
        vocab_dict: dict[str, int],
        scores: dict[str, Any],
        dtype: str,
        nonoccurrence: np.ndarray | None = None,
    ) -> None:
        self.vocab_dict = vocab_dict
        self.scores = scores
        self._dtype = np.dtype(dtype)
        self._nonoccurrence = nonoccurrence

    @classmethod
    def open(cls, directory: str) -> "SavedIndex":
        """Read the parameters and vocabulary and memory-map the score arrays.

        Raises:
            FileNotFoundError: a file of the index is missing.
            ValueError: a file is not what bm25s writes.
        """
        params = _json(os.path.join(directory, "params.index.json"))
        vocab = _json(os.path.join(directory, "vocab.index.json"))
        if not isinstance(params, dict) or not isinstance(vocab, dict):
            raise ValueError(f"{directory} does not hold a saved bm25s index")
        arrays: dict[str, Any] = {
            name: _mapped(os.path.join(directory, file)) for name, file in _ARRAYS
        }
        arrays["num_docs"] = int(params["num_docs"])
        nonoccurrence = None
        if params.get("method") in _WITH_NONOCCURRENCE:
            nonoccurrence = _mapped(os.path.join(directory, _NONOCCURRENCE))
        return cls(vocab, arrays, str(params.get("dtype", "float32")), nonoccurrence)

    def get_scores(self, tokens: list[str]) -> np.ndarray:
        """Every document's score for ``tokens`` (those the vocabulary lacks are left out;
        a repeated token counts each time)."""
        ids = [self.vocab_dict[token] for token in tokens if token in self.vocab_dict]
        data, indices, indptr = self.scores["data"], self.scores["indices"], self.scores["indptr"]
        scores = np.zeros(self.scores["num_docs"], dtype=self._dtype)
        for token_id in ids:
            if token_id + 1 >= len(indptr):
                raise ValueError(f"token id {token_id} has no column in the BM25 index")
            start, end = indptr[token_id], indptr[token_id + 1]
            np.add.at(scores, indices[start:end], data[start:end])
        if self._nonoccurrence is not None:
            scores += self._nonoccurrence[np.asarray(ids, dtype=np.int64)].sum()
        return scores


def _json(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _mapped(path: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"BM25 index file {path} is missing")
    with HEADER_LOCK:  # numpy parses .npy headers with a non-thread-safe parser (store.npy)
        return np.load(path, mmap_mode="r", allow_pickle=False)
