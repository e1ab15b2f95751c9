"""Whether a capital letter is a name's or only its place's.

Contract: pure functions over spaCy tokens and a chunk's text, used by
:func:`algorithms.mentions.find_mentions`. A capital says nothing where the place
gives it: the opening of a sentence, a clause ("Note: Activation ..."), a table cell,
a list item or a heading, a title-case line, a shouting sentence. There a word is a
name only when general English does not know it as a word (wordfreq's Zipf
frequency), the tagger reads a proper noun where it saw the sentence start, or the
running text capitalizes it where no place asks for it.

- :func:`common_alone`: a common word alone in its sentence or block ("Delete"), or
  one written loud ("WARRANTY", "MERCHANTABILITY or FITNESS").
- :func:`common_opening`: a word opening its sentence, clause, cell, item or heading
  that is a common word, a plural ("Subtrees allow ..."), or written in lower case
  in the chunk's prose ("Sandbox images ... each sandbox").
- :func:`written_as_words`: capitalized common words the chunk also writes as a
  common noun ('the "Software"' ... "this software").
- :func:`titled`, :func:`common_words`: a heading's or title-case line's words.
- :func:`title_words_trimmed`, :func:`opening_words_trimmed`: the leading common words
  of a title or of a phrase opening its sentence dropped before a name ("Discuss
  PyYAML", "Public Python extensions").
"""

import re
from typing import Any

from algorithms.mention_rules import (
    COMMON_ZIPF,
    LABEL_ZIPF,
    TITLE_ZIPF,
    code_like,
    common_word,
    name_word,
    plain_word,
    zipf,
)
from algorithms.normalize import singular
from algorithms.text_blocks import Block, prose

SHOUTED_LENGTH = 7
"""Letters from which a word in capitals that is a common English word is that word
written loud ("WARRANTY"), not an acronym ("HTML", "UNIX")."""


def common_alone(span: Any, block: str = "") -> bool:
    """A one-word span that is a common English word and no proper noun ("Description",
    "Indicates"; "HELP" in capitals), unlike "Boston", or a plain word that stands
    alone as its sentence or its ``block`` (a table cell, see
    :data:`algorithms.mention_rules.LABEL_ZIPF`)."""
    if len(span) != 1 or not plain_word(span.text):
        return False
    frequency = zipf(span.text)
    alone = sum(1 for t in span[0].sent if t.is_alpha) == 1 or len(block.split()) == 1
    if alone and frequency >= LABEL_ZIPF:
        return True
    long_capitals = span.text.isupper() and len(span.text) >= SHOUTED_LENGTH
    if long_capitals and (frequency >= LABEL_ZIPF or (frequency > 0 and _shouted(span[0]))):
        return True  # "WARRANTY", "MERCHANTABILITY or FITNESS": English words, loud
    return frequency >= COMMON_ZIPF and (span.text.isupper() or span[0].pos_ != "PROPN")


KNOWN_ZIPF = 2.0
"""A word at least this frequent in general English is an English word ("subtree",
"sandbox"), not a program's name written in lower case ("pybuild", "libxslt")."""


def _shouted(word: Any) -> bool:
    """Whether ``word``'s sentence shouts: besides it, two common English words of four
    letters or more in capitals ("WITHOUT ANY WARRANTY", "FITNESS FOR A PARTICULAR")."""
    loud = [
        t
        for t in word.sent
        if t.i != word.i
        and t.is_alpha
        and len(t) >= 4
        and t.text.isupper()
        and common_word(t.text, LABEL_ZIPF)
    ]
    return len(loud) >= 2


_CLAUSE_MARK = re.compile(r"(?:[\w*_`)\]]:|>)[ \t]+$")


