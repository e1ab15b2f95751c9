"""Relation aggregation under Beam, keyed by relation against gathered on one worker.

Usage::

    python -m benchmarks.experiments.keyed_relations WORK [--runs 3]

``WORK`` is the folder of one size of a ``benchmarks.knowledge_scale --work`` run: its
segment's statements (``segment/extraction/statements.parquet``), and the assignment and
names its canonicalization wrote (``generation/mentions.parquet``,
``generation/entities.parquet``). Each run builds both pipelines on the DirectRunner (in
memory) from the same inputs: *gathered*, every statement with the assignment and names
on one worker (``transforms.gather.Gather``, then ``algorithms.summaries.
aggregate_relations``: the step as it was), and *keyed*, ``transforms.summaries.
AggregateRelations`` (statements joined to their mentions' entities by mention id, then
grouped by relation key). It prints the wall time of each and checks both give the same
relations.
"""

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from algorithms.summaries import aggregate_relations
from schemas import Statement
from transforms.gather import CollectAll, Gather, batched_rows, single
from transforms.summaries import AggregateRelations

BATCH = 64
"""Statements per input element (the extraction emits one list per batch of chunks)."""


def inputs(work: str) -> tuple[list[list[Statement]], dict[str, str], dict[str, str]]:
    """The statements in batches, the assignment and the names of ``work``."""
    table = pq.read_table(os.path.join(work, "segment", "extraction", "statements.parquet"))
    fields = list(Statement._fields)
    statements = [Statement(**{f: row[f] for f in fields}) for row in table.to_pylist()]
    mentions = pq.read_table(
        os.path.join(work, "generation", "mentions.parquet"), columns=["mention_id", "entity_id"]
    )
    assignment = dict(
        zip(mentions["mention_id"].to_pylist(), mentions["entity_id"].to_pylist(), strict=True)
    )
    entities = pq.read_table(
        os.path.join(work, "generation", "entities.parquet"), columns=["entity_id", "name"]
    )
    names = dict(zip(entities["entity_id"].to_pylist(), entities["name"].to_pylist(), strict=True))
    batches = [statements[i : i + BATCH] for i in range(0, len(statements), BATCH)]
    return batches, assignment, names


def _gathered(gathered: dict[str, list[Any]]) -> Any:
    statements = batched_rows(gathered["statements"])
    assignment, names = single(gathered["assignment"], {}), single(gathered["names"], {})
    return aggregate_relations(statements, assignment, names)


def _save(relations: list[Any], path: str) -> None:
    rows = sorted((r._asdict() for r in relations), key=lambda r: r["relation_id"])
    with open(path, "w") as handle:
        json.dump(rows, handle)


def run(kind: str, batches: list, assignment: dict, names: dict) -> tuple[float, list[Any]]:
    """One pipeline's wall time and its relations (as JSON rows), sorted by id."""
    handle, out = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    started = time.perf_counter()
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"])) as p:
        statements = p | "Statements" >> beam.Create(batches)
        if kind == "keyed":
            pairs = [(m, (e, names[e])) for m, e in sorted(assignment.items())]
            entity_of = p | "EntityOf" >> beam.Create(pairs)
            relations = {"statements": statements, "entity_of": entity_of} | AggregateRelations()
        else:
            relations = (
                {
                    "statements": statements,
                    "assignment": p | "Assignment" >> beam.Create([assignment]),
                    "names": p | "Names" >> beam.Create([names]),
                }
                | Gather()
                | beam.FlatMap(_gathered)
            )
        _ = relations | "Collect" >> CollectAll() | "Save" >> beam.Map(_save, out)
    seconds = time.perf_counter() - started
    with open(out) as handle:
        found = json.load(handle)
    os.unlink(out)
    return seconds, found


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", help="one size's folder of a knowledge_scale --work run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    batches, assignment, names = inputs(args.work)
    count = sum(len(b) for b in batches)
    print(f"{count:,} statements, {len(assignment):,} mentions, {len(names):,} entities")
    for number in range(1, args.runs + 1):
        times = {}
        results = {}
        for kind in ("gathered", "keyed"):
            times[kind], results[kind] = run(kind, batches, assignment, names)
        if results["keyed"] != results["gathered"]:
            raise SystemExit("the keyed aggregation made other relations")
        print(
            f"run {number}: gathered {times['gathered']:.1f} s, keyed {times['keyed']:.1f} s "
            f"({times['keyed'] / times['gathered']:.2f}x), {len(results['keyed']):,} relations"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
