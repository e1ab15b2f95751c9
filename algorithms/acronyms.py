"""Acronym definitions stated in text: ``long form (SHORT)`` (pure functions).

A parenthesized short form is matched against the words before it: each of its
letters must appear, in order, in the candidate long form, with its first letter
starting a word — the classic approach of Schwartz and Hearst (2003), written
here from its description. Only definitions stated in the corpus are used to
merge an acronym with its expansion, so "CI" is never guessed.
"""

import re
from typing import NamedTuple

_PAREN = re.compile(r"\(([^()]{1,12})\)")
_WORD = re.compile(r"\S+")


class AcronymDefinition(NamedTuple):
    """``long`` is defined as ``short`` at ``[long_start, short_end)`` of some text."""

    short: str
    long: str
    long_start: int
    short_end: int


def _is_short_form(text: str) -> bool:
    return (
        2 <= len(text) <= 10
        and text[0].isalnum()
        and any(ch.isalpha() for ch in text)
        and len(text.split()) <= 2
        and any(ch.isupper() for ch in text)
    )


def _match_long(short: str, candidate: str) -> int | None:
    """Index in ``candidate`` where the long form of ``short`` starts, or None."""
    letters = [ch.lower() for ch in short if ch.isalnum()]
    s, c = len(letters) - 1, len(candidate) - 1
    while s >= 0:
        ch = letters[s]
        while c >= 0 and (
            candidate[c].lower() != ch or (s == 0 and c > 0 and candidate[c - 1].isalnum())
        ):
            c -= 1
        if c < 0:
            return None
        s, c = s - 1, c - 1
    start = c + 1
    while start > 0 and candidate[start - 1].isalnum():
        start -= 1
    return start


def find_definitions(text: str) -> list[AcronymDefinition]:
    """Every ``long form (SHORT)`` definition in ``text``, in text order.

    Example:
        >>> find_definitions("the Unified Payments Interface (UPI) and")[0][:2]
        ('UPI', 'Unified Payments Interface')
    """
    found = []
    for match in _PAREN.finditer(text):
        short = match.group(1).strip()
        if not _is_short_form(short):
            continue
        before = text[: match.start()].rstrip()
        words = list(_WORD.finditer(before))
        n_letters = sum(ch.isalnum() for ch in short)
        window = words[-min(n_letters + 5, 2 * n_letters) :]
        if not window:
            continue
        offset = window[0].start()
        candidate = before[offset:]
        start = _match_long(short, candidate)
        if start is None:
            continue
        long = candidate[start:].strip(" ,;:-")
        if len(long) <= len(short) or (" " not in long and "-" not in long) or "(" in long:
            continue
        found.append(AcronymDefinition(short, long, offset + start, match.end()))
    return found
