"""BM25 tokenization shared by the build (indexing) and the query module (scoring).

Both sides must tokenize identically, so the one function lives here, free of Beam.
"""

from typing import Any

from store.config import LexicalConfig


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
