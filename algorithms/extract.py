"""Mentions and typed relations from one parsed chunk (pure functions over a spaCy Doc).

Contract: ``extract_from_doc`` returns mentions (named entities and salient noun
phrases that name something, exact spans, never across a block of the chunk; see
:mod:`algorithms.mentions`) and statements found by dependency patterns — active and
passive subject-verb-object, copula, appositive, prepositional attachment,
numeric limits — plus sentence co-occurrence of named entities as a weak,
separately typed fallback. Offsets are shifted by the chunk's start, so they
index the document text.
"""

import re
from collections.abc import Callable
from typing import Any

from algorithms.mention_rules import FILE_EXTENSIONS, TECHNICAL_LABELS, technical_label
from algorithms.mentions import NOUN_CHUNK, Owner, find_mentions
from schemas import Chunk, Mention, Statement, stable_id

__all__ = [
    "FILE_EXTENSIONS",
    "NOUN_CHUNK",
    "TECHNICAL_LABELS",
    "extract_from_doc",
    "find_mentions",
    "technical_label",
]

_TEMPORAL_PREPS = frozenset({"during", "after", "before", "since", "until"})
_PART_PREPS = frozenset({"in", "inside", "within", "among"})
_COMPLIANCE = frozenset(
    {"require", "mandate", "comply", "prohibit", "permit", "allow", "forbid", "oblige", "need"}
)
_PART_OF = frozenset({"include", "contain", "comprise", "consist", "compose", "belong"})
_ATTRIBUTE = frozenset({"have", "possess", "exhibit", "display", "show"})
_LIMIT_VERBS = frozenset({"cap", "limit", "restrict", "set", "fix", "exceed"})
_CURRENCIES = {
    "rs": "INR",
    "rs.": "INR",
    "inr": "INR",
    "₹": "INR",
    "rupee": "INR",
    "rupees": "INR",
    "$": "USD",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "£": "GBP",
    "gbp": "GBP",
}
_PER_ABBREVIATIONS = {"transaction": "txn"}
_MAX_COOCCURRING = 8
CONFIDENCE = {
    "copula": 0.8,
    "limit": 0.8,
    "svo": 0.7,
    "passive": 0.7,
    "verb_prep": 0.6,
    "appositive": 0.6,
    "prep": 0.5,
    "cooccurrence": 0.2,
}


Lemma = Callable[[Any], str]
"""A token -> its lower-case lemma."""

Lemmatize = Callable[[Any], str]
"""A token -> its lemma, for a pipeline run without its lemmatizer."""


def _lemma_function(lemmatize: Lemmatize | None) -> Lemma:
    if lemmatize is None:
        return lambda token: token.lemma_.lower()

    def lemma(token: Any) -> str:
        # A lemma the pipeline did set (an attribute rule) wins, as with its lemmatizer.
        return (token.lemma_ if token.lemma else lemmatize(token)).lower()

    return lemma


def _predicate(lemma: Lemma, verb: Any, prep: Any = None) -> str:
    parts = [lemma(verb)]
    parts += [lemma(c) for c in verb.children if c.dep_ == "prt"]
    if prep is not None:
        parts.append(lemma(prep))
    return "_".join(re.sub(r"\W+", "", p) for p in parts if p)


def _category(lemma: Lemma, verb: Any, prep: Any = None) -> str:
    base = lemma(verb)
    if prep is not None and lemma(prep) in _TEMPORAL_PREPS:
        return "temporal"
    if base in _COMPLIANCE or any(lemma(c) == "must" for c in verb.children):
        return "compliance"
    if base in _PART_OF:
        return "part-of"
    if base in _ATTRIBUTE:
        return "attribute"
    return "process"


def _with_conjuncts(token: Any) -> list[Any]:
    return [token, *token.conjuncts]


