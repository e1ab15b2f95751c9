"""Canonical relations: statements grouped by (subject, predicate, object) entity,
each with one summary sentence and its supporting chunks and sentences (pure).

Contract: the same statements, assignment and entities in any order give the same
relations and ids. A statement whose subject (or object) mention has no entity,
or whose subject and object are one entity, is left out.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from algorithms.normalize import normalize_surface
from schemas import Relation, Statement, stable_id

COOCCURRENCE = "co-occurrence"
_PREDICATE_WORDS = {"per_txn_limit": "per-transaction limit", "is_a": "is a"}


def predicate_words(predicate: str) -> str:
    """How a predicate reads in a sentence: ``per_txn_limit`` -> ``per-transaction limit``."""
    if predicate in _PREDICATE_WORDS:
        return _PREDICATE_WORDS[predicate]
    if predicate.endswith("_limit") and predicate.startswith("per_"):
        return f"per-{predicate[4:-6]} limit"
    return predicate.replace("_", " ")


def summary_sentence(subject: str, predicate: str, obj: str) -> str:
    """``"UPI Lite — per-transaction limit — 500 INR"``."""
    return f"{subject} — {predicate_words(predicate)} — {obj}"


def _combined_confidence(values: Iterable[float]) -> float:
    """Noisy-or of independent statements' confidences."""
    miss = 1.0
    for value in values:
        miss *= 1.0 - value
    return round(1.0 - miss, 6)


LITERAL = "literal:"
"""The prefix of a relation key's object that is a value, not an entity."""


def literal_object(s: Statement) -> str:
    """The object part of the relation key of a statement whose object is a value."""
    return LITERAL + (normalize_surface(s.object_text) or s.object_text)


def relation_key(s: Statement, assignment: Mapping[str, str]) -> tuple[str, str, str] | None:
    """``(subject entity, predicate, object entity or "literal:<norm>")`` of a statement,
    or ``None`` when it makes no relation (a mention without entity, a self-relation)."""
    subject = assignment.get(s.subject_mention_id)
    if s.object_mention_id is None:
        obj = literal_object(s)
    else:
        obj = assignment.get(s.object_mention_id, "")
    if subject is None or not obj or obj == subject:
        return None
    return subject, s.predicate, obj


def relation_id(key: tuple[str, str, str]) -> str:
    """The id of the relation a :func:`relation_key` names."""
    return stable_id("relation", *key)


def relation_of(
    key: tuple[str, str, str],
    members: Iterable[Statement],
    subject_name: str,
    object_name: str,
) -> Relation:
    """The relation ``key`` names (:func:`relation_key`) from every statement of it, its
    subject's canonical name and its object's (ignored for a literal object): what one
    key of a keyed aggregation computes, alone."""
    subject, predicate, obj = key
    members = sorted(members, key=lambda s: s.statement_id)
    object_id = None if obj.startswith(LITERAL) else obj
    object_text = object_name if object_id else members[0].object_text
    categories = Counter(s.category for s in members)
    category = sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    sentences = sorted({(s.doc_id, s.sentence_start, s.sentence_end) for s in members})
    return Relation(
        relation_id=relation_id(key),
        subject_id=subject,
        predicate=predicate,
        object_id=object_id,
        object_text=object_text,
        category=category,
        confidence=_combined_confidence(s.confidence for s in members),
        support=len(members),
        chunk_ids=sorted({s.chunk_id for s in members}),
        sentence_doc_ids=[d for d, _, _ in sentences],
        sentence_starts=[a for _, a, _ in sentences],
        sentence_ends=[b for _, _, b in sentences],
        summary=summary_sentence(subject_name, predicate, object_text),
    )


def _object_name(key: tuple[str, str, str], names: Mapping[str, str]) -> str:
    return "" if key[2].startswith(LITERAL) else names[key[2]]


def aggregate_relations(
    statements: Iterable[Statement],
    assignment: Mapping[str, str],
    names: Mapping[str, str],
) -> list[Relation]:
    """Group statements into canonical relations, sorted by id.

    Args:
        statements: every statement of the corpus.
        assignment: mention id -> entity id.
        names: entity id -> canonical name.
    """
    groups: dict[tuple[str, str, str], list[Statement]] = defaultdict(list)
    for s in statements:
        key = relation_key(s, assignment)
        if key is not None:
            groups[key].append(s)
    relations = [
        relation_of(key, members, names[key[0]], _object_name(key, names))
        for key, members in groups.items()
    ]
    return sorted(relations, key=lambda r: r.relation_id)
