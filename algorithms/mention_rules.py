"""Which spans of a chunk may be entity mentions: clean surfaces and named phrases.

Contract: pure functions over a chunk's text and spaCy tokens, used by
:func:`algorithms.mentions.find_mentions` (with :mod:`algorithms.text_blocks`, the
blocks no mention crosses, and :mod:`algorithms.capitals`, whether a capital is a
name's or only its place's).

- :func:`technical_label` types a URL, a path or file name, or a code identifier or
  option (``URL``, ``PATH``, ``CODE``) whatever spaCy's label.
- :func:`clean_surface` rejects text that is not a name: markup or code
  punctuation, a cut through a word or a quotation, columns laid out with spaces,
  a value (a number, a hex or version string, ``NULL``, a unit, a section number).
- :func:`names_something` keeps a noun phrase as an entity only when its head word
  is a name: an identifier-shaped word, an acronym that is no common English word
  nor in the plural, or a capitalized word that does not start its sentence or is
  tagged a proper noun (in a heading or a title-case line, only a word's shape
  counts). Other phrases ("same reason", "Python scripts") are the language, not the
  corpus, and stay literal objects of statements: on the hand-labelled sample of real
  manuals (``benchmarks/data/entity_junk_before.jsonl``) no general-English rarity
  threshold kept lower-case phrases at better than half precision (the issue 58
  report).
- :func:`relabelled` corrects spaCy's news-trained label of an acronym
  ("XSLT" as GPE) to ``TERM``.
"""

import re
from typing import Any

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


# Markup and code punctuation that a name never holds (a technical label is checked
# first), a spaced dash (a heading's "Processing - Transitional"), "i.e." and "e.g.".
_MARKUP = re.compile(
    r"[|\[\]<>{}=#*\\`~^;@$%(),]|'(?!s\b)|->|::|\s[-\u2013\u2014]\s|\b(?:i\.e|e\.g)\b",
    re.IGNORECASE,
)
# A list of things is no one thing ("python-minimal, python-dev and python-doc").
_COORDINATED = re.compile(r"\s(?:and|or|&)\s|\w: ", re.IGNORECASE)
# A value inside a name: a hex number, a postal or version code ("MA 02110-1301"), a
# place in a source file ("pptxml.cc:44").
_VALUE_TOKEN = re.compile(r"\b0x[0-9a-f]+\b|\b\d+-\d+\b|\.\w+:\d+\b", re.IGNORECASE)
_VALUE = re.compile(
    r"[-+]?(?:0x[0-9a-f]+|\d[\d,.]*\w{0,3}|v?\d+(?:\.\d+)+\S*|(?=[a-f]*\d)[0-9a-f]{8,})",
    re.IGNORECASE,
)
_VALUE_WORDS = frozenset(
    """null nil none true false undefined nan void eof ok yes no n/a infinity inf
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    monday tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905
)
"""Values, not things: literals of code, and a date's month or weekday alone."""
# A unit of a quantity ("MiB", "MHz"), and a part of a document ("Section 2.3").
_UNIT = re.compile(r"[KMGTP]iB|[kMGT]?Hz|[kMG]bps")
_REFERENCE = re.compile(r"(?:Section|Chapter|Figure|Table|Appendix|Paragraph) [\d.]+")
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
    value = re.sub(r"^non[\s-]+", "", text.lower())  # "non NULL", "non-NaN": values too
    if _UNIT.fullmatch(text) or _REFERENCE.fullmatch(text):
        return False
    return not (_VALUE.fullmatch(text.split()[0]) or value in _VALUE_WORDS)


LABEL_ZIPF = 3.0
"""A plain word at least this frequent that stands alone as its sentence (a heading, a
table cell, a list item: "Delete", "Instrumentation", "SYNOPSIS") is a label."""


TITLE_ZIPF = 2.5
"""In a heading or a title-case line, a span whose every word is at least this frequent
in general English ("Cache Simulation Specifics", "Forking Programs") is a title's
words, not a name."""


def plain_word(text: str) -> bool:
    """A word of letters in one case or capitalized: "Features", "HELP", not "MacOS"."""
    return text.isalpha() and (text.isupper() or text[1:].islower())


def code_like(word: str) -> bool:
    """Whether a word reads as an acronym or an identifier: a capital after its first
    letter, an underscore, or letters with digits ("SAX", "xmlNodePtr", "D1", not
    "Wai-Sun" or "8601"); surrounding punctuation ignored."""
    for part in word.strip("\"'()[]{}.,;:").split("-"):
        if "_" in part or any(ch.isupper() for ch in part[1:]):
            return True
        if any(ch.isdigit() for ch in part) and any(ch.isalpha() for ch in part):
            return True
    return False


_PLURAL_ACRONYM = re.compile(r"(?:[A-Z][A-Z0-9]*/)*[A-Z][A-Z0-9]*[A-Z]s")


def plural_acronym(text: str) -> bool:
    """An acronym in the plural ("APIs", "CPUs", "UID/GIDs", "SNPs"): a class of things,
    not one named thing."""
    return _PLURAL_ACRONYM.fullmatch(text) is not None


def _name_token(token: Any, *, title: bool) -> bool:
    text = token.text
    if not any(ch.isalpha() for ch in text) or plural_acronym(text):
        return False
    if any(ch.isdigit() for ch in text) or "_" in text or any(c.isupper() for c in text[1:-1]):
        # an identifier, camelCase, or an acronym that is no common word ("EPROTO", not
        # "HELP"), nor a word of a line in capitals ("EXPRESS OR IMPLIED")
        if title and text.isalpha() and text.isupper():
            return False
        return not (plain_word(text) and common_word(text))
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
    common noun. In a ``title`` (see :func:`algorithms.capitals.titled`) only a word's
    shape shows a name.
    """
    return _name_token(tokens.root, title=title)


_MODIFIERS = frozenset({"ADJ", "ADV", "NUM", "VERB", "DET", "PRON", "PART", "X"})


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