def _limit_amount(lemma: Lemma, tokens: list[Any]) -> str | None:
    """``"500 INR"`` from the tokens of a limit's object, or None without a number."""
    numbers = [t for t in tokens if t.like_num and t.lower_ != "per"]
    if not numbers:
        return None
    number = numbers[0]
    amount = number.text.replace(",", "")
    unit = next((_CURRENCIES[t.text.lower()] for t in tokens if t.text.lower() in _CURRENCIES), "")
    if not unit and number.i + 1 < len(number.doc):
        after = number.doc[number.i + 1]
        if after.pos_ == "NOUN" or after.text == "%":
            unit = lemma(after) if after.pos_ == "NOUN" else after.text
    return f"{amount} {unit}".strip()


def _per_scope(lemma: Lemma, tokens: list[Any]) -> str:
    """``"per_txn"`` when the tokens say "per transaction"; ``""`` otherwise."""
    for token in tokens:
        if token.lower_ == "per":
            for child in token.children:
                if child.dep_ == "pobj":
                    base = lemma(child)
                    return f"per_{_PER_ABBREVIATIONS.get(base, base)}"
    return ""


class _Sentence:
    """Collects statements for one sentence, resolving tokens to mention ids."""

    def __init__(
        self, sent: Any, chunk: Chunk, mentions: list[Mention], owner: Owner, lemma: Lemma
    ):
        self.sent = sent
        self.lemma = lemma
        self.chunk = chunk
        self.mentions = mentions
        self.owner = owner
        text = sent.text
        lead = len(text) - len(text.lstrip())
        self.start = chunk.start + sent.start_char + lead
        self.end = chunk.start + sent.start_char + len(text.rstrip())
        self.found: dict[tuple[str, str, str], Statement] = {}

    def mention(self, token: Any) -> Mention | None:
        index = self.owner[token.i]
        return self.mentions[index] if isinstance(index, int) and index >= 0 else None

    def named(self, token: Any) -> Mention | None:
        """The mention of ``token``, or where a plain noun has none, of the name that
        modifies it ("UPI Lite" in "UPI Lite payments are capped at ...")."""
        found = self.mention(token)
        if found is None and isinstance(self.owner[token.i], str):
            modifiers = (c for c in token.lefts if c.dep_ in {"compound", "nmod", "amod"})
            found = next((m for c in modifiers if (m := self.mention(c)) is not None), None)
        return found

    def add(self, subj: Any, predicate: str, obj: Any, category: str, kind: str) -> None:
        s = self.named(subj)
        if not isinstance(obj, str) and self.mention(obj) is None:
            phrase = self.owner[obj.i]
            obj = phrase if isinstance(phrase, str) else obj  # a plain noun phrase: a literal
        o = self.mention(obj) if not isinstance(obj, str) else None
        if s is None or (o is None and not isinstance(obj, str)) or (o and o is s):
            return
        object_text = obj if isinstance(obj, str) else o.text  # type: ignore[union-attr]
        key = (s.mention_id, predicate, o.mention_id if o else object_text)
        if key in self.found or not predicate:
            return
        self.found[key] = Statement(
            statement_id=stable_id("statement", self.chunk.chunk_id, self.start, *key),
            chunk_id=self.chunk.chunk_id,
            doc_id=self.chunk.doc_id,
            subject_mention_id=s.mention_id,
            predicate=predicate,
            object_mention_id=o.mention_id if o else None,
            object_text=object_text,
            category=category,
            confidence=CONFIDENCE[kind],
            sentence_start=self.start,
            sentence_end=self.end,
        )


