"""Mentions of one parsed chunk: named entities and noun phrases that name something.

Contract: :func:`find_mentions` returns a chunk's mentions with exact spans (offsets
shifted by the chunk's start, so they index the document text) and, per token, what
covers it. The rules of what may be a mention are :mod:`algorithms.mention_rules`;
here they are applied to spaCy's candidates (noun phrases and named entities), a
phrase spaCy calls an amount that ends in a name is a name ("Two Dollar Radio"),
and an identifier glued to other words is a mention alone ("void
xsltParseGlobalParam"). Statements over these mentions are :mod:`algorithms.extract`.
"""

import re
from typing import Any

from algorithms.capitals import (
    common_alone,
    common_opening,
    common_words,
    opening_words_trimmed,
    title_words_trimmed,
    titled,
    written_as_words,
)
from algorithms.mention_rules import (
    LABEL_ZIPF,
    clean_surface,
    code_like,
    common_word,
    lower_case_entity,
    modifiers_trimmed,
    name_word,
    names_something,
    plural_acronym,
    relabelled,
    technical_label,
    whole_words,
)
from algorithms.normalize import normalize_surface
from algorithms.text_blocks import Block, block_of, text_blocks
from schemas import Chunk, Mention, stable_id

NOUN_CHUNK = "NOUN_CHUNK"
_VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBZ", "VBP"})
# Entity labels that are values, not things: they become literals, never entities.
VALUE_LABELS = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"})
_STRIP_LEAD = frozenset({"DET", "PRON", "PUNCT", "CCONJ", "PART", "ADV", "INTJ", "SCONJ"})
# Single common nouns too generic to be entities on their own ("the study", "patients").
_GENERIC_NOUNS = frozenset(
    """
    study studies result results patient patients effect effects level levels group groups
    cell cells data analysis analyses method methods use increase decrease role case cases
    year years time times number numbers rate rates risk risks model models approach change
    changes finding findings evidence association associations factor factors function
    functions activity activities process processes response responses expression type types
    treatment treatments outcome outcomes difference differences participant participants
    subject subjects sample samples individual individuals people population populations
    trial trials report reports review reviews paper article work part parts way ways area
    areas form forms value values measure measures system systems mechanism mechanisms
    condition conditions term terms order addition contrast example basis lack presence
    absence ability need purpose aim aims objective objectives conclusion conclusions
    background design setting settings interest information fact issue issues problem
    problems question questions test tests control controls age sex period week weeks day
    days month months hour hours minute minutes end point points side set sets line lines
    development combination production promotion density odds exposure application importance
    level improvement reduction increase regulation formation identification investigation
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _trimmed(span: Any) -> tuple[int, int] | None:
    """Token range of ``span`` without leading determiners/pronouns/punctuation, and
    without whitespace or markup tokens at either end (spaCy puts a line break's
    indentation in the entity that precedes it)."""
    doc, start, end = span.doc, span.start, span.end
    while start < end and (doc[start].pos_ in _STRIP_LEAD or _no_word(doc[start])):
        start += 1
    while end > start and (doc[end - 1].pos_ == "PUNCT" or _no_word(doc[end - 1])):
        end -= 1
    return (start, end) if start < end else None


def _no_word(token: Any) -> bool:
    """Whitespace, or markup such as Markdown's ``**`` that the tagger may read as a noun."""
    return token.is_space or not any(ch.isalnum() for ch in token.text)


# Words a value ends in ("Two Dollars", "Ten Percent"): such a span is an amount.
_UNITS = frozenset(
    """dollar dollars euro euros pound pounds yen rupee rupees cent cents percent franc
    francs mark marks point points""".split()  # noqa: SIM905
)
_AMOUNT_LABELS = frozenset({"MONEY", "QUANTITY", "CARDINAL", "ORDINAL"})


def _named_amount(tokens: Any) -> bool:
    """A phrase spaCy calls an amount that ends in a proper noun no unit names: a name
    that starts with a number ("Two Dollar Radio", "Three Dog Night")."""
    root = tokens.root
    return (
        root.ent_type_ in _AMOUNT_LABELS
        and len(tokens) >= 2
        and root.i == tokens.end - 1
        and root.pos_ == "PROPN"
        and root.text[:1].isupper()
        and not root.like_num
        and root.lower_ not in _UNITS
    )


def _salient(tokens: Any) -> bool:
    content = [t for t in tokens if t.pos_ in {"NOUN", "PROPN", "ADJ", "NUM", "X"}]
    if not content or tokens[-1].pos_ == "PRON":
        return False
    if tokens.root.ent_type_ in VALUE_LABELS and not _named_amount(tokens):
        return False
    if len(content) >= 2:
        return True
    token = content[0]
    if token.pos_ == "PROPN" or any(ch.isupper() or ch.isdigit() for ch in token.text[1:]):
        return True
    return token.pos_ == "NOUN" and len(token.text) >= 4 and token.lower_ not in _GENERIC_NOUNS


def _candidates(doc: Any) -> dict[tuple[int, int], str]:
    """Token ranges of salient noun phrases and of named entities (which win where
    both cover the same range)."""
    spans: dict[tuple[int, int], str] = {}
    for chunk_span in doc.noun_chunks:
        bounds = _trimmed(chunk_span)
        if bounds and _salient(doc[bounds[0] : bounds[1]]):
            spans[bounds] = NOUN_CHUNK
    for ent in doc.ents:
        bounds = _trimmed(ent) if ent.label_ not in VALUE_LABELS else None
        if bounds:
            spans[bounds] = ent.label_
    return spans


def _label(span: Any, found: str, block: Block, *, title: bool) -> str | None:
    """The mention label of a candidate span inside ``block``, or None where it is no
    mention: it sits in code without being an identifier, or is not a name (``title``:
    its sentence or block is a heading or in title case, see
    :func:`algorithms.capitals.titled`)."""
    text = span.text
    full = span.doc.text
    before = full[span.start_char - 1] if span.start_char > block.start else ""
    after = full[span.end_char] if span.end_char < block.end else ""
    technical = technical_label(text)
    if technical:
        whole = whole_words(before, after) and "<" not in text and ">" not in text
        return technical if whole else None
    if block.kind == "code" or not clean_surface(text, before, after, phrase=found == NOUN_CHUNK):
        return None
    label = relabelled(text, found)
    if written_as_words(span):
        return None
    if _opens_with_a_verb(span, found) and not _recurs(text, full, block):
        return None  # "Updating GNOME", "Declare Build-Depends": a title or an instruction
    if found == NOUN_CHUNK:
        return label
    if common_alone(span, full[block.start : block.end]):
        return None
    if common_opening(span, block, named=span[0].pos_ == "PROPN"):
        return None
    if lower_case_entity(text, label) or (len(span) == 1 and span[0].pos_ in {"VERB", "AUX"}):
        return None
    if title and common_words(text) and not _recurs(text, full, block):
        return None
    if _ends_in_a_common_word(span) or _ends_in_a_class(span):
        return None  # "Cachegrind-specific", "Google APIs": a name ends in a name
    heading = full[block.start : block.end].lstrip().startswith("#")
    return None if heading and not names_something(span, title=True) else label


def _opens_with_a_verb(span: Any, found: str) -> bool:
    """Whether a span of several words opens with a word the tagger reads as a verb (not
    in the title of a work: "Gone with the Wind")."""
    return len(span) > 1 and span[0].tag_ in _VERB_TAGS and found != "WORK_OF_ART"


def _ends_in_a_common_word(span: Any) -> bool:
    """Whether an entity span ends in a lower-case common English word joined to it by a
    hyphen: an adjective or a class ("Cachegrind-specific", "Non-integer")."""
    if len(span) < 3 or span[-2].text != "-" or span[-2].whitespace_:
        return False
    last = span[-1]
    return last.is_alpha and last.text.islower() and common_word(last.text, LABEL_ZIPF)


def _ends_in_a_class(span: Any) -> bool:
    """Whether an entity span ends in an acronym in the plural, a class of things
    ("Google APIs", "AWS SDKs"; see :func:`algorithms.mention_rules.plural_acronym`)."""
    return plural_acronym(span[-1].text)


def _recurs(text: str, full: str, block: Block) -> bool:
    """Whether ``text`` stands in ``full`` outside ``block`` too: a title's words that
    recur in the running text are a name ("Indicates Void" titling its own page)."""
    return full.count(text) > full.count(text, block.start, block.end)


def _bounded(doc: Any, start: int, end: int, found: str, blocks: list[Block]) -> Any:
    """``(span, block, title, owned)`` of a candidate (``owned``: where the tokens its
    mention covers end, at or after the span's end), its noun phrase's leading lower-case
    modifiers dropped; where it crosses blocks ("Mercyful Fate\\n\\nMercyful Fate is"),
    its part in the block of its last word; None where nothing is left."""
    last = doc[end - 1]
    block = block_of(blocks, doc[start].idx, last.idx + len(last))
    if block is None:  # keep the part in the block of its last word, where its head is
        block = block_of(blocks, last.idx, last.idx + len(last))
        if block is None:
            return None
        start = next(i for i in range(start, end) if doc[i].idx >= block.start)
        while start < end and doc[start].is_space:
            start += 1
    if found == "PERSON":  # "Marco Ippolito gpg": a person's name ends at its last capital
        while end - 1 > start and doc[end - 1].text.islower() and doc[end - 2].whitespace_:
            end -= 1
    quotes = [t.i for t in doc[start:end] if t.text == '"']
    if len(quotes) % 2:  # a quote mark without its pair: keep the side after it
        start = quotes[-1] + 1 if quotes[-1] + 1 < end else start
        end = quotes[0] if start <= quotes[0] else end
        if start >= end:
            return None
    sentence = doc[start].sent  # its part in the block: spaCy runs a heading into the text
    clipped = doc.text[max(sentence.start_char, block.start) : min(sentence.end_char, block.end)]
    title = titled(clipped) or titled(doc.text[block.start : block.end])
    title = title or block.kind == "heading"
    if title:
        start = title_words_trimmed(doc[start:end])
    if found == NOUN_CHUNK:
        start = modifiers_trimmed(doc[start:end], title=title)
        if _opens(doc[start], block):
            start = opening_words_trimmed(doc[start:end])
    while start < end - 1 and _no_word(doc[start]):
        start += 1  # "3 - Legacy" without its number is "Legacy", not "- Legacy"
    owned = end  # another name ends there too when common words follow ("Python 2
    # modules" -> "Python 2"); the words it drops still belong to its mention, so a
    # statement whose subject is "BALB/c mice" keeps "BALB/c" as its subject
    while found != NOUN_CHUNK and end - 1 > start and _common_tail(doc, end):
        end -= 1
    return doc[start:end], block, title, owned


def _common_tail(doc: Any, end: int) -> bool:
    """Whether the last word before ``end`` is a lower-case common English word set off
    by a space (see :data:`algorithms.mention_rules.LABEL_ZIPF`)."""
    last = doc[end - 1]
    return (
        last.is_alpha
        and last.text.islower()
        and bool(doc[end - 2].whitespace_)
        and common_word(last.text, LABEL_ZIPF)
    )


Owner = list[int | str]
"""Per token: the index of the mention covering it, the text of the plain noun phrase
covering it (a statement's literal object, never an entity), or -1."""


def find_mentions(doc: Any, chunk: Chunk) -> tuple[list[Mention], Owner]:
    """Mentions of a parsed chunk and, per token, what covers it (see :data:`Owner`;
    named entities take precedence over noun phrases).

    No mention crosses a block of the chunk (:func:`algorithms.text_blocks.text_blocks`);
    inside code only identifiers, paths and URLs are mentions; a noun phrase is a
    mention only when it names something (:func:`algorithms.mention_rules.names_something`).
    """
    blocks = text_blocks(doc.text)
    mentions: list[Mention] = []
    owner: Owner = [-1] * len(doc)
    accepted: list[tuple[Any, str, str]] = []  # (span, spaCy's kind, label), in order
    tails: dict[tuple[int, int], int] = {}  # a span's end -> the end of what it covers
    order = sorted(_candidates(doc).items(), key=lambda kv: (kv[1] != NOUN_CHUNK, kv[0]))
    for (first, end), found in order:
        bounded = _bounded(doc, first, end, found, blocks)
        if bounded is None:
            continue
        span, block, title, owned = bounded
        if owned > span.end:
            tails[(span.start, span.end)] = owned
        if _glued_code(span) or _side_by_side(span):
            accepted.extend(_each_alone(span, found, block, title=title))
            continue
        norm = normalize_surface(span.text)
        label = _label(span, found, block, title=title) if norm else None
        if label is None:
            continue
        alone = common_alone(span, doc.text[block.start : block.end])
        alone = alone or (label == NOUN_CHUNK and common_opening(span, block, named=False))
        if label == NOUN_CHUNK and (alone or not names_something(span, title=title)):
            for i in range(first, end):  # the whole phrase, modifiers included
                owner[i] = doc[first:end].text
            name = None if alone else _modifying_name(span, title=title)
            if name is not None and _side_by_side(name):
                accepted.extend(_each_alone(name, found, block, title=title))
            elif name is not None and _plain_name(name, found, block, title=title):
                accepted.append((name, f"{found}/name", NOUN_CHUNK))
            continue
        accepted.append((span, found, label))
    names = [span for span, _, _ in accepted if _longer_name(span)]
    seen: set[tuple[int, int]] = set()
    for span, found, label in accepted:
        if any(_strictly_inside(span, name) for name in names):
            continue  # "Christian" of "Christian Tellnes", "Frank" of "Frank Qiu"
        if "/" in found and (span.start, span.end) in seen:
            continue  # an identifier of a glued phrase that is a mention already
        seen.add((span.start, span.end))
        _add(mentions, owner, chunk, span, found, label)
        for i in range(span.end, tails.get((span.start, span.end), span.end)):
            owner[i] = len(mentions) - 1
    return mentions, owner


def _plain_name(span: Any, found: str, block: Block, *, title: bool) -> bool:
    """Whether a noun phrase's modifying name passes the rules of a mention of its own."""
    if not _label(span, found, block, title=title):
        return False
    alone = common_alone(span, span.doc.text[block.start : block.end])
    return not alone and not common_opening(span, block, named=False)


def _modifying_name(span: Any, *, title: bool) -> Any:
    """The name that modifies a phrase's common head noun: the words right before the head
    that are names ("UPI Lite" of "UPI Lite payments", "Python" of "Python scripts"), or
    None."""
    head = span.root
    start = head.i
    while start > span.start and name_word(span.doc[start - 1], title=title):
        start -= 1
    return span.doc[start : head.i] if start < head.i else None


def _longer_name(span: Any) -> bool:
    """A name of several words, each capitalized (no quoted nickname: its parts are
    names the person goes by)."""
    words = [t for t in span if t.is_alpha]
    return len(words) >= 2 and all(t.text[:1].isupper() for t in words) and '"' not in span.text


def _strictly_inside(span: Any, outer: Any) -> bool:
    """Whether ``span``'s tokens are a proper part of ``outer``'s."""
    inside = outer.start <= span.start and span.end <= outer.end
    return inside and (span.start, span.end) != (outer.start, outer.end)


def _glued_code(span: Any) -> bool:
    """A span of several words, one of them an identifier, path or URL, that is not one
    as a whole: a type and a function name, a platform and a program."""
    return (
        len(span) > 1
        and not technical_label(span.text)
        and any(technical_label(t.text) for t in span)
    )


def _each_alone(span: Any, found: str, block: Block, *, title: bool) -> list[tuple]:
    """``(span, kind, label)`` of each word of a glued or side-by-side run that is a
    mention alone: an identifier, path or URL ("void xsltParseGlobalParam"), or an
    acronym or identifier that is a name ("xmlSAXHandlerPtr SAX")."""
    out = []
    for token in span:
        alone = span.doc[token.i : token.i + 1]
        code = technical_label(token.text)
        if code and _label(alone, found, block, title=title):
            out.append((alone, f"{found}/{code}", code))
        elif not code and _named_alone(alone, found, block, title=title):
            out.append((alone, f"{found}/name", relabelled(token.text, found)))
    return out


def _named_alone(span: Any, found: str, block: Block, *, title: bool) -> bool:
    """Whether one word of a run of names side by side is a name of its own."""
    return (
        code_like(span.text)
        and name_word(span[0], title=title)
        and _plain_name(span, found, block, title=title)
    )


def _opens(token: Any, block: Block) -> bool:
    """Whether ``token`` opens its sentence or its block (no letter before it there)."""
    before = token.doc.text[block.start : token.idx]
    return token.is_sent_start or not re.search(r"[^\W\d_]", before)


def _side_by_side(span: Any) -> bool:
    """Names side by side, or joined by "and", "+" or "/", with no lower-case word: two
    or more of them acronyms or identifiers ("D1 and LL", "PARAMNAME PARAMVALUE",
    "xmlSAXHandlerPtr SAX", "GNU ClasspathX"): each is a name, the run is none."""
    words = [w for w in re.split(r"[\s/+]+", span.text) if w not in ("", "and", "or")]
    return not any(w.islower() for w in words) and sum(code_like(w) for w in words) >= 2


def _add(
    mentions: list[Mention], owner: Owner, chunk: Chunk, span: Any, found: str, label: str
) -> None:
    """Append the mention of ``span`` and mark its tokens in ``owner``."""
    begin = chunk.start + span.start_char
    mentions.append(
        Mention(
            # The id keeps spaCy's own kind: a noun phrase and an entity may start at
            # one offset, and both may read as the same technical label.
            mention_id=stable_id("mention", chunk.chunk_id, begin, found),
            chunk_id=chunk.chunk_id,
            doc_id=chunk.doc_id,
            start=begin,
            end=chunk.start + span.end_char,
            text=span.text,
            label=label,
            norm=normalize_surface(span.text),
        )
    )
    for i in range(span.start, span.end):
        owner[i] = len(mentions) - 1
