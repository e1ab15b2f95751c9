"""Main content of an HTML page: page furniture (menus, breadcrumbs, link bars) removed.

Contract: :func:`prune_boilerplate` removes from a parsed BeautifulSoup tree every
block that Resiliparse's main-content extractor leaves out *and* whose text is
mostly link text. Resiliparse decides what the page's content is (its rules read
the whole tree: element roles, class names, link density, position); the link
rule is a veto for prose it drops by mistake (a texinfo paragraph full of
``<code>`` names, say), since navigation is made of links and prose is not. A block
the page itself declares furniture (``nav``, ``header``, ``footer``, ``aside``,
``address`` or an
ARIA landmark role of those kinds) needs no link rule: Resiliparse's omission is
enough.
Headings, ``<pre>`` and ``<code>`` are never removed, nor a block that holds one
(its other parts are judged one by one) unless it is a declared menu (``nav``,
``aside``, ``role="navigation"``), whose heading is its caption. The caller
converts what is left, so the text the bundle stores, and every span into it,
comes from one conversion.
"""

from typing import Any

_NON_TEXT = ("script", "style", "noscript", "template", "svg", "iframe", "form", "button")
# Elements judged as a whole; inline elements are judged with the block around them.
_CANDIDATES = frozenset(
    {
        *("div", "section", "article", "main", "nav", "header", "footer", "aside", "menu"),
        *("table", "thead", "tbody", "tfoot", "tr", "td", "th", "ul", "ol", "li", "dl"),
        *("dt", "dd", "p", "blockquote", "figure", "figcaption", "center", "font", "address"),
    }
)
# Page furniture by the page's own declaration: no link rule needed to confirm it.
_FURNITURE = frozenset({"nav", "header", "footer", "aside", "address"})
_FURNITURE_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary"})
_MENUS = frozenset({"nav", "aside", "navigation", "complementary"})
_KEEP = frozenset({"pre", "code", "h1", "h2", "h3", "h4", "h5", "h6"})
_NGRAM = 3
LINK_SHARE = 0.5
"""A block is navigation only if at least this share of its words is link text."""
COVERED_SHARE = 0.5
"""... and less than this share of its word trigrams is in the extracted main content."""


def main_content_shingles(data: bytes) -> set[tuple[str, ...]]:
    """Word n-grams up to trigrams (lower case) of the page's main content as Resiliparse
    extracts it.

    Raises:
        ImportError: Resiliparse is not installed (``pip install resiliparse``).
    """
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("HTML ingest needs resiliparse: pip install resiliparse") from exc
    tree = HTMLTree.parse_from_bytes(data)
    text = extract_plain_text(
        tree, main_content=True, preserve_formatting=False, list_bullets=False, links=False
    )
    words = _words(text)
    # Shorter n-grams too, so a block of one or two words can be looked up.
    return {tuple(words[i : i + n]) for n in range(1, _NGRAM + 1) for i in range(len(words))}


def _words(text: str) -> list[str]:
    return text.lower().split()


def _shingles(words: list[str]) -> list[tuple[str, ...]]:
    if len(words) < _NGRAM:
        return [tuple(words)] if words else []
    return [tuple(words[i : i + _NGRAM]) for i in range(len(words) - _NGRAM + 1)]


def _is_navigation(element: Any, content: set[tuple[str, ...]]) -> bool:
    words = _words(element.get_text(" "))
    if not words:
        return False
    declared = element.name in _FURNITURE or element.get("role") in _FURNITURE_ROLES
    linked = sum(len(_words(a.get_text(" "))) for a in element.find_all("a"))
    if not declared and linked < LINK_SHARE * len(words):
        return False
    shingles = _shingles(words)
    covered = sum(1 for s in shingles if s in content)
    return covered < COVERED_SHARE * len(shingles)


def prune_boilerplate(body: Any, content: set[tuple[str, ...]]) -> int:
    """Remove non-text elements and navigation blocks from ``body`` in place.

    Args:
        body: a BeautifulSoup tag (the page's ``<body>``).
        content: :func:`main_content_shingles` of the same page.

    Returns:
        The number of navigation blocks removed.
    """
    for tag in body.find_all(list(_NON_TEXT)):
        tag.decompose()
    removed = 0
    stack = [child for child in body.children if getattr(child, "name", None)]
    while stack:
        element = stack.pop()
        if element.name in _KEEP:
            continue
        # A block holding a heading or code is judged by its parts, never dropped whole,
        # unless it declares itself a menu (the heading is then the menu's caption).
        menu = element.name in _MENUS or element.get("role") in _MENUS
        whole = menu or element.find(list(_KEEP)) is None
        if element.name in _CANDIDATES and whole and _is_navigation(element, content):
            element.decompose()
            removed += 1
        elif element.name != "p":
            stack.extend(c for c in element.children if getattr(c, "name", None))
    return removed
