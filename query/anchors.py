"""Explicit anchors in a query: what evidence must mention before it can be admitted.

An anchor is a quoted phrase, a version or number-bearing token (``3.11``,
``v2``, ``ISO-27001``), an acronym (``UPI``), or a capitalized name that does
not start the sentence (``Black Sea``). Rules only; deterministic.
"""

import re

_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_VERSION = re.compile(
    r"\b(?:v(?:ersion)?\s?)?\d+(?:\.\d+)+\b|\bv\d+\b|\b[A-Za-z]+-\d+[A-Za-z0-9-]*\b"
)
_ACRONYM = re.compile(r"\b[A-Z]{2,}[0-9]*s?\b")
_WORD = r"(?:[A-Z][a-z]+(?:[A-Z][a-z]*)*\b|[A-Z]{2,}[0-9]*\b)"
_NAME = re.compile(rf"(?<![.?!]\s)(?<!^)\b({_WORD}(?:\s+(?:of\s+|the\s+)?{_WORD})*)(?![0-9])")
_IGNORED = frozenset(
    {
        "I",
        "A",
        "The",
        "What",
        "Which",
        "How",
        "Why",
        "When",
        "Where",
        "Who",
        "Is",
        "Are",
        "Does",
        "Do",
        "Can",
        "Should",
        "In",
        "On",
        "Of",
    }
)


def find_anchors(query: str) -> list[str]:
    """Anchors in order of appearance, without duplicates (case-insensitive)."""
    found: list[tuple[int, str]] = []
    for pattern, group in ((_QUOTED, 1), (_VERSION, 0), (_ACRONYM, 0), (_NAME, 1)):
        for match in pattern.finditer(query):
            text = match.group(group).strip()
            if text and text not in _IGNORED:
                found.append((match.start(group), text))
    anchors: list[str] = []
    seen: set[str] = set()
    for _, text in sorted(found, key=lambda item: (item[0], -len(item[1]))):
        key = text.lower()
        if key in seen or any(key in a.lower() for a in anchors):
            continue
        seen.add(key)
        anchors.append(text)
    return anchors
