"""The blocks of a chunk's text that no mention crosses, and its prose.

Contract: :func:`text_blocks` cuts a chunk's text into blocks (each line of fenced or
indented code, each table cell, each heading, underlined and link-label ones included,
each list item with its continuation lines, each prose paragraph); :func:`block_of`
finds the block that holds a range; :func:`prose` is the text with its code blanked.
Pure functions of the text.
"""

import re
from typing import Any, NamedTuple


class Block(NamedTuple):
    """A ``[start, end)`` character range of a chunk and its kind: ``code``, ``cell`` (of
    a table), ``heading``, ``item`` (of a list) or ``text`` (a paragraph)."""

    start: int
    end: int
    kind: str


_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
# A Markdown link reference definition ("[Working Groups]: https://..."): its label
# titles the linked page, like a heading.
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S")
_INDENTED = re.compile(r"^(?: {4}|\t)\S")
_UNDERLINE = re.compile(r"^\s{0,3}(?:-{3,}|={3,})\s*$")


def _cells(line: str, offset: int) -> list[Block]:
    found, start = [], 0
    for i, ch in enumerate(line + "|"):
        if ch == "|":
            if line[start:i].strip():
                found.append(Block(offset + start, offset + i, "cell"))
            start = i + 1
    return found


def text_blocks(text: str) -> list[Block]:
    """The blocks of ``text`` in order (blank lines and table pipes belong to none).

    Example:
        >>> [text[b.start:b.end] for b in text_blocks(text := "- a b\\n- c\\n\\n| d | e |")]
        ['- a b', '- c', ' d ', ' e ']
    """
    blocks: list[Block] = []
    open_block: list[Any] | None = None  # [start, end, kind] of the paragraph or item read
    in_code = False
    offset = 0
    lines = text.split("\n")
    underlined = {  # a heading underlined with "---" or "===" (setext)
        i for i in range(len(lines) - 1) if lines[i].strip() and _UNDERLINE.match(lines[i + 1])
    }
    for i, line in enumerate(lines):
        start, end = offset, offset + len(line)
        offset = end + 1
        if i - 1 in underlined:
            line = ""  # the underline: no block, like a blank line
        fence = bool(_FENCE.match(line))
        heading = bool(_HEADING.match(line) or _LINK_DEFINITION.match(line)) or i in underlined
        special = fence or in_code or not line.strip() or line.lstrip().startswith("|")
        special = special or heading or bool(_LIST_ITEM.match(line))
        indented_code = bool(_INDENTED.match(line)) and open_block is None
        if open_block is not None and (special or indented_code):
            blocks.append(Block(*open_block))
            open_block = None
        if fence:
            in_code = not in_code
        elif in_code or indented_code:
            blocks.append(Block(start, end, "code"))
        elif line.lstrip().startswith("|"):
            blocks.extend(_cells(line, start))
        elif heading:
            blocks.append(Block(start, end, "heading"))
        elif line.strip():
            # A list item opens its own block (the one before was closed above); its
            # continuation lines, like a paragraph's wrapped lines, join it.
            if open_block is None:
                open_block = [start, end, "item" if _LIST_ITEM.match(line) else "text"]
            else:
                open_block[1] = end
    if open_block is not None:
        blocks.append(Block(*open_block))
    return blocks


def block_of(blocks: list[Block], start: int, end: int) -> Block | None:
    """The block that holds all of ``[start, end)``, or None where the range crosses one."""
    for block in blocks:
        if block.start <= start and end <= block.end:
            return block
        if block.start >= end:
            break
    return None


_INLINE_CODE = re.compile(r"`[^`\n]*`")


def prose(doc: Any) -> str:
    """``doc``'s text with its code (blocks and inline) blanked out, offsets kept: where a
    lower-case word is a word, not a command or a value (``python3``, ``'android'``)."""
    cached = doc.user_data.get("evidex.prose")
    if cached is None:
        chars = list(_INLINE_CODE.sub(lambda m: " " * len(m.group()), doc.text))
        for block in text_blocks(doc.text):
            if block.kind == "code":
                chars[block.start : block.end] = " " * (block.end - block.start)
        cached = doc.user_data["evidex.prose"] = "".join(chars)
    return cached
