"""What the corpus holds, as the caller may see it: which query terms no evidence can close.

A query term that occurs in no chunk the caller may see (after the lexical index's own
normalization: lowercase word tokens, Snowball stems) is an anchor that no evidence can
resolve. Whether it is missing from the corpus or present only in chunks of other access
classes, the caller gets the same answer through the same code path, so a verdict never
reveals what other callers' documents contain.

Lookups read the BM25 index's postings (the column of one token in its sparse matrix):
a dictionary lookup and a slice per token, never a scan of the texts. Suggestions for a
misspelled term ("did you mean") come from the visible vocabulary only.
"""

import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

_WORD = re.compile(r"\w+")
_ALPHA = re.compile(r"[a-z]{2,}")
SUGGESTION_SCAN_ROWS = 8
"""Visible chunks read to turn a suggested stem back into a word of the corpus."""


def common_words(vocab: Iterable[str]) -> frozenset[str]:
    """Whole words of a WordPiece vocabulary (no ``##`` pieces, letters only).

    An uncased BERT-style vocabulary keeps about 20,000 frequent English words whole, so
    "compressed" or "install" is common there while an invented "zorbulate" is not: a
    word's rarity comes from the embedding model the bundle already ships, offline.
    """
    return frozenset(w for w in vocab if _ALPHA.fullmatch(w))


# Affixes that build an English word from a common one (``bio`` + ``materials``).
_PREFIX_WORDS = (
    "anti auto bio co counter de dis extra hyper hypo inter intra macro micro mis mono "
    "multi nano neo non over poly post pre pro pseudo re semi sub super trans tri ultra "
    "un under"
)
_SUFFIX_WORDS = (
    "s es ed d ing er ers est ly ity ities ness al ally ation ations ize izes ized izing "
    "ise ised able ible ment ments ous ive ic ics ism ist ists less ful"
)
_PREFIXES = tuple(_PREFIX_WORDS.split())
_SUFFIXES = tuple(_SUFFIX_WORDS.split())


def is_common(word: str, common: frozenset[str]) -> bool:
    """Whether ``word`` is a common word or built from them: a common word with an
    inflection or a derivational suffix (``compressed``), a common prefix
    (``biomaterials``), or two common words of four letters or more (``filesystem``;
    not ``mor`` + ``vane``). Invented names (``zorbulate``, ``mergesortify``, ``morvane``)
    decompose into none of these.
    """
    if word in common:
        return True
    if any(
        word.endswith(suffix)
        and (word[: -len(suffix)] in common or word[: -len(suffix)] + "e" in common)
        for suffix in _SUFFIXES
        if len(word) - len(suffix) >= 3
    ):
        return True
    for prefix in _PREFIXES:
        rest = word[len(prefix) :]
        if word.startswith(prefix) and len(rest) >= 4 and is_common(rest, common):
            return True
    return any(
        word[:i] in common and (word[i:] in common or _inflected(word[i:], common))
        for i in range(4, len(word) - 3)
    )


def _inflected(word: str, common: frozenset[str]) -> bool:
    return any(
        word.endswith(suffix) and word[: -len(suffix)] in common
        for suffix in ("s", "es", "ed", "ing", "er", "ers")
        if len(word) - len(suffix) >= 3
    )


def one_edit_variants(word: str) -> set[str]:
    """Every string one deletion, insertion, substitution or transposition away."""
    letters = "abcdefghijklmnopqrstuvwxyz0123456789_"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in letters}
    inserts = {a + c + b for a, b in splits for c in letters}
    return (deletes | swaps | replaces | inserts) - {word}


class CorpusVocabulary:
    """Term presence and suggestions over one bundle's BM25 index.

    Example:
        >>> vocab = CorpusVocabulary(lexical, common=common_words(tokenizer_vocab))
        >>> vocab.absent("zorbulate", visible=None)
        True
        >>> vocab.suggest("heappushh", visible=None, text_of_row=bundle_text)
        'heappush'

    Args:
        lexical: the bundle's :class:`query.lexical.LexicalIndex`.
        common: words common enough that their absence from the corpus makes them no
            anchor (see :func:`common_words`); empty turns rarity anchors off.
    """

    def __init__(self, lexical: Any, *, common: frozenset[str] = frozenset()) -> None:
        self._lexical = lexical
        self.common = common

    def tokens(self, term: str) -> list[str]:
        """The lexical index's tokens of ``term`` (stopwords dropped, stems)."""
        tokens: list[str] = self._lexical.tokenize(term)
        return tokens

    def _visible_in(self, token: str, mask: np.ndarray | None) -> bool:
        rows = self._lexical.postings(token)
        if mask is None:
            return rows.size > 0
        return bool(mask[rows].any())

    def absent(self, term: str, *, visible: np.ndarray | None) -> bool:
        """Whether some token of ``term`` occurs in no chunk row the caller may see.

        Args:
            visible: boolean mask over chunk rows (``None``: the caller sees every row).
        """
        return self._absent_tokens(self.tokens(term), visible)

    def _absent_tokens(self, tokens: list[str], visible: np.ndarray | None) -> bool:
        found = [self._visible_in(t, visible) for t in tokens]  # every token: the same work
        return bool(tokens) and not all(found)

    def absent_words(self, query: str, *, visible: np.ndarray | None) -> list[str]:
        """Words of ``query`` that no visible chunk holds and that are not common words
        (see :func:`is_common`), in order: rare terms, anchors by rarity (empty when no
        common-word list is set)."""
        if not self.common:
            return []
        found: list[str] = []
        for word in _WORD.findall(query):
            lower = word.lower()
            if len(lower) < 3 or lower.isdigit() or lower in found or is_common(lower, self.common):
                continue
            if self._absent_tokens(self.tokens(lower), visible):
                found.append(lower)
        return found

    def suggest(
        self,
        term: str,
        *,
        visible: np.ndarray | None,
        text_of_row: Callable[[int], str],
    ) -> str | None:
        """``term`` with its first absent word replaced by a visible corpus word one edit
        away (compared as stems), or ``None`` when there is none."""
        for word in _WORD.findall(term):
            stems = self.tokens(word)
            if len(stems) != 1 or self._visible_in(stems[0], visible):
                continue
            known = sorted(c for c in one_edit_variants(stems[0]) if self._lexical.knows(c))
            for candidate in known:
                rows = self._lexical.postings(candidate)
                if visible is not None:
                    rows = rows[visible[rows]]
                if not rows.size:
                    continue
                surface = self._surface(candidate, rows[:SUGGESTION_SCAN_ROWS], text_of_row)
                if surface:
                    return term.replace(word, surface, 1)
            return None
        return None

    def _surface(self, stem: str, rows: np.ndarray, text_of_row: Callable[[int], str]) -> str:
        """A word of those rows' texts whose stem is ``stem`` (the most frequent one)."""
        stems: dict[str, bool] = {}
        counts: dict[str, int] = {}
        for row in rows.tolist():
            for word in _WORD.findall(text_of_row(int(row))):
                lower = word.lower()
                if lower not in stems:
                    stems[lower] = self.tokens(lower) == [stem]
                if stems[lower]:
                    counts[lower] = counts.get(lower, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[0][0] if ranked else ""
