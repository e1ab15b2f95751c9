"""Explicit anchors in a query: what evidence must mention before it can be admitted.

An anchor is a quoted phrase, a version or number-bearing token (``3.11``,
``v2``, ``ISO-27001``), an acronym (``UPI``), a capitalized name that does
not start the sentence (``Black Sea``), or a token shaped like an identifier, even in
lower case: a call (``name()``), a dotted name (``json.dumps``), an option (``--flag``),
``snake_case``, ``camelCase``, ``CONSTANT_NAME``, ``libtasn1``, a file name or extension
(``setup.cfg``, ``.toml``), a number with a unit (``500 MB``), and a word presented
as an argument, constant, method, attribute or flag of a named module or object, even
a common word (``dance`` in "the dance=True argument of subprocess.run", ``fortnight``
in "the fortnight constant in datetime"). Rules only; deterministic. (Terms that are
anchors by rarity, absent from the corpus, come from :mod:`query.vocabulary`, which
knows the bundle.)
"""

import re

from algorithms.extract import FILE_EXTENSIONS

_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_VERSION = re.compile(
    r"\b(?:v(?:ersion)?\s?)?\d+(?:\.\d+)+\b|\bv\d+\b|\b[A-Za-z]+-\d+[A-Za-z0-9-]*\b"
)
_ACRONYM = re.compile(r"\b[A-Z]{2,}[0-9]*s?\b")
_WORD = r"(?:[A-Z][a-z]+(?:[A-Z][a-z]*)*\b|[A-Z]{2,}[0-9]*\b)"
_NAME = re.compile(rf"(?<![.?!]\s)(?<!^)\b({_WORD}(?:\s+(?:of\s+|the\s+)?{_WORD})*)(?![0-9])")
_EXTENSIONS = FILE_EXTENSIONS + "|service|socket|desktop|d"  # and systemd units, conf.d
_UNITS = (
    r"ms|us|ns|s|secs?|seconds?|min|minutes?|h|hrs?|hours?|days?|b|bytes?|kb|mb|gb|tb|"
    r"kib|mib|gib|tib|bits?|kbps|mbps|gbps|px|pt|em|hz|khz|mhz|ghz|mg|g|kg|ml|l|mm|cm|m|km"
)
_SHAPE = re.compile(
    r"(?<![\w.-])--?[A-Za-z][\w-]*"  # an option: --flag, -O
    r"|\b[A-Za-z_][\w.]*\(\)"  # a call: name(), pkg.name()
    r"|\b[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+\b"  # a dotted name: json.dumps (not e.g.)
    r"|\b[A-Za-z]\w*_\w+\b"  # snake_case, CONSTANT_NAME
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
    r"|\b[a-z]{2,}\d+[a-z0-9]*\b"  # letters then digits: libtasn1, sha256
    rf"|\b[\w-]+\.(?i:{_EXTENSIONS})\b|(?<![\w.])\.(?i:{_EXTENSIONS})\b"  # files, .ext
    rf"|\b\d+(?:\.\d+)?\s?(?:%|(?i:{_UNITS})\b)",  # a number with a unit
)
# A word presented as a named module's argument, constant, method, attribute or flag
# is an anchor even when it is a common word: "the dance=True argument of
# subprocess.run", "the fortnight constant in datetime".
_KEYWORD_ARGUMENT = re.compile(r"(?<![\w.=-])([A-Za-z_]\w*)=(?!=)")
_ROLES = (
    r"arguments?|args?|parameters?|params?|keywords?|kwargs?|options?|flags?|switch(?:es)?"
    r"|constants?|attributes?|attrs?|methods?|functions?|propert(?:y|ies)|fields?|members?"
)
_OWNER = r"[A-Za-z_][\w.]*(?:\(\))?"
_ROLE_OF = re.compile(
    rf"\b(?:the|a|an)\s+[`'\"]?([A-Za-z_][\w-]*)[`'\"]?\s+(?i:{_ROLES})\s+"
    rf"(?:of|in|from|on)\s+(?:the\s+)?[`'\"]?{_OWNER}"
)
# Words that describe a role rather than name it ("the first argument of print").
_DESCRIPTIVE = frozenset(
    """
    first second third last next previous same other new old optional required positional
    keyword default main only following given named extra additional special each every
    this that which what its their your my our any some single multiple corresponding
    """.split()  # noqa: SIM905 - a word list reads better as text
)
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
    patterns = (
        (_QUOTED, 1),
        (_SHAPE, 0),
        (_VERSION, 0),
        (_ACRONYM, 0),
        (_NAME, 1),
        (_KEYWORD_ARGUMENT, 1),
        (_ROLE_OF, 1),
    )
    for pattern, group in patterns:
        for match in pattern.finditer(query):
            text = match.group(group).strip()
            if text and text not in _IGNORED and text.lower() not in _DESCRIPTIVE:
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
