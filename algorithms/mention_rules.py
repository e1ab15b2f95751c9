"""Which spans of a chunk may be entity mentions: blocks, clean surfaces, named phrases.

Contract: pure functions over a chunk's text and spaCy tokens, used by
:func:`algorithms.extract.find_mentions`.

- :func:`technical_label` types a URL, a path or file name, or a code identifier or
  option (``URL``, ``PATH``, ``CODE``) whatever spaCy's label.
- :func:`text_blocks` cuts a chunk into the blocks no mention may cross: each line
  of fenced or indented code, each table cell, each heading, each list item
  (with its continuation lines) and each prose paragraph.
- :func:`clean_surface` rejects text that is not a name: markup or code
  punctuation, a cut through a word or a quotation, columns laid out with spaces,
  a value (a number, a hex or version string, ``NULL``).
- :func:`names_something` keeps a noun phrase as an entity only when its head word
  is a name: an identifier-shaped word, an acronym that is no common English word,
  or a capitalized word that does not start its sentence or is tagged a proper
  noun (in a heading or a title-case line, only a word's shape counts). Other
  phrases ("same reason", "Python scripts") are the language, not the corpus, and
  stay literal objects of statements: on the hand-labelled sample of real manuals
  (``benchmarks/data/entity_junk_before.jsonl``) no general-English rarity threshold
  kept lower-case phrases at better than half precision (the issue 58 report).
- :func:`common_alone` rejects a common word standing alone ("Description",
  "Delete" as a table cell), by wordfreq's Zipf frequency; :func:`common_opening` a
  common word whose capital is only its sentence's ("Relax hardcoded limits");
  :func:`common_words` a heading's or title-case line's words ("Cache Simulation
  Specifics").
- :func:`relabelled` corrects spaCy's news-trained label of an acronym
  ("XSLT" as GPE) to ``TERM``.
"""

import re
from typing import Any, NamedTuple

from algorithms.normalize import singular

# Technical names are their own kinds: spaCy's news-trained labels read "get-pip.py" as
# a person or a nationality. Each pattern must match the mention's whole text.
_URL = re.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+", re.I)
FILE_EXTENSIONS = (
    # file-name extensions that make a dotted token a file name (regex alternatives)
    "py|pyi|ipynb|txt|md|rst|html?|xml|json|jsonl|ya?ml|toml|cfg|ini|conf|c|h|cc|cpp|hpp|"
    "js|ts|java|go|rs|rb|pl|sh|bash|sql|csv|tsv|log|pdf|gz|tgz|bz2|xz|zip|tar|deb|rpm|"
    "so|dll|exe|whl|lock|css|png|jpe?g|svg"
)
_PATH = re.compile(
    r"(?:~|\.{1,2})?/(?:[\w.+-]+/)*[\w.+-]+/?"  # /etc/ssh, ~/notes, ./configure
    # a relative path needs two slashes ("and/or" has one), names of two or more characters
    # and a lower-case first name ("S/G2/M-phase" is a cell-cycle phase, "TCP/IP/UDP" no path)
    r"|(?=(?-i:[^/]*[a-z]))[\w.+-]{2,}(?:/[\w.+-]{2,}){2,}/?"
    rf"|(?:[\w.+-]+/)*[\w+-][\w.+-]*\.(?:{FILE_EXTENSIONS})(?:\.\d+)*",  # get-pip.py
    re.I,
)
_CODE = re.compile(
    r"--?[A-Za-z][\w-]*(?:=\S*)?"  # an option: --flag, -v
    r"|[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\(\)"  # a call: name(), pkg.name()
    r"|[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+"  # a dotted name: json.dumps (not E.coli)
    r"|[A-Za-z]\w*_\w+"  # snake_case, CONSTANT_NAME
    r"|[a-z]+(?:[A-Z][a-z0-9]+)+"  # camelCase
)
TECHNICAL_LABELS = ("URL", "PATH", "CODE")


