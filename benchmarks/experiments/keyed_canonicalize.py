"""Canonicalization under Beam, keyed by squashed form against gathered on one worker.

Usage::

    python -m benchmarks.experiments.keyed_canonicalize WORK [--runs 3] [--model PATH]

``WORK`` is the folder of one size of a ``benchmarks.knowledge_scale --work`` run: its
segment's mentions and acronym definitions (``segment/extraction/``). Each run builds
both pipelines on the DirectRunner (in memory) from the same inputs, with the product's
name encoder (MiniLM by default): *gathered*, every mention and definition on one worker
(``transforms.gather.Gather``, then ``algorithms.canonicalize.canonicalize`` and the
mention and entity rows written as one list each: the step as it was), and *keyed*,
``transforms.canonicalize.CanonicalizeEntities`` with ``transforms.write.WriteRecords``
for its two tables. It prints the wall time of each and checks both write the same
tables.
"""

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from algorithms.canonicalize import canonicalize
from schemas import ENTITY_SCHEMA, MENTION_SCHEMA, Mention
from store.config import KnowledgeConfig
from store.models import force_offline, resolve_model
from transforms.canonicalize import ENTITIES, MENTIONS, CanonicalizeEntities, NameEncoder
from transforms.gather import Gather, batched_rows
from transforms.write import WriteRecords, WriteTable, records_table

BATCH = 64
"""Mentions per input element (the extraction emits one list per batch of chunks)."""


def inputs(work: str) -> tuple[list[list[Mention]], list[list[tuple[str, ...]]]]:
    """The mentions and the acronym definitions of ``work``, in batches."""
    folder = os.path.join(work, "segment", "extraction")
    table = pq.read_table(os.path.join(folder, "mentions.parquet"), columns=list(Mention._fields))
    columns = [table.column(name).to_pylist() for name in Mention._fields]
    mentions = [Mention(*values) for values in zip(*columns, strict=True)]
    acronyms = [
        tuple(row.values())
        for row in pq.read_table(os.path.join(folder, "acronyms.parquet")).to_pylist()
    ]
    return (
        [mentions[i : i + BATCH] for i in range(0, len(mentions), BATCH)],
        [acronyms[i : i + BATCH] for i in range(0, len(acronyms), BATCH)],
    )


class _GatheredFn(beam.DoFn):
    """The step as it was: every mention and definition on one worker."""

    def __init__(self, model: str, config: KnowledgeConfig) -> None:
        self._model = model
        self._config = config

    def setup(self) -> None:
        self._encoder = NameEncoder(self._model)

    def process(self, gathered: dict[str, list[Any]]) -> Any:
        mentions = batched_rows(gathered["mentions"])
        acronyms = sorted((row[-2], row[-1]) for row in batched_rows(gathered["acronyms"]))
        result = canonicalize(
            mentions,
            acronyms,
            embed=self._encoder.embed,
            similarity=self._config.merge_similarity,
            max_block=self._config.max_block_size,
        )
        yield result.entities
        assigned = [m._replace(entity_id=result.assignment[m.mention_id]) for m in mentions]
        yield beam.pvalue.TaggedOutput(MENTIONS, assigned)


def run(kind: str, mentions: list, acronyms: list, model: str, out: str) -> float:
    """One pipeline's wall time; its tables are written under ``out/<kind>``."""
    folder = os.path.join(out, kind)
    os.makedirs(folder, exist_ok=True)
    paths = {name: os.path.join(folder, f"{name}.parquet") for name in ("mentions", "entities")}
    started = time.perf_counter()
    with beam.Pipeline(options=PipelineOptions(["--runner=DirectRunner"])) as p:
        rows = {
            "mentions": p | "Mentions" >> beam.Create(mentions),
            "acronyms": p | "Acronyms" >> beam.Create(acronyms),
        }
        if kind == "keyed":
            canon = rows | CanonicalizeEntities(model=model)
            for name, schema, column in (
                (MENTIONS, MENTION_SCHEMA, "mention_id"),
                (ENTITIES, ENTITY_SCHEMA, "entity_id"),
            ):
                _ = canon[name] | f"Write{name}" >> WriteRecords(
                    paths[name], schema=schema, sort_column=column
                )
        else:
            canon = (
                rows
                | Gather(always=True)
                | beam.ParDo(_GatheredFn(model, KnowledgeConfig())).with_outputs(
                    MENTIONS, main=ENTITIES
                )
            )
            for name, schema, column in (
                (MENTIONS, MENTION_SCHEMA, "mention_id"),
                (ENTITIES, ENTITY_SCHEMA, "entity_id"),
            ):
                _ = canon[name] | f"Write{name}" >> WriteTable(
                    paths[name],
                    to_table=lambda r, schema=schema: records_table(r, schema),
                    sort_key=lambda row, column=column: getattr(row, column),
                    collected=True,
                )
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", help="one size's folder of a knowledge_scale --work run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", help="name encoder (default: the embedded MiniLM)")
    args = parser.parse_args(argv)
    force_offline()
    model = str(resolve_model(args.model))
    mentions, acronyms = inputs(args.work)
    print(
        f"{sum(len(b) for b in mentions):,} mentions, {sum(len(b) for b in acronyms):,} definitions"
    )
    with tempfile.TemporaryDirectory(prefix="keyed-canonicalize-") as out:
        for number in range(1, args.runs + 1):
            times = {
                kind: run(kind, mentions, acronyms, model, out) for kind in ("gathered", "keyed")
            }
            for name in ("mentions", "entities"):
                tables = [pq.read_table(os.path.join(out, k, f"{name}.parquet")) for k in times]
                if not tables[0].equals(tables[1]):
                    raise SystemExit(f"the keyed canonicalization wrote another {name} table")
            entities = pq.read_metadata(os.path.join(out, "keyed", "entities.parquet")).num_rows
            print(
                f"run {number}: gathered {times['gathered']:.1f} s, keyed {times['keyed']:.1f} s "
                f"({times['keyed'] / times['gathered']:.2f}x), {entities:,} entities"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