def common_opening(span: Any, block: Block, *, named: bool) -> bool:
    """A one-word span whose capital is only its place's: it opens a table cell, a list
    item or a heading ("List all sandboxes"), or its sentence or a clause after a
    label's colon or a signature's type ("Relax hardcoded limits", "Note: Activation
    ..."), where ``named`` (spaCy's entity label on a word its tagger reads as a proper
    noun: "Copenhagen is ...") does not vouch for it unless the chunk writes the word in
    lower case; is a common English word (see
    :data:`algorithms.mention_rules.LABEL_ZIPF`), a plural the tagger reads as a common
    noun ("Subtrees allow ..."), or a word the chunk's prose writes in lower case
    ("Sandbox images ... each sandbox"); and nowhere in its chunk is capitalized after a
    lower-case word."""
    if len(span) != 1 or not plain_word(span.text) or span.text.isupper():
        return False
    token, text = span[0], span.doc.text
    opens_block = not re.search(r"[^\W\d_]", text[block.start : token.idx])
    sentence = token.sent
    opens_sentence = not any(t.is_alpha for t in sentence[: token.i - sentence.start])
    # After a label's colon or a signature's type ("Note: Activation ...", "<string>
    # Character encoding ..."), a clause opens as a sentence does.
    opens_sentence = opens_sentence or _CLAUSE_MARK.search(text, block.start, token.idx) is not None
    placed = opens_block and block.kind in ("cell", "item", "heading")
    word = span.text.lower()
    lower = (
        written_lower(word, prose(span.doc)) and max(zipf(word), zipf(singular(word))) >= KNOWN_ZIPF
    )
    # The tagger's proper noun on a common word vouches only where it saw the sentence
    # start: a paragraph it ran into the line before reads to it as a capital inside a
    # sentence ("Download directories contain ..." below a heading).
    named = named and (token.is_sent_start or zipf(word) < COMMON_ZIPF)
    if not placed and ((named and not lower) or not (opens_sentence or opens_block)):
        return False
    plural = token.tag_ == "NNS"  # "Subtrees allow ...": a class, however rare the word
    if not (lower or plural) and max(zipf(word), zipf(singular(word))) < LABEL_ZIPF:
        return False  # "Mailboxes" is as common as "mailbox"
    # Capitalized after a lower-case word, it is a name ("the Subtrees ..."); after a
    # capitalized one it may be a title's word ("Embedded Python Dependencies").
    inside = re.compile(rf"\b[a-z][\w'-]*[,;]?[ \t]+{re.escape(span.text)}\b")
    return inside.search(text) is None


def written_as_words(span: Any) -> bool:
    """Whether a capitalized span of common English words (see
    :data:`algorithms.mention_rules.LABEL_ZIPF`) is written in its chunk's prose as a
    common noun after a determiner ('the "Software"' ... "this software"): the words
    capitalized for emphasis or as a defined term, not a name."""
    words = [t.text for t in span if not t.is_punct]
    if not words or not all(w.isalpha() and w[0].isupper() and w[1:].islower() for w in words):
        return False
    if not all(common_word(w, LABEL_ZIPF) for w in words):
        return False
    phrase = re.escape(" ".join(w.lower() for w in words))
    return re.search(rf"\b{_DETERMINERS} {phrase}\b", prose(span.doc)) is not None


_DETERMINERS = "(?:{})".format(
    "|".join(
        f"[{w[0].upper()}{w[0]}]{w[1:]}"
        for w in "the a an this that these those each every any no its their your our".split()  # noqa: SIM905
    )
)


def written_lower(word: str, text: str) -> bool:
    """Whether ``text`` writes the lower-case ``word`` (or its singular) as a word of
    prose: "subtrees" or "subtree", not "git-subtree" or "subtree.c"."""
    forms = "|".join(re.escape(w) for w in {word, singular(word)})
    return re.search(rf"(?<![\w./-])(?:{forms})(?![\w/-]|\.\w)", text) is not None


def common_words(text: str) -> bool:
    """Whether every word of ``text`` is a general English word (see
    :data:`algorithms.mention_rules.TITLE_ZIPF`)."""
    words = re.findall(r"[^\W\d_]+", text)
    return bool(words) and all(common_word(w, TITLE_ZIPF) for w in words)


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


def title_words_trimmed(span: Any) -> int:
    """Token index where a candidate in a title starts once its leading capitalized
    common words (verbs, nouns: not proper nouns) are dropped, when a rare word or an
    identifier follows ("Discuss PyYAML" -> "PyYAML", "Parsing XInclude" -> "XInclude");
    else its start."""

    def rare(token: Any) -> bool:
        text = token.text
        if not any(ch.isalpha() for ch in text):
            return False
        return name_word(token, title=True) or not common_word(text, TITLE_ZIPF)

    start = span.start
    while start < span.end - 1 and span.doc[start].is_alpha and not rare(span.doc[start]):
        if span.doc[start].pos_ == "PROPN":
            return span.start  # "Christian Tellnes": a first name, not a title's verb
        start += 1
    return start if any(rare(t) for t in span.doc[start : span.end]) else span.start


def opening_words_trimmed(span: Any) -> int:
    """Token index where a noun phrase opening its sentence or block starts once its
    leading common words are dropped, when a word that is no common word follows: their
    capital is their place's ("Public Python extensions" -> "Python", "Store AWS
    credentials" -> "AWS"; "Source Code", "Context Hub" stay whole); no word of a named
    entity is dropped."""
    start = span.start
    while start < span.end - 1:
        token = span.doc[start]
        if token.ent_type_ or token.text.isupper() or not plain_word(token.text):
            break  # "Richard Elmer Humbert": a first name is common, and in a name
        if not common_word(token.text):
            break
        start += 1
    if start == span.start:
        return start
    follower = span.doc[start]
    rare = code_like(follower.text) or not common_word(follower.text)
    return start if rare and name_word(follower) else span.start