def technical_label(text: str) -> str | None:
    """``URL``, ``PATH`` (a path or file name) or ``CODE`` (an identifier or option)
    when the whole of ``text`` is one, else None.

    Example:
        >>> [technical_label(t) for t in ("get-pip.py", "json.dumps", "Black Sea")]
        ['PATH', 'CODE', None]
    """
    stripped = text.strip()
    if not stripped or any(ch.isspace() for ch in stripped):
        return None
    for label, pattern in (("URL", _URL), ("PATH", _PATH), ("CODE", _CODE)):
        if pattern.fullmatch(stripped):
            return label
    return None


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


# Markup and code punctuation that a name never holds (a technical label is checked
# first), a spaced dash (a heading's "Processing - Transitional"), "i.e." and "e.g.".
_MARKUP = re.compile(
    r"[|\[\]<>{}=#*\\`~^;@$%(),]|'(?!s\b)|->|::|\s[-\u2013\u2014]\s|\b(?:i\.e|e\.g)\b",
    re.IGNORECASE,
)
# A list of things is no one thing ("python-minimal, python-dev and python-doc").
_COORDINATED = re.compile(r"\s(?:and|or|&)\s", re.IGNORECASE)
# A value inside a name: a hex number, a postal or version code ("MA 02110-1301").
_VALUE_TOKEN = re.compile(r"\b0x[0-9a-f]+\b|\b\d+-\d+\b", re.IGNORECASE)
_VALUE = re.compile(
    r"[-+]?(?:0x[0-9a-f]+|\d[\d,.]*\w{0,3}|v?\d+(?:\.\d+)+\S*|(?=[a-f]*\d)[0-9a-f]{8,})",
    re.IGNORECASE,
)
_VALUE_WORDS = frozenset(
    "null nil none true false undefined nan void eof ok yes no n/a".split()  # noqa: SIM905
)
_LEFT_EDGE = frozenset(" \t\n([{<\"'`*_")
_RIGHT_EDGE = frozenset(" \t\n)]}>\"'`*_.,;:!?")
COMMON_ZIPF = 4.0
"""A word at least this frequent in general English (wordfreq's Zipf scale: 4.0 is
once in 100,000 words) is a common word: "Description", "HELP", "Features"."""


def whole_words(before: str, after: str) -> bool:
    """Whether a span between the characters ``before`` and ``after`` (``""`` at a
    block's edge) starts and ends at word edges: "fstab" in "/etc/fstab" does not."""
    return (not before or before in _LEFT_EDGE) and (not after or after in _RIGHT_EDGE)


