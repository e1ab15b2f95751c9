"""Pure span arithmetic for chunking: structure, sentences, token-bounded packing.

Every function returns half-open ``(start, end)`` character offsets into the
text it was given, trimmed of surrounding whitespace, so that
``text[start:end]`` is exactly what a chunk quotes.

Structure: headings (Markdown ``#`` lines outside code, setext underlines) start
sections, and no chunk crosses a heading;
fenced code blocks, tables (``|`` rows), lists and paragraphs are blocks, kept
whole when they fit the model window. Inside a section, chunks are packed up to a
target size; with sentence vectors, a chunk also ends where the similarity of
adjacent sentences drops below a percentile of the section's similarities
(semantic breaks), once it holds a minimum number of tokens.
"""

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

Span = tuple[int, int]
Unit = tuple[Span, int]

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


def _word_pieces(
    text: str, span: Span, count_tokens: Callable[[str], int], max_tokens: int
) -> list[Span]:
    """Cut one over-long word into consecutive character pieces of at most ``max_tokens``
    tokens each, each as long as fits (a galloping then binary search on its end)."""
    pieces: list[Span] = []
    start, end = span
    while start < end:
        fits, step = start + 1, max(1, max_tokens)  # one character is always one piece
        while fits < end:
            probe = min(end, fits + step)
            if count_tokens(text[start:probe]) > max_tokens:
                break
            fits, step = probe, step * 2
        else:
            pieces.append((start, end))
            break
        high = probe - 1  # the longest end that may still fit
        while fits < high:
            middle = (fits + high + 1) // 2
            if count_tokens(text[start:middle]) <= max_tokens:
                fits = middle
            else:
                high = middle - 1
        pieces.append((start, fits))
        start = fits
    return pieces


