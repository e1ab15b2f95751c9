"""Transparent, rule-based routing: which operation a query asks for, and which surfaces
serve it. Every decision carries the rules that fired.

Operations: ``lookup`` (exact/local), ``synthesis`` (across sources),
``comparison`` (compares named things), ``multihop`` (a question about a thing named
through another: "the director of the film X"), ``temporal`` (current or dated fact),
``entity`` (named entity or version), ``out_of_scope``.

The graph arm (``walk``, :mod:`query.graph`) serves every question with a multi-hop cue:
a nested description, or two or more named things. Statements, comparisons among them
(SciFact's claims: "X is more common than Y"), and questions without a cue never call it.
"""

import re
from collections.abc import Callable
from typing import NamedTuple

from query.anchors import find_anchors

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
# A comparison needs two compared things or an explicit comparison word: "more" or
# "better" alone ("there is no more input") compares nothing, and neither does a quantity
# after "than" ("more than 10 connections", "more than one line": a bound, issue 58).
_QUANTITY = (
    r"\d|an?\b|one\b|two\b|three\b|four\b|five\b|six\b|seven\b|eight\b|nine\b|ten\b|"
    r"eleven\b|twelve\b|twenty\b|hundred\b|thousand\b|million\b|billion\b|dozen\b|"
    r"half\b|once\b|twice\b|few\b|several\b"
)
_COMPARISON = re.compile(
    r"\b(?:compare[sd]?|comparing|comparison|versus|vs\.?)(?!\w)"
    r"|\b(?:difference|differences|differ|differs)\s+(?:between|from)\b"
    r"|\bdifferent\s+from\b"
    r"|\bbetween\s+\S+(?:\s+\S+){0,4}?\s+and\s+\S+"
    r"|\bboth\s+\S+(?:\s+\S+){0,4}?\s+and\s+\S+"
    r"|\bwhich\b[^?]*,\s*\S+(?:\s+\S+){0,4}?\s+or\s+\S+"
    r"|\b(?:more|less|fewer|better|worse|\w{2,}er)\s+(?:\w+\s+){0,3}?than\s+(?!"
    rf"{_QUANTITY})\S+",
    re.I,
)
# A temporal route needs a time expression: a year, a month and day, a date, or words
# about the current state (spaCy's DATE entities add "last week" and the like).
# "after installing" or "before the call" order steps; they name no time.
_TEMPORAL = re.compile(
    r"\b(?:current(?:ly)?|latest|nowadays|now|today|tonight|yesterday|tomorrow|"
    r"as of|still|recent(?:ly)?|up[- ]to[- ]date)\b"
    r"|\b(?:19|20)\d\d\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}\b|\b\d{{1,2}}\s+{_MONTH}\b"
    r"|\b\d{4}-\d{2}-\d{2}\b",
    re.I,
)
_RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("comparison", "compares named things", _COMPARISON),
    (
        "synthesis",
        "asks for an overview across sources",
        re.compile(
            r"\b(summari[sz]e|overview|main (themes|points|ideas)|in general|"
            r"all (the )?(ways|kinds|types)|what are the (key|main)|across)\b",
            re.I,
        ),
    ),
    ("temporal", "names a time or asks about the current state", _TEMPORAL),
)
# A question: it ends with a question mark or starts with a question word.
_QUESTION = re.compile(
    r"\?\s*$|^\W*(?:who|whom|whose|what|which|when|where|why|how|in\s+(?:what|which)|"
    r"is|are|was|were|did|does|do)\b",
    re.I,
)
# A multi-hop cue: a thing named through another. A description by a noun phrase ("the
# president of the association", "Hello Love's performer") is a cue only when the question
# names a thing to hop from: "the basic mechanism of the transonic aileron buzz" is ordinary
# phrasing. A relative clause or a question word inside a phrase ("the state that borders",
# "developed by what company", "whose director") nests on its own.
_DESCRIBED = re.compile(
    r"\bthe\s+(?:[\w-]+\s+){0,2}?[\w-]+\s+(?:of|by|for|from|in|at|on|with)\s+\S+"
    r"|\w['’]s\s+[\w-]+",
    re.I,
)
_CLAUSE = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w-]+\s+){0,3}?(?:which|that|who|whom|whose|where)\s+\w+"
    r"|\b(?:of|by|in|from|for|to|at|on|with|into)\s+(?:what|which|whom)\b"
    r"|\bwhose\s+[\w-]+",
    re.I,
)
_OUT_OF_SCOPE = re.compile(r"^\s*(hi|hello|hey|thanks|thank you|bye|ok|okay)\W*$", re.I)
_CONTENT_WORD = re.compile(r"[A-Za-z0-9]{3,}")

KNOWLEDGE_SURFACES = {
    "synthesis": ("communities", "relations"),
    "comparison": ("relations", "graph"),
    "multihop": ("walk",),
}