def zipf(word: str) -> float:
    """``word``'s frequency in general English on wordfreq's Zipf scale, case ignored
    (wordfreq is imported on first use: the read path never needs it)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word.lower(), "en")


def common_word(word: str, threshold: float = COMMON_ZIPF) -> bool:
    """Whether ``word`` is a common English word: at least ``threshold`` on wordfreq's
    scale (see :data:`COMMON_ZIPF`)."""
    return zipf(word) >= threshold


def clean_surface(text: str, before: str, after: str, *, phrase: bool = False) -> bool:
    """Whether ``text``, between the characters ``before`` and ``after`` (``""`` at a
    block's edge), can be a name: whole words, no markup, not a value, and (for a noun
    ``phrase``) not a list of things.

    A quotation inside a name is part of it ('Richard "Dick" Humbert'); a quote mark
    without its pair is not ('Dick" Humbert').

    Example:
        >>> clean_surface("Black Sea", " ", "."), clean_surface("fstab", "/", "")
        (True, False)
    """
    if not whole_words(before, after) or text.count('"') % 2:
        return False  # a cut through a word, or through a quotation
    if "\t" in text or "  " in text:
        return False  # columns of a table or a signature laid out with spaces, no name
    if not any(ch.isalpha() for ch in text) or _MARKUP.search(text):
        return False
    if (phrase and _COORDINATED.search(text)) or _VALUE_TOKEN.search(text):
        return False
    return not (_VALUE.fullmatch(text.split()[0]) or text.lower() in _VALUE_WORDS)


LABEL_ZIPF = 3.0
"""A plain word at least this frequent that stands alone as its sentence (a heading, a
table cell, a list item: "Delete", "Instrumentation", "SYNOPSIS") is a label."""


SHOUTED_LENGTH = 7
"""Letters from which a word in capitals that is a common English word is that word
written loud ("WARRANTY"), not an acronym ("HTML", "UNIX")."""


def common_alone(span: Any, block: str = "") -> bool:
    """A one-word span that is a common English word and no proper noun ("Description",
    "Indicates"; "HELP" in capitals), unlike "Boston", or a plain word that stands
    alone as its sentence or its ``block`` (a table cell, see :data:`LABEL_ZIPF`)."""
    if len(span) != 1 or not _plain_word(span.text):
        return False
    frequency = zipf(span.text)
    alone = sum(1 for t in span[0].sent if t.is_alpha) == 1 or len(block.split()) == 1
    if alone and frequency >= LABEL_ZIPF:
        return True
    if span.text.isupper() and len(span.text) >= SHOUTED_LENGTH and frequency >= LABEL_ZIPF:
        return True  # "WARRANTY": an English word in capitals, too long for an acronym
    return frequency >= COMMON_ZIPF and (span.text.isupper() or span[0].pos_ != "PROPN")


def common_opening(span: Any, block: Block, *, named: bool) -> bool:
    """A one-word span whose capital is only its place's: it opens a table cell, a list
    item or a heading ("List all sandboxes"), or its sentence ("Relax hardcoded
    limits", "Installation of pythonX.Y shall ..."), where ``named`` (spaCy's entity
    label on a word its tagger reads as a proper noun: "Copenhagen is ...") does not
    vouch for it; is a common English word (see :data:`LABEL_ZIPF`); and nowhere in its
    chunk is capitalized inside a sentence."""
    if len(span) != 1 or not _plain_word(span.text) or span.text.isupper():
        return False
    token, text = span[0], span.doc.text
    opens_block = not re.search(r"[^\W\d_]", text[block.start : token.idx])
    sentence = token.sent
    opens_sentence = not any(t.is_alpha for t in sentence[: token.i - sentence.start])
    placed = opens_block and block.kind in ("cell", "item", "heading")
    if not placed and (named or not (opens_sentence or opens_block)):
        return False
    word = span.text.lower()
    if max(zipf(word), zipf(singular(word))) < LABEL_ZIPF:
        return False  # "Mailboxes" is as common as "mailbox"
    inside = re.compile(rf"[a-z,;][ \t]+{re.escape(span.text)}\b")
    return inside.search(text) is None


TITLE_ZIPF = 2.5
"""In a heading or a title-case line, a span whose every word is at least this frequent
in general English ("Cache Simulation Specifics", "Forking Programs") is a title's
words, not a name."""


def common_words(text: str) -> bool:
    """Whether every word of ``text`` is a general English word (see :data:`TITLE_ZIPF`)."""
    words = re.findall(r"[^\W\d_]+", text)
    return bool(words) and all(common_word(w, TITLE_ZIPF) for w in words)


def _plain_word(text: str) -> bool:
    """A word of letters in one case or capitalized: "Features", "HELP", not "MacOS"."""
    return text.isalpha() and (text.isupper() or text[1:].islower())


_TITLE_SMALL_WORDS = frozenset(
    """with from into onto over upon than that this your their about after before under
    between without within through using""".split()  # noqa: SIM905
)


def titled(text: str) -> bool:
    """Whether ``text`` (a sentence or a block) is a heading or written in title case, where
    a capital says nothing about a name ("Simulation Details", "Kernel-Dependent Patches",
    "Merging Profiles with cg_merge": small words and identifiers aside)."""
    if text.lstrip().startswith("#"):
        return True
    words = [
        w
        for w in re.findall(r"[A-Za-z][\w-]*", text)
        if len(w) >= 4 and w not in _TITLE_SMALL_WORDS and "_" not in w
    ]
    return len(words) >= 2 and all(w[0].isupper() for w in words)


def _name_token(token: Any, *, title: bool) -> bool:
    text = token.text
    if not any(ch.isalpha() for ch in text):
        return False
    if any(ch.isdigit() for ch in text) or "_" in text or any(c.isupper() for c in text[1:-1]):
        # an identifier, camelCase, or an acronym that is no common word ("EPROTO", not
        # "HELP"), nor a word of a line in capitals ("EXPRESS OR IMPLIED")
        if title and text.isalpha() and text.isupper():
            return False
        return not (_plain_word(text) and common_word(text))
    if not text[0].isupper() or title:
        return False
    # A capital that starts a sentence proves nothing, unless the tagger reads a name or
    # the word is no general English word ("Valgrind runs ...").
    if token.pos_ == "PROPN":
        return True
    if token.pos_ not in {"NOUN", "ADJ"}:
        return False
    return not token.is_sent_start or not common_word(text, LABEL_ZIPF)


def name_word(token: Any, *, title: bool = False) -> bool:
    """Whether one word is a name by the rule of :func:`names_something`."""
    return _name_token(token, title=title)


def names_something(tokens: Any, *, title: bool = False) -> bool:
    """Whether a noun phrase (a spaCy span) names something: its head word is a name
    (see the module docstring). "EdDSA", "Shelley Vohr" and "Node.js" are;
    "Python scripts" and "XML declaration" are not: their name only modifies a
    common noun. In a ``title`` (see :func:`titled`) only a word's shape shows a name.
    """
    return _name_token(tokens.root, title=title)


_MODIFIERS = frozenset({"ADJ", "ADV", "NUM", "VERB", "DET", "PRON", "PART", "X"})


def title_words_trimmed(span: Any) -> int:
    """Token index where a candidate in a title starts once its leading capitalized
    common words (verbs, nouns: not proper nouns) are dropped, when a rare word or an
    identifier follows ("Discuss PyYAML" -> "PyYAML", "Parsing DTDs" -> "DTDs"); else
    its start."""

    def rare(token: Any) -> bool:
        text = token.text
        if not any(ch.isalpha() for ch in text):
            return False
        return _name_token(token, title=True) or not common_word(text, TITLE_ZIPF)

    start = span.start
    while start < span.end - 1 and span.doc[start].is_alpha and not rare(span.doc[start]):
        if span.doc[start].pos_ == "PROPN":
            return span.start  # "Christian Tellnes": a first name, not a title's verb
        start += 1
    return start if any(rare(t) for t in span.doc[start : span.end]) else span.start


def modifiers_trimmed(span: Any, *, title: bool = False) -> int:
    """Token index where a noun phrase starts once its leading lower-case modifiers are
    dropped ("given ffi_cif" -> "ffi_cif", "different C standard libraries" -> "C
    standard libraries"), and a lower-case noun before a name ("vocalist King Diamond"
    -> "King Diamond", "callback URL" -> "URL"); a joined word ("system-provided") goes
    whole or not at all; never past the phrase's last token."""
    doc, start = span.doc, span.start

    def named_after(i: int) -> bool:
        return any(
            t.text[:1].isupper() or _name_token(t, title=title) for t in doc[i + 1 : span.end]
        )

    while start < span.end - 1:
        token = doc[start]
        if token.text[:1].isupper() or _name_token(token, title=title):
            break  # a capital may start a name ("Mercyful Fate" opening its sentence)
        if token.pos_ not in _MODIFIERS and not (token.pos_ == "NOUN" and named_after(start)):
            break
        stop = start
        while not doc[stop].whitespace_ and stop < span.end - 1:
            stop += 1  # the rest of a joined word
        if stop >= span.end - 1:
            return span.start  # the joined word runs into the head ("non-Windows")
        start = stop + 1
    return start


_ACRONYM = re.compile(r"[A-Z][A-Z0-9]+s?")
_NOT_ACRONYM_LABELS = frozenset({"GPE", "LOC", "FAC", "NORP", "PERSON", "LANGUAGE"})


def relabelled(text: str, label: str) -> str:
    """``TERM`` for a one-word acronym that spaCy calls a place, people or person
    (technical text is full of them: XSLT, PEP, SIGCONT), else ``label``."""
    if label in _NOT_ACRONYM_LABELS and _ACRONYM.fullmatch(text):
        return "TERM"
    return label


def lower_case_entity(text: str, label: str) -> bool:
    """A named-entity label on text without a capital letter ("ec" as ORG)."""
    return label != "TERM" and not any(ch.isupper() for ch in text)