def word_windows(
    text: str, span: Span, count_tokens: Callable[[str], int], max_tokens: int
) -> list[Span]:
    """Split ``span`` at whitespace into windows of at most ``max_tokens`` tokens.

    A single word longer than ``max_tokens`` (a long URL, an encoded blob) is cut
    between characters into pieces that fit, each its own window: every character
    stays in exactly one chunk, and no chunk outgrows the model window.
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
        if n > max_tokens:
            windows.extend(_word_pieces(text, match.span(), count_tokens, max_tokens))
            continue
        if first is None:
            first = match.start()
        used += n
        last = match.end()
    if first is not None:
        windows.append((first, last))
    return windows


def pack_units(units: Sequence[Unit], target_tokens: int) -> list[Unit]:
    """Greedily merge consecutive units while their token total stays within target.

    Args:
        units: ``((start, end), n_tokens)`` in document order, none over the window.
        target_tokens: the largest total a merged unit may reach (a lone larger
            unit is kept whole).

    Returns:
        Merged units, each from its first unit's start to its last unit's end, with
        the summed token count.
    """
    packed: list[Unit] = []
    for span, n in units:
        if packed and packed[-1][1] + n <= target_tokens:
            packed[-1] = ((packed[-1][0][0], span[1]), packed[-1][1] + n)
        else:
            packed.append((span, n))
    return packed


def pack(units: Sequence[Unit], target_tokens: int) -> list[Span]:
    """The spans of :func:`pack_units`."""
    return [span for span, _ in pack_units(units, target_tokens)]


class Block(NamedTuple):
    """A structural block: ``kind`` is heading, code, table, list or paragraph."""

    kind: str
    span: Span


_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})")
_HEADING_LINE = re.compile(r"#{1,6}[ \t]+\S")
_TABLE_ROW = re.compile(r"[ \t]*\|")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])[ \t]+\S")
_LINE_ITEM = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d+[.)])[ \t])")
_LINE = re.compile(r"\n")
# A setext underline: Markdown's = and - lines; plain text and reStructuredText use more.
_UNDERLINE = {
    "markdown": re.compile(r"[ ]{0,3}(=+|-+)[ \t]*"),
    "plain": re.compile(r"[ ]{0,3}(=+|-+|~+|\^+|\*+|\++|#+)[ \t]*"),
}
_MAX_HEADING_CHARS = 120

MARKDOWN = "markdown"
PLAIN = "plain"
_PLAIN_SUFFIXES = (".txt", ".text", ".rst", ".pdf")


def markup_of(source_uri: str) -> str:
    """How a document's text marks headings: ``plain`` for text files, reStructuredText
    and PDFs (setext underlines only, so a ``# comment`` line is not a heading), else
    ``markdown`` (Markdown, HTML converted by evidex, JSONL records, the embedded corpus).
    """
    return PLAIN if source_uri.lower().endswith(_PLAIN_SUFFIXES) else MARKDOWN


def _is_underline(line: str, title: str, markup: str) -> bool:
    match = _UNDERLINE[markup].fullmatch(line)
    if match is None or len(title.strip()) > _MAX_HEADING_CHARS:
        return False
    length = len(match.group(1))
    # Plain text also draws rules under prose; its underlines run about as long as the title.
    return length >= 3 and (markup == MARKDOWN or length >= len(title.strip()) // 2)


def blocks(text: str, *, markup: str = MARKDOWN) -> list[Block]:
    """Headings, fenced code, tables, lists and paragraphs of ``text``, in order.

    Headings are Markdown ``#`` lines (``markup="markdown"`` only) and setext headings
    (one line of text underlined with ``===`` or ``---``; in plain text also ``~``,
    ``^``, ``*``, ``+`` or ``#``), never lines inside fenced code. A fence left open runs
    to the end of the text; blank lines end every block but code. Each span is
    trimmed of surrounding whitespace; a setext heading's span holds both lines.

    Example:
        >>> [b.kind for b in blocks("# T\n\nSome text.\n\n| a | b |\n|---|---|")]
        ['heading', 'paragraph', 'table']
    """
    if markup not in _UNDERLINE:
        raise ValueError(f"markup must be {MARKDOWN!r} or {PLAIN!r}, got {markup!r}")
    found: list[Block] = []
    kind: str | None = None
    start = 0
    fence = ""
    previous = (0, "")  # the last line's start and text

    def close(end: int) -> None:
        nonlocal kind
        if kind is not None:
            trimmed = _trimmed(text, start, end)
            if trimmed:
                found.append(Block(kind, trimmed))
        kind = None

    offset = 0
    for line in text.split("\n"):
        line_start, offset = offset, offset + len(line) + 1
        line_end = line_start + len(line)
        last_start, last_line = previous
        previous = (line_start, line)
        if kind == "code":
            marker = _FENCE.match(line)
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                close(line_end)
            continue
        if not line.strip():
            close(line_start)
            continue
        if kind == "paragraph" and start == last_start and _is_underline(line, last_line, markup):
            kind = None  # the one-line paragraph above was the heading's text
            found.append(Block("heading", _trimmed(text, start, line_end) or (0, 0)))
            continue
        marker = _FENCE.match(line)
        if marker:
            close(line_start)
            kind, start, fence = "code", line_start, marker.group(1)
        elif markup == MARKDOWN and _HEADING_LINE.match(line):
            close(line_start)
            found.append(Block("heading", _trimmed(text, line_start, line_end) or (0, 0)))
        elif _TABLE_ROW.match(line):
            if kind != "table":
                close(line_start)
                kind, start = "table", line_start
        elif _LIST_ITEM.match(line):
            if kind != "list":
                close(line_start)
                kind, start = "list", line_start
        elif kind is None or kind == "table":
            close(line_start)
            kind, start = "paragraph", line_start
    close(len(text))
    return found


def headings(text: str, *, markup: str = MARKDOWN) -> list[tuple[int, int, str]]:
    """``(offset, level, title)`` of every heading :func:`blocks` finds, in order.

    Example:
        >>> headings("Intro\n=====\n\n```\n# not a heading\n```\n\n## Usage")
        [(0, 1, 'Intro'), (38, 2, 'Usage')]
    """
    found = []
    for block in blocks(text, markup=markup):
        if block.kind != "heading":
            continue
        first, _, underline = text[block.span[0] : block.span[1]].partition("\n")
        if underline:  # setext: = is level 1, - level 2, any other underline level 3
            mark = underline.strip()[0]
            level, title = {"=": 1, "-": 2}.get(mark, 3), first.strip()
        else:
            hashes = len(first) - len(first.lstrip("#"))
            level, title = hashes, first[hashes:].strip().rstrip("#").strip()
        found.append((block.span[0], level, " ".join(title.split())))
    return found


def sections(found: Sequence[Block]) -> list[list[Block]]:
    """Blocks grouped into sections, each starting at a heading (or the text's start)."""
    grouped: list[list[Block]] = []
    for block in found:
        if block.kind == "heading" or not grouped:
            grouped.append([])
        grouped[-1].append(block)
    return grouped


def _units_of_block(
    text: str, block: Block, count_tokens: Callable[[str], int], target: int, max_tokens: int
) -> list[Unit]:
    """A block as one unit when it fits, else its items, lines or sentences, then windows."""
    n = count_tokens(text[block.span[0] : block.span[1]])
    whole_limit = max_tokens if block.kind in ("code", "table") else target
    if n <= whole_limit:
        return [(block.span, n)]
    if block.kind in ("code", "table"):
        parts = _split(text, block.span[0], block.span[1], _LINE)
    elif block.kind == "list":
        parts = _split(text, block.span[0], block.span[1], _LINE_ITEM)
    else:
        parts = sentences(text, block.span)
    units: list[Unit] = []
    for part in parts:
        n = count_tokens(text[part[0] : part[1]])
        if n <= max_tokens:
            units.append((part, n))
            continue
        for window in word_windows(text, part, count_tokens, max_tokens):
            units.append((window, count_tokens(text[window[0] : window[1]])))
    # Lines of code and table rows are packed back into pieces that fit; sentences and
    # items stay separate units so that semantic breaks can fall between them.
    return pack_units(units, target) if block.kind in ("code", "table") else units


def semantic_pack(
    units: Sequence[Unit],
    vectors: np.ndarray,
    *,
    target_tokens: int,
    min_tokens: int,
    percentile: float,
) -> list[Span]:
    """Merge consecutive units, breaking where adjacent similarity drops or the target is hit.

    Args:
        units: ``((start, end), n_tokens)`` of one section, in order.
        vectors: unit-norm vectors of the units' texts, one row per unit.
        target_tokens: a chunk never grows past this by merging.
        min_tokens: a semantic break needs at least this many tokens before it.
        percentile: gaps (``1 - cosine``) at or above this percentile of the
            section's gaps are break candidates.
    """
    if len(units) < 3:
        return pack(units, target_tokens)
    gaps = 1.0 - np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
    threshold = float(np.percentile(gaps, percentile))
    packed: list[Span] = []
    current: Span | None = None
    used = 0
    for i, (span, n) in enumerate(units):
        if current is not None:
            drop = gaps[i - 1] >= threshold and used >= min_tokens
            if drop or used + n > target_tokens:
                packed.append(current)
                current, used = None, 0
        current = span if current is None else (current[0], span[1])
        used += n
    if current is not None:
        packed.append(current)
    return packed


def chunk_spans(
    text: str,
    *,
    count_tokens: Callable[[str], int],
    target_tokens: int,
    max_tokens: int,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    min_tokens: int = 0,
    percentile: float = 90.0,
    markup: str = MARKDOWN,
) -> list[Span]:
    """Section-bounded, block-aware spans within the model window.

    Args:
        text: normalized document text.
        count_tokens: the embedding model's tokenizer, counting without special tokens.
        target_tokens: preferred upper size of a chunk.
        max_tokens: hard upper size (the model's window less special tokens).
        embed: unit-norm vectors for a list of texts; when given, sections larger
            than the target also break at similarity drops (see :func:`semantic_pack`).
            Only the units of such sections are embedded, all in one call.
        min_tokens: the least a chunk holds before a semantic break.
        percentile: which similarity drops count as breaks.
        markup: how the text marks headings (see :func:`markup_of`).

    Returns:
        Non-overlapping spans in order, none crossing a heading, each within
        ``max_tokens`` (a word longer than that is cut between characters).
    """
    target = min(target_tokens, max_tokens)
    per_section: list[list[Unit]] = []
    for section in sections(blocks(text, markup=markup)):
        units: list[Unit] = []
        for block in section:
            units.extend(_units_of_block(text, block, count_tokens, target, max_tokens))
        per_section.append(units)
    wanted = [
        i
        for i, units in enumerate(per_section)
        if embed is not None and len(units) >= 3 and sum(n for _, n in units) > target
    ]
    vectors: dict[int, np.ndarray] = {}
    if wanted and embed is not None:
        texts = [text[s:e] for i in wanted for (s, e), _ in per_section[i]]
        matrix = np.asarray(embed(texts), dtype=np.float32)
        row = 0
        for i in wanted:
            vectors[i] = matrix[row : row + len(per_section[i])]
            row += len(per_section[i])
    spans: list[Span] = []
    for i, units in enumerate(per_section):
        if i in vectors:
            spans.extend(
                semantic_pack(
                    units,
                    vectors[i],
                    target_tokens=target,
                    min_tokens=min_tokens,
                    percentile=percentile,
                )
            )
        else:
            spans.extend(pack(units, target))
    return spans


def page_range(pages: Sequence[Span], start: int, end: int) -> tuple[int | None, int | None]:
    """1-based first and last page overlapping ``[start, end)``; ``(None, None)`` if none.

    Example:
        >>> page_range([(0, 10), (12, 30)], 5, 20)
        (1, 2)
    """
    hit = [number for number, (s, e) in enumerate(pages, start=1) if s < end and start < e]
    return (hit[0], hit[-1]) if hit else (None, None)


def heading_paths(text: str, starts: Sequence[int], *, markup: str = MARKDOWN) -> list[str]:
    """The heading path in force at each offset in ``starts`` (ascending).

    Example:
        >>> heading_paths("# A\n\n## B\n\nx", [9])
        ['A > B']
    """
    found = headings(text, markup=markup)
    paths: list[str] = []
    stack: list[tuple[int, str]] = []
    i = 0
    for offset in starts:
        while i < len(found) and found[i][0] <= offset:
            _, level, title = found[i]
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [(level, title)]
            i += 1
        paths.append(" > ".join(t for _, t in stack))
    return paths
