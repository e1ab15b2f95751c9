"""Relation aggregation stage: statements -> canonical ``Relation`` rows (one global
step; the grouping is in ``algorithms.summaries``).
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from algorithms.summaries import aggregate_relations
from schemas import Relation, Statement
from transforms.gather import Gather, batched_rows, single
from transforms.tags import typed

logger = logging.getLogger(__name__)


class _AggregateFn(beam.DoFn):
    def process(self, gathered: dict[str, list[Any]]) -> Iterator[Relation]:
        statements: list[Statement] = batched_rows(gathered["statements"])
        assignment, names = single(gathered["assignment"], {}), single(gathered["names"], {})
        relations = aggregate_relations(statements, assignment, names)
        logger.info("grouped %d statements into %d relations", len(statements), len(relations))
        yield from relations


class AggregateRelations(beam.PTransform):
    """``{statements, assignment, names}`` -> ``PCollection[Relation]`` (global step).

    ``statements`` holds lists of statements (one per batch of chunks, as
    :class:`transforms.extract.ExtractKnowledge` emits them); ``assignment``
    ({mention_id: entity_id}) and ``names`` ({entity_id: name}) hold one dict each,
    as :class:`transforms.canonicalize.CanonicalizeEntities` emits them.

    Example:
        >>> relations = {"statements": s, "assignment": a, "names": n} | AggregateRelations()

    Memory bound: every statement of the corpus on one worker.
    """

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        relations = (
            {name: inputs[name] for name in ("statements", "assignment", "names")}
            | "GatherStatements" >> Gather()
            | "Aggregate" >> beam.ParDo(_AggregateFn())
        )
        return typed(relations, Relation)
