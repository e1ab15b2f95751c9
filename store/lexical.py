"""BM25 tokenization shared by the build (indexing) and the query module (scoring).

Both sides must tokenize identically, so the one function lives here, free of Beam.
"""

import functools
import importlib.util
import os
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


_STOPWORD_LISTS = {
    "EN": ("english", "en"),
    "EN_PLUS": ("english_plus", "en_plus"),
    "GERMAN": ("german", "de"),
    "DUTCH": ("dutch", "nl"),
    "FRENCH": ("french", "fr"),
    "SPANISH": ("spanish", "es"),
    "PORTUGUESE": ("portuguese", "pt"),
    "ITALIAN": ("italian", "it"),
    "RUSSIAN": ("russian", "ru"),
    "SWEDISH": ("swedish", "sv"),
    "NORWEGIAN": ("norwegian", "no"),
    "CHINESE": ("chinese", "zh"),
    "TURKISH": ("turkish", "tr"),
    "KOREAN": ("korean", "ko"),
    "DANISH": ("danish", "da"),
}
"""bm25s' stopword lists (``STOPWORDS_<KEY>`` in ``bm25s/stopwords.py``) and the names
``bm25s.tokenize`` knows them by."""


@functools.cache  # one read of the list file per process and name, not per tokenizer
def stopword_set(name: str | None) -> frozenset[str]:
    """The stopwords ``bm25s.tokenize`` drops for ``name`` (a language name or code, or
    none), read from bm25s' list file without importing bm25s, whose package imports
    scipy: a query process needs the list, not the package. A name not listed here is
    left to bm25s itself (its error names the languages it knows).
    """
    if not name:
        return frozenset()
    key = next((key for key, names in _STOPWORD_LISTS.items() if name in names), None)
    spec = importlib.util.find_spec("bm25s")
    if key is None or spec is None or not spec.submodule_search_locations:
        from bm25s.tokenization import _infer_stopwords

        return frozenset(_infer_stopwords(name))
    folder = next(iter(spec.submodule_search_locations))
    lists = importlib.util.spec_from_file_location(
        "_bm25s_stopword_lists", os.path.join(folder, "stopwords.py")
    )
    if lists is None or lists.loader is None:
        raise ImportError(f"cannot read bm25s' stopword lists from {folder}")
    module = importlib.util.module_from_spec(lists)
    lists.loader.exec_module(module)
    return frozenset(getattr(module, f"STOPWORDS_{key}"))


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
            self._stopwords = stopword_set(self._config.stopwords)
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