def _verb_patterns(sentence: _Sentence, verb: Any) -> None:
    children = list(verb.children)
    subjects = [c for c in children if c.dep_ in {"nsubj", "nsubjpass"}]
    if not subjects and verb.dep_ in {"acl", "relcl"} and verb.head.pos_ in {"NOUN", "PROPN"}:
        subjects = [verb.head]
    passive = any(c.dep_ == "nsubjpass" for c in children) or (
        verb.dep_ == "acl" and verb.tag_ == "VBN"
    )
    objects = [c for c in children if c.dep_ in {"dobj", "attr"}]
    preps = [c for c in children if c.dep_ in {"prep", "agent"}]
    lemma_of = sentence.lemma
    lemma = lemma_of(verb)
    for subj in (s for head in subjects for s in _with_conjuncts(head)):
        if lemma in _LIMIT_VERBS:
            scope = _per_scope(lemma_of, [t for p in preps for t in p.subtree])
            for prep in (p for p in preps if p.lower_ in {"at", "to", "of"}):
                amount = _limit_amount(lemma_of, list(prep.subtree))
                if amount:
                    predicate = f"{scope}_limit" if scope else "limit"
                    sentence.add(subj, predicate, amount, "limit", "limit")
        for obj in (o for head in objects for o in _with_conjuncts(head)):
            if lemma == "be" and obj.dep_ == "attr":
                sentence.add(subj, "is_a", obj, "definition", "copula")
            elif obj.dep_ == "dobj":
                predicate, category = _predicate(lemma_of, verb), _category(lemma_of, verb)
                sentence.add(subj, predicate, obj, category, "svo")
        for prep in preps:
            pobjs = [c for c in prep.children if c.dep_ == "pobj"]
            for pobj in (p for head in pobjs for p in _with_conjuncts(head)):
                if prep.dep_ == "agent" and passive:
                    predicate, category = _predicate(lemma_of, verb), _category(lemma_of, verb)
                    sentence.add(pobj, predicate, subj, category, "passive")
                elif not objects and lemma != "be" and lemma not in _LIMIT_VERBS:
                    category = _category(lemma_of, verb, prep)
                    predicate = _predicate(lemma_of, verb, prep)
                    sentence.add(subj, predicate, pobj, category, "verb_prep")


def _noun_patterns(sentence: _Sentence, noun: Any) -> None:
    for child in noun.children:
        if child.dep_ == "appos":
            sentence.add(noun, "is_a", child, "definition", "appositive")
        elif child.dep_ == "prep":
            prep = sentence.lemma(child)
            if prep in _TEMPORAL_PREPS:
                category = "temporal"
            elif prep in _PART_PREPS:
                category = "part-of"
            else:
                category = "attribute"
            for pobj in (c for c in child.children if c.dep_ == "pobj"):
                sentence.add(noun, re.sub(r"\W+", "", prep), pobj, category, "prep")


def _cooccurrence(sentence: _Sentence) -> None:
    seen: list[Mention] = []
    for token in sentence.sent:
        m = sentence.mention(token)
        if m is not None and m.label != NOUN_CHUNK and m not in seen:
            seen.append(m)
    seen = seen[:_MAX_COOCCURRING]
    linked = {(k[0], k[2]) for k in sentence.found} | {(k[2], k[0]) for k in sentence.found}
    for i, a in enumerate(seen):
        for b in seen[i + 1 :]:
            if (a.mention_id, b.mention_id) in linked or a.norm == b.norm:
                continue
            token_a = sentence.sent.doc.char_span(
                a.start - sentence.chunk.start, a.end - sentence.chunk.start
            )
            token_b = sentence.sent.doc.char_span(
                b.start - sentence.chunk.start, b.end - sentence.chunk.start
            )
            if token_a is not None and token_b is not None:
                sentence.add(
                    token_a.root, "co_occurs_with", token_b.root, "co-occurrence", "cooccurrence"
                )


def extract_from_doc(
    doc: Any, chunk: Chunk, lemmatize: Lemmatize | None = None
) -> tuple[list[Mention], list[Statement]]:
    """Mentions and statements of one chunk parsed by spaCy (``doc.text == chunk.text``).

    ``lemmatize`` gives a token's lemma where the pipeline left it unset (one run
    without its lemmatizer, see ``transforms.extract.load_parser``); statements
    need the lemmas of a few verbs and prepositions only.
    """
    mentions, owner = find_mentions(doc, chunk)
    lemma = _lemma_function(lemmatize)
    statements: list[Statement] = []
    for sent in doc.sents:
        sentence = _Sentence(sent, chunk, mentions, owner, lemma)
        for token in sent:
            if token.pos_ in {"VERB", "AUX"}:
                _verb_patterns(sentence, token)
            elif token.pos_ in {"NOUN", "PROPN"}:
                _noun_patterns(sentence, token)
        _cooccurrence(sentence)
        statements.extend(sentence.found.values())
    return mentions, statements
