"""Pure span arithmetic for chunking: paragraphs, sentences, token-bounded packing.

Every function returns half-open ``(start, end)`` character offsets into the
text it was given, trimmed of surrounding whitespace, so that
``text[start:end]`` is exactly what a chunk quotes.
"""

import re
from collections.abc import Callable, Sequence

Span = tuple[int, int]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# A sentence ends at . ! or ? (optionally followed by closing quotes/brackets)
# and whitespace, or at a line break that is followed by a list marker.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])|\n(?=\s*(?:[-*+]|\d+[.)])\s)")
_WORD = re.compile(r"\S+")


def _trimmed(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _split(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[Span]:
    spans: list[Span] = []
    cursor = start
    for match in pattern.finditer(text, start, end):
        piece = _trimmed(text, cursor, match.start())
        if piece:
            spans.append(piece)
        cursor = match.end()
    piece = _trimmed(text, cursor, end)
    if piece:
        spans.append(piece)
    return spans


def paragraphs(text: str) -> list[Span]:
    """Blank-line separated blocks of ``text``."""
    return _split(text, 0, len(text), _PARAGRAPH_BREAK)


def sentences(text: str, span: Span) -> list[Span]:
    """Sentences (and list items) inside ``span``."""
    return _split(text, span[0], span[1], _SENTENCE_END)


def word_windows(
    text: str, span: Span, count_tokens: Callable[[str], int], max_tokens: int
) -> list[Span]:
    """Split ``span`` at whitespace into windows of at most ``max_tokens`` tokens.

    A single word longer than ``max_tokens`` becomes its own window; the
    embedding model truncates it, which is the only lossless choice left.
    """
    windows: list[Span] = []
    first: int | None = None
    last = span[0]
    used = 0
    for match in _WORD.finditer(text, span[0], span[1]):
        n = count_tokens(match.group())
        if first is not None and used + n > max_tokens:
            windows.append((first, last))
            first, used = None, 0
        if first is None:
            first = match.start()
        used += n
        last = match.end()
    if first is not None:
        windows.append((first, last))
    return windows


def pack(units: Sequence[tuple[Span, int]], target_tokens: int) -> list[Span]:
    """Greedily merge consecutive units while their token total stays within target.

    Args:
        units: ``((start, end), n_tokens)`` in document order, none over the window.
        target_tokens: the largest total a merged span may reach (a lone larger
            unit is kept whole).

    Returns:
        Merged spans from the first unit's start to the last unit's end.
    """
    packed: list[Span] = []
    current: Span | None = None
    used = 0
    for span, n in units:
        if current is not None and used + n <= target_tokens:
            current = (current[0], span[1])
            used += n
            continue
        if current is not None:
            packed.append(current)
        current, used = span, n
    if current is not None:
        packed.append(current)
    return packed


def chunk_spans(
    text: str, *, count_tokens: Callable[[str], int], target_tokens: int, max_tokens: int
) -> list[Span]:
    """Paragraph-first, sentence-second, word-last spans bounded by the model window.

    Args:
        text: normalized document text.
        count_tokens: the embedding model's tokenizer, counting without special tokens.
        target_tokens: preferred upper size of a chunk.
        max_tokens: hard upper size (the model's window less special tokens).

    Returns:
        Non-overlapping spans in order, each within ``max_tokens`` unless a
        single word exceeds it.
    """
    target = min(target_tokens, max_tokens)
    units: list[tuple[Span, int]] = []
    for para in paragraphs(text):
        n = count_tokens(text[para[0] : para[1]])
        if n <= target:
            units.append((para, n))
            continue
        for sent in sentences(text, para):
            n = count_tokens(text[sent[0] : sent[1]])
            if n <= max_tokens:
                units.append((sent, n))
                continue
            for window in word_windows(text, sent, count_tokens, max_tokens):
                units.append((window, count_tokens(text[window[0] : window[1]])))
    return pack(units, target)


_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def heading_paths(text: str, starts: Sequence[int]) -> list[str]:
    """The Markdown heading path in force at each offset in ``starts`` (ascending).

    Example:
        >>> heading_paths("# A\n\n## B\n\nx", [9])
        ['A > B']
    """
    headings = [(m.start(), len(m.group(1)), m.group(2).strip()) for m in _HEADING.finditer(text)]
    paths, stack, i = [], [], 0
    for offset in starts:
        while i < len(headings) and headings[i][0] <= offset:
            _, level, title = headings[i]
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [(level, title)]
            i += 1
        paths.append(" > ".join(t for _, t in stack))
    return paths
