"""BM25 tokenization shared by the build (indexing) and the query module (scoring).

Both sides must tokenize identically, so the one function lives here, free of Beam.
"""

import re
from typing import Any

from store.config import LexicalConfig

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s.tokenize's default token pattern
_STEM_CACHE = 100_000


def _stemmer(config: LexicalConfig) -> Any:
    if not config.stemmer:
        return None
    try:
        import Stemmer
    except ImportError as exc:
        raise ImportError(
            "stemmed BM25 needs the 'PyStemmer' package: pip install PyStemmer"
        ) from exc
    return Stemmer.Stemmer(config.stemmer)


class LexicalTokenizer:
    """Lowercase word tokens, stopwords removed, Snowball-stemmed.

    Example:
        >>> LexicalTokenizer(LexicalConfig())(["Rivers flowing"])
        [['river', 'flow']]
    """

    def __init__(self, config: LexicalConfig) -> None:
        self._config = config
        self._stemmer = _stemmer(config)
        self._stopwords: frozenset[str] | None = None
        self._stems: dict[str, str] = {}

    def tokens(self, text: str) -> list[str]:
        r"""One text's tokens, as ``self([text])[0]`` gives them, without bm25s' per-call
        set-up: lowercase ``\w\w+`` words, stopwords dropped, stems (cached per word).

        The query module asks this for a few words per query; the build indexes through
        :meth:`__call__`. A test checks that both agree.
        """
        if self._stopwords is None:
            from bm25s.tokenization import _infer_stopwords

            self._stopwords = frozenset(_infer_stopwords(self._config.stopwords or []))
        words = [w for w in _TOKEN.findall(text.lower()) if w not in self._stopwords]
        if self._stemmer is None:
            return words
        missing = [w for w in words if w not in self._stems]
        if missing:
            if len(self._stems) > _STEM_CACHE:
                self._stems.clear()
            self._stems.update(zip(missing, self._stemmer.stemWords(missing), strict=True))
        return [self._stems[w] for w in words]

    def __call__(self, texts: list[str]) -> list[list[str]]:
        import bm25s

        tokens: list[list[str]] = bm25s.tokenize(
            texts,
            stopwords=self._config.stopwords or [],
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )
        return tokens
