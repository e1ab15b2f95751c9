"""Relation aggregation stage: statements -> canonical ``Relation`` rows, keyed by
relation (the grouping rules are in ``algorithms.summaries``).

No step holds every statement: each statement meets the entity of its subject mention
and then of its object mention by key (``CoGroupByKey`` on the mention id), and the
statements of one relation meet by its key, ``(subject entity, predicate, object)``, to
be aggregated (``algorithms.summaries.relation_of``). A worker holds the statements and
mentions of the keys it is given.
"""

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from algorithms.summaries import literal_object, relation_of
from schemas import Relation, Statement
from transforms.tags import typed

Named = tuple[Statement, str, str]
"""A statement with its subject entity's id and name."""


def with_subject(item: Any) -> Iterator[Named]:
    """The statements of one subject mention, with its entity (none: no relation)."""
    _, joined = item
    for entity_id, name in list(joined["entity"])[:1]:
        for statement in joined["statements"]:
            yield statement, entity_id, name


def by_object(named: Named) -> Iterator[Any]:
    """A statement whose object is a mention, keyed by it; one whose object is a value,
    keyed by its relation already (tagged ``"value"``)."""
    statement, subject, name = named
    if statement.object_mention_id is None:
        key = (subject, statement.predicate, literal_object(statement))
        yield beam.pvalue.TaggedOutput("value", (key, (statement, name, "")))
    else:
        yield statement.object_mention_id, named


def with_object(item: Any) -> Iterator[Any]:
    """The statements of one object mention keyed by their relation, with both names
    (an object without entity, or the subject's own entity: no relation)."""
    _, joined = item
    for entity_id, object_name in list(joined["entity"])[:1]:
        for statement, subject, name in joined["statements"]:
            if entity_id != subject:
                yield (subject, statement.predicate, entity_id), (statement, name, object_name)


def keyed_relation(item: Any) -> Relation:
    """The relation of one key's ``(statement, subject name, object name)`` members."""
    key, members = item
    members = list(members)
    _, subject_name, object_name = members[0]
    return relation_of(key, [s for s, _, _ in members], subject_name, object_name)


class AggregateRelations(beam.PTransform):
    """``{statements, entity_of}`` -> ``PCollection[Relation]``, keyed by relation.

    ``statements`` holds lists of statements (one per batch of chunks, as
    :class:`transforms.extract.ExtractKnowledge` emits them); ``entity_of`` holds each
    assigned mention's ``(mention_id, (entity_id, entity name))``, as
    :class:`transforms.canonicalize.CanonicalizeEntities` emits them. The same relations
    as ``algorithms.summaries.aggregate_relations`` over all of them.

    Example:
        >>> relations = {"statements": s, "entity_of": pairs} | AggregateRelations()

    Memory bound: the statements of one relation (or of one mention) on a worker.
    """

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        entities = inputs["entity_of"]
        statements = inputs["statements"] | "EachStatement" >> beam.FlatMap(lambda batch: batch)
        named = (
            {
                "statements": statements
                | "BySubject" >> beam.Map(lambda s: (s.subject_mention_id, s)),
                "entity": entities,
            }
            | "JoinSubjects" >> beam.CoGroupByKey()
            | "WithSubject" >> beam.FlatMap(with_subject)
        )
        split = named | "ByObject" >> beam.FlatMap(by_object).with_outputs("value", main="mention")
        by_relation = (
            {"statements": split.mention, "entity": entities}
            | "JoinObjects" >> beam.CoGroupByKey()
            | "WithObject" >> beam.FlatMap(with_object)
        )
        relations = (
            (by_relation, split.value)
            | "Keyed" >> beam.Flatten()
            | "ByRelation" >> beam.GroupByKey()
            | "Aggregate" >> beam.Map(keyed_relation)
        )
        return typed(relations, Relation)
