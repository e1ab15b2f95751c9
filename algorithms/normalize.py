"""Surface-form normalization for entity mentions (pure functions, no models).

Contract: ``normalize_surface`` maps spelling variants of one name to one key —
case, NFKC width/compatibility forms, invisible format characters, mixed-script
lookalike letters (Cyrillic ``а`` inside a Latin word), whitespace,
hyphens and most punctuation, possessives, leading articles, Greek letters
spelled out, standalone Roman numerals II-X as digits, and the plural of the
last word — while keeping every character that distinguishes one thing from
another (digits, letters, words).
"""

import functools
import json
import re
import unicodedata
from importlib import resources

_GREEK = {
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "δ": "delta",
    "ε": "epsilon",
    "κ": "kappa",
    "λ": "lambda",
    "μ": "mu",
    "σ": "sigma",
    "τ": "tau",
    "ω": "omega",
}
_GREEK_TABLE = str.maketrans(_GREEK)
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "v": "5", "vi": "6", "vii": "7", "viii": "8"}
_ARTICLES = frozenset({"the", "a", "an", "this", "that", "these", "those", "its", "their"})
_IRREGULAR = {
    "mice": "mouse",
    "men": "man",
    "women": "woman",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "people": "person",
    "data": "data",
    "criteria": "criterion",
    "phenomena": "phenomenon",
    "analyses": "analysis",
    "diagnoses": "diagnosis",
    "metastases": "metastasis",
}
_INVARIANT = frozenset({"diabetes", "series", "species", "news", "means", "herpes", "rabies"})
_KEEP_S = ("ss", "us", "is", "ous", "sis", "xis")
_PUNCT = re.compile(r"[^\w\s+]")
# Invisible format characters that must not split a name: zero-width space/joiners,
# word joiner, soft hyphen, byte-order mark.
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\u00ad\ufeff]")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
_ASCII_LETTER = re.compile("[a-z]")
_POSSESSIVE = re.compile(r"['’](s)?\b")


@functools.cache
def _latin_lookalikes() -> dict[str, str]:
    """Non-Latin letters that render like an ASCII letter (Unicode TR39 confusables data,
    as shipped by ``confusable_homoglyphs``), e.g. Cyrillic ``а`` -> ``a``."""
    table = json.loads(
        resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    )
    folded: dict[str, str] = {}
    for char, glyphs in table.items():
        if len(char) != 1 or char.isascii() or not char.isalpha():
            continue
        if unicodedata.name(char, "").startswith("LATIN"):
            continue
        for glyph in glyphs:
            target = glyph["c"]
            if len(target) == 1 and target.isascii() and target.isalpha():
                folded[char] = target.lower()
                break
    return folded


def fold_mixed_script(text: str) -> str:
    """Replace non-Latin lookalike letters inside words that also hold ASCII letters.

    A word written wholly in another script (``Дунай``) is left alone; only the
    mixed-script spoof (``Dаnube`` with a Cyrillic ``а``) is folded to Latin.

    Example:
        >>> fold_mixed_script("d\u0430nube")
        'danube'
    """
    if text.isascii():
        return text
    lookalikes = _latin_lookalikes()

    def fold(match: re.Match[str]) -> str:
        word = match.group()
        if word.isascii() or not _ASCII_LETTER.search(word):
            return word
        return "".join(lookalikes.get(ch, ch) for ch in word)

    return _WORD.sub(fold, text)


def singular(word: str) -> str:
    """English singular of a lowercase word (rules plus a few irregulars).

    Words with digits, of four letters or fewer, or ending in -ss/-us/-is are kept.
    """
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word in _INVARIANT:
        return word
    if len(word) <= 4 or not word.isalpha() or word.endswith(_KEEP_S):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def normalize_surface(surface: str) -> str:
    """Normalized key of a mention's surface form; ``""`` when nothing is left.

    Example:
        >>> normalize_surface("The TNF-α's receptors")
        'tnf alpha receptor'
    """
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", surface))
    text = fold_mixed_script(text.casefold().translate(_GREEK_TABLE))
    text = _POSSESSIVE.sub(" ", text)  # possessives: X's, Xs'
    text = _PUNCT.sub(" ", text.replace("_", " "))
    words = _SPACE.sub(" ", text).strip().split(" ")
    while words and words[0] in _ARTICLES:
        words = words[1:]
    words = [_ROMAN.get(w, w) if i else w for i, w in enumerate(words)]
    if words and words[-1]:
        words[-1] = singular(words[-1])
    return " ".join(w for w in words if w)


def squashed(norm: str) -> str:
    """A normalized key without spaces: ``"micro rna"`` and ``"microrna"`` meet."""
    return norm.replace(" ", "")


def initials(norm: str) -> str:
    """First letters of a multi-word normalized name (``"body mass index"`` -> ``"bmi"``)."""
    words = [w for w in norm.split(" ") if w not in {"of", "and", "the", "for", "in", "to"}]
    return "".join(w[0] for w in words) if len(words) >= 2 else ""


def is_acronym(surface: str) -> bool:
    """A short form: 2-10 characters, no spaces, at least two capitals, e.g. ``UPI``, ``IL-6``."""
    text = surface.strip()
    return (
        2 <= len(text) <= 10
        and " " not in text
        and sum(ch.isupper() for ch in text) >= 2
        and text[0].isalnum()
    )


def distinguishing_tokens(norm: str) -> frozenset[str]:
    """Tokens that name *which* thing: numbers, letters-with-digits and single letters."""
    return frozenset(
        w for w in norm.split(" ") if any(ch.isdigit() for ch in w) or (len(w) == 1 and w.isalpha())
    )
