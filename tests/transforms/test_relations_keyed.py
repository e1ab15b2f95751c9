"""Relation aggregation keyed by relation (transforms.summaries) against the in-memory
grouping of every statement (algorithms.summaries.aggregate_relations)."""

import random

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from algorithms.summaries import aggregate_relations
from schemas import Statement
from transforms.summaries import AggregateRelations


def _statements(seed: int, count: int) -> tuple[list[Statement], dict, dict]:
    """Statements over 30 mentions, some without an entity, of 8 entities, with value
    objects, self-relations and several statements per relation, in batches."""
    rng = random.Random(seed)
    mentions = [f"m{i:02d}" for i in range(30)]
    assignment = {m: f"e{rng.randrange(8)}" for m in mentions if rng.random() < 0.8}
    names = {f"e{i}": f"Entity {i}" for i in range(8)}
    statements = []
    for i in range(count):
        literal = rng.random() < 0.3
        statements.append(
            Statement(
                statement_id=f"s{i:04d}",
                chunk_id=f"c{rng.randrange(12)}",
                doc_id=f"d{rng.randrange(5)}",
                subject_mention_id=rng.choice(mentions),
                predicate=rng.choice(["limit", "operates", "part of"]),
                object_mention_id=None if literal else rng.choice(mentions),
                object_text=rng.choice(["500 INR", "500  inr", "NPCI"]) if literal else "x",
                category=rng.choice(["limit", "process", "definition"]),
                confidence=rng.choice([0.3, 0.5, 0.9]),
                sentence_start=rng.randrange(3) * 10,
                sentence_end=rng.randrange(3) * 10 + 5,
            )
        )
    return statements, assignment, names


def _entity_of(assignment: dict, names: dict) -> list:
    """Each assigned mention with its entity and name, as canonicalization emits them."""
    return [(m, (e, names[e])) for m, e in sorted(assignment.items())]


def test_keyed_aggregation_makes_the_relations_the_whole_grouping_makes():
    statements, assignment, names = _statements(seed=53, count=400)
    expected = aggregate_relations(statements, assignment, names)
    assert len(expected) > 30 and any(r.object_id is None for r in expected)
    assert any(r.support > 2 for r in expected)  # statements meet under one key
    batches = [statements[i : i + 37] for i in range(0, len(statements), 37)]
    with TestPipeline() as p:
        relations = {
            "statements": p | "Statements" >> beam.Create(batches),
            "entity_of": p | "EntityOf" >> beam.Create(_entity_of(assignment, names)),
        } | AggregateRelations()
        assert_that(relations, equal_to(expected))


def test_no_statement_or_no_entity_makes_no_relation():
    statements, _, names = _statements(seed=5, count=20)
    with TestPipeline() as p:
        none = {
            "statements": p | "Statements" >> beam.Create([statements]),
            "entity_of": p | "EntityOf" >> beam.Create(_entity_of({}, names)),
        } | "NoEntity" >> AggregateRelations()
        assert_that(none, equal_to([]), label="NoEntity")
        empty = {
            "statements": p | "NoStatements" >> beam.Create([]),
            "entity_of": p | "NoEntityOf" >> beam.Create([]),
        } | "Empty" >> AggregateRelations()
        assert_that(empty, equal_to([]), label="Empty")