# spaCy labels that name a thing a query can be anchored on; value labels (MONEY,
# CARDINAL, PERCENT, ...) are left to the number/version rules, dates to the temporal rule.
NAME_LABELS = frozenset(
    {"PERSON", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "NORP", "FAC"}
)
TIME_LABELS = frozenset({"DATE", "TIME"})
Recognizer = Callable[[str], list[tuple[str, str]]]
"""Query text -> ``(entity text, label)`` pairs, e.g. a spaCy pipeline's ``doc.ents``."""


class Route(NamedTuple):
    """The routing decision for one query."""

    operation: str
    surfaces: tuple[str, ...]
    anchors: tuple[str, ...]
    reasons: tuple[str, ...]


def route(
    query: str,
    *,
    available: frozenset[str] = frozenset({"dense", "lexical"}),
    known_entities: Callable[[str], list[str]] | None = None,
    recognizer: Recognizer | None = None,
) -> Route:
    """Classify ``query`` and choose the surfaces that serve it.

    Args:
        query: the user's query.
        available: surfaces the bundle has (chunks are always ``dense``/``lexical``;
            ``relations``, ``communities``, ``graph`` and ``walk`` come with a knowledge
            layer).
        known_entities: anchor -> canonical entity names, when the bundle has entities;
            matches are reported among the reasons.
        recognizer: named-entity recognition (spaCy, see :class:`query.ner.QueryEntities`);
            names it finds become anchors, dates it finds are a temporal cue.
    """
    reasons: list[str] = []
    anchors = tuple(find_anchors(query))
    if _OUT_OF_SCOPE.match(query) or not _CONTENT_WORD.search(query):
        return Route("out_of_scope", (), anchors, ("no content words to look up",))
    dates: list[str] = []
    if recognizer is not None:
        for text, label in recognizer(query):
            key = text.lower()
            if label in TIME_LABELS:
                dates.append(text)
            elif label in NAME_LABELS and not any(
                key in a.lower() or a.lower() in key for a in anchors
            ):
                anchors = (*anchors, text)
                reasons.append(f"spaCy named entity {text!r} ({label})")
    operation = "lookup"
    for name, why, pattern in _RULES:
        match = pattern.search(query)
        if match:
            operation = name
            reasons.append(f"{why}: {match.group(0)!r}")
            break
    hops = _multihop_cue(query, anchors)
    if hops and operation in ("lookup", "entity"):
        operation = "multihop"
        reasons.append(hops)
    if operation == "lookup" and dates:
        operation = "temporal"
        reasons.append(f"spaCy date or time: {dates[0]!r}")
    if operation == "lookup" and anchors:
        operation = "entity"
        reasons.append(f"names specific anchors: {', '.join(anchors)}")
    if operation == "lookup":
        reasons.append("no comparative, synthesis, temporal or anchor cue: local lookup")
    if known_entities is not None:
        for anchor in anchors:
            names = known_entities(anchor)
            if names:
                reasons.append(f"anchor {anchor!r} is the canonical entity {names[0]!r}")
    surfaces: list[str] = [s for s in ("dense", "lexical") if s in available]
    wanted = list(KNOWLEDGE_SURFACES.get(operation, ()))
    if hops and "walk" not in wanted:
        wanted.append("walk")
        reasons.append(hops)
    for extra in wanted:
        if extra in available:
            surfaces.append(extra)
        else:
            reasons.append(f"surface {extra!r} not in this bundle: answered from chunk evidence")
    return Route(operation, tuple(surfaces), anchors, tuple(reasons))


def _multihop_cue(query: str, anchors: tuple[str, ...]) -> str | None:
    """Why the query is a multi-hop question, or ``None``: a question holding a nested
    description, or naming two or more things."""
    if not _QUESTION.search(query):
        return None
    nested = nested_description(query, anchors)
    if nested:
        return f"multi-hop cue, a thing named through another: {nested!r}"
    if len(anchors) >= 2:
        return f"multi-hop cue, a question naming {len(anchors)} things: {', '.join(anchors)}"
    return None


def nested_description(query: str, anchors: tuple[str, ...]) -> str | None:
    """The first description in ``query`` of a thing through another, or ``None``: a
    relative clause or a question word inside a phrase, or a noun-phrase description that
    hops from a named thing ("the director of Avatar", "Hello Love's performer")."""
    clause = _CLAUSE.search(query)
    described = [m for m in _DESCRIBED.finditer(query) if _names_another(m, query, anchors)]
    found = sorted([m for m in (clause, *described) if m is not None], key=lambda m: m.start())
    return found[0].group(0) if found else None


def _names_another(nested: re.Match[str], query: str, anchors: tuple[str, ...]) -> bool:
    """Whether a nested description hops from a named thing: the question holds an anchor
    (a name, a quoted phrase, an identifier) and the description is not part of that name
    ("Arthur's Magazine" is a name, not a description). "The basic
    mechanism of the transonic aileron buzz" names nothing to hop from, so it is ordinary
    phrasing; "the first president of the association which published Journal Zeta" and
    "Hello Love's performer" hop from a name."""
    start, end = nested.span()
    lowered = query.lower()
    for anchor in anchors:
        at = lowered.find(anchor.lower())
        if at >= 0 and not (at <= start and end <= at + len(anchor)):
            return True
    return False
