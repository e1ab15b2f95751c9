"""The keyed knowledge steps as ``K`` worker processes: what a runner with ``K`` workers
holds of canonicalization and relation aggregation, measured per process.

Each stage runs the functions the Beam transforms run per key
(``algorithms.canonical_blocks`` for ``transforms/canonicalize.py``,
``transforms.summaries``' joins and ``algorithms.summaries.relation_of`` for
``transforms/summaries.py``) in ``K`` fresh processes, shard ``s`` holding the keys whose
stable hash is ``s``; a stage hands its keyed output to the next through one pickle file
per (shard, next shard) under ``work/shuffle`` (a stand-in for the runner's shuffle,
which holds no worker's memory); the extraction tables enter it through a partition stage
that reads one batch at a time (the shuffle's write). The steps that meet on one worker in
the product meet on one process here too: the edges between blocks (no mention) and the
table writers.

Every process reports its peak RSS (``VmHWM``) and its busy seconds; a step's
``worker_peak_rss_mb`` is the largest of any of its processes.
"""

from __future__ import annotations

import contextlib
import glob
import multiprocessing
import os
import pickle
import shutil
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from benchmarks.knowledge_steps import (
    GENERATION,
    SEGMENT,
    HashNameEncoder,
    entity_shapes,
    read_rows,
    write_vector_table,
)

SHUFFLE = "shuffle"
EXCHANGES = (
    "mentions",
    "definitions",
    "pending",
    "present",
    "contexts",
    "blocks",
    "edges",
    "roots",
    "clusters",
    "claims",
    "mention_rows",
    "entity_rows",
    "entity_of",
)
"""The canonicalization's exchanges (``entity_of`` is what relation aggregation reads)."""
BATCH_ROWS = 65_536


def shard_of(key: Any, shards: int) -> int:
    """The shard of ``key``: a hash stable across processes (``hash`` of a string is not)."""
    return zlib.crc32(repr(key).encode()) % shards


def _own_peak_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM in /proc/self/status")


class Exchange:
    """The files one stage writes for the next: ``<work>/shuffle/<name>/<from>-<to>.pkl``."""

    def __init__(self, work: str, name: str, shards: int) -> None:
        self.folder = os.path.join(work, SHUFFLE, name)
        self.shards = shards

    def write(self, source: int, items: Iterable[tuple[Any, Any]]) -> int:
        """Write ``(key, value)`` items of shard ``source``, each to its key's shard;
        returns how many."""
        os.makedirs(self.folder, exist_ok=True)
        parts: dict[int, list[tuple[Any, Any]]] = defaultdict(list)
        count = 0
        for key, value in items:
            parts[shard_of(key, self.shards)].append((key, value))
            count += 1
        for target in range(self.shards):
            with open(os.path.join(self.folder, f"{source}-{target}.pkl"), "wb") as handle:
                pickle.dump(parts.pop(target, []), handle, protocol=pickle.HIGHEST_PROTOCOL)
        return count

    def grouped(self, target: int) -> dict[Any, list[Any]]:
        """Every value written for shard ``target``, grouped by key (sorted sources)."""
        groups: dict[Any, list[Any]] = defaultdict(list)
        for path in sorted(glob.glob(os.path.join(self.folder, f"*-{target}.pkl"))):
            with open(path, "rb") as handle:
                for key, value in pickle.load(handle):
                    groups[key].append(value)
        return groups


def _warm() -> None:
    """What a Beam worker has loaded before it runs a step: its busy seconds do not
    count imports (its peak RSS does)."""
    import algorithms.canonical_blocks  # noqa: F401
    import transforms.summaries
    import transforms.write  # noqa: F401


def _run(task: tuple[Callable[..., Any], tuple[Any, ...]]) -> tuple[Any, float, float]:
    function, args = task
    started = time.perf_counter()
    result = function(*args)
    return result, round(time.perf_counter() - started, 3), _own_peak_mb()


def run_stage(
    name: str, function: Callable[..., Any], args: list[tuple[Any, ...]], figures: dict[str, Any]
) -> list[Any]:
    """``function(*a)`` for each ``a`` of ``args``, each in a fresh spawned process, two
    at a time (the machine's cores), with Beam and the step's modules imported first
    (:func:`_warm`); records the stage's wall time, each process's peak RSS and the sum
    of their busy seconds (imports excluded) in ``figures["stages"][name]``."""
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes=min(2, len(args)), initializer=_warm, maxtasksperchild=1) as pool:
        outcomes = pool.map(_run, [(function, a) for a in args], chunksize=1)
    figures.setdefault("stages", {})[name] = {
        "wall_s": round(time.perf_counter() - started, 3),
        "process_s": round(sum(seconds for _, seconds, _ in outcomes), 3),
        "peak_rss_mb": [peak for _, _, peak in outcomes],
    }
    return [result for result, _, _ in outcomes]


def _batches(path: str, columns: list[str]) -> Iterator[dict[str, list[Any]]]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as parquet:
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            yield {name: batch.column(name).to_pylist() for name in columns}


def _partition(
    work: str,
    path: str,
    row_type: Any,
    exchanges: list[tuple[str, Callable[[Any], Any]]],
    shards: int,
) -> int:
    """The runner's shuffle of a table's rows: each batch of rows, as records, written to
    every named exchange keyed by its function (one source file set per batch: nothing
    but one batch is held)."""
    fields = list(row_type._fields)
    count = 0
    for number, batch in enumerate(_batches(path, fields)):
        rows = [row_type(*values) for values in zip(*(batch[n] for n in fields), strict=True)]
        for name, key in exchanges:
            Exchange(work, name, shards).write(number, ((key(row), row) for row in rows))
        count += len(rows)
    return count


class _Definition(NamedTuple):
    doc_id: str
    chunk_id: str
    short: str
    long: str


def _form_of(mention: Any) -> str:
    from algorithms.normalize import squashed

    return squashed(mention.norm)


def _short_form_of(definition: _Definition) -> str:
    from algorithms.normalize import squashed

    return squashed(definition.short)


def _partition_canonical(work: str, segment: str, shards: int) -> int:
    """Mentions by squashed form and acronym definitions by short form."""
    from schemas import Mention
    from store.segments import EXTRACTED_ACRONYMS, EXTRACTED_MENTIONS

    path = os.path.join(segment, EXTRACTED_ACRONYMS)
    _partition(work, path, _Definition, [("definitions", _short_form_of)], shards)
    path = os.path.join(segment, EXTRACTED_MENTIONS)
    return _partition(work, path, Mention, [("mentions", _form_of)], shards)


# ---- canonicalization -------------------------------------------------------------


def _blocks(work: str, shard: int, shards: int) -> dict[str, int]:
    """Shard ``shard`` of the blocks: its mentions' squashed forms, and the acronym
    definitions of its short forms (whose blocks it holds)."""
    from algorithms.canonical_blocks import block_of, dominant_expansion, head_contexts

    blocks = [
        block_of(key, mentions)
        for key, mentions in Exchange(work, "mentions", shards).grouped(shard).items()
    ]
    definitions = {
        key: [(d.short, d.long) for d in rows]
        for key, rows in Exchange(work, "definitions", shards).grouped(shard).items()
    }
    keys = {block.key for block in blocks}
    pending = []
    for short_key, pairs in definitions.items():
        expansion = dominant_expansion(pairs)
        if expansion and short_key in keys:
            pending.append((expansion[1], expansion[0]))  # keyed by the long form
    Exchange(work, "pending", shards).write(shard, pending)
    Exchange(work, "present", shards).write(shard, ((key, None) for key in keys))
    contexts = (item for block in blocks for item in head_contexts(block.head))
    Exchange(work, "contexts", shards).write(shard, contexts)
    Exchange(work, "blocks", shards).write(shard, ((block.key, block) for block in blocks))
    return {"blocks": len(blocks)}


def _edges(work: str, shard: int, shards: int, config: Any) -> int:
    """Shard ``shard``'s edges: the spelling variants among its contexts' heads, and the
    acronyms whose expansion's block it holds."""
    from algorithms.canonical_blocks import variant_edges

    present = Exchange(work, "present", shards).grouped(shard)
    edges = [
        (short, long)
        for long, shorts in Exchange(work, "pending", shards).grouped(shard).items()
        if long in present
        for short in shorts
    ]
    embed = HashNameEncoder().embed
    for entries in Exchange(work, "contexts", shards).grouped(shard).values():
        edges += variant_edges(
            entries,
            embed=embed,
            similarity=config.merge_similarity,
            max_block=config.max_block_size,
        )
    Exchange(work, "edges", 1).write(shard, ((0, edge) for edge in edges))
    return len(edges)


def _components(work: str, shards: int) -> int:
    """Every edge on one process: each block key of one -> its component's root."""
    from algorithms.canonical_blocks import components

    edges = Exchange(work, "edges", 1).grouped(0).get(0, [])
    roots = components(edges)
    Exchange(work, "roots", shards).write(0, roots.items())
    return len(edges)


def _clusters(work: str, shard: int, shards: int) -> int:
    """Shard ``shard``'s blocks, as clusters keyed by where each meets its entity."""
    from algorithms.canonical_blocks import cluster_key

    roots = Exchange(work, "roots", shards).grouped(shard)
    blocks = Exchange(work, "blocks", shards).grouped(shard)
    items = (
        (cluster_key(block, roots[key][0] if key in roots else None, cluster), cluster)
        for key, (block,) in blocks.items()
        for cluster in block.clusters
    )
    return Exchange(work, "clusters", shards).write(shard, items)


def _claims(work: str, shard: int, shards: int) -> int:
    """Shard ``shard``'s clusters, one entity each, keyed by the entity's id."""
    from algorithms.canonical_blocks import cluster_entity

    groups = Exchange(work, "clusters", shards).grouped(shard)
    claims = []
    for parts in groups.values():
        unit, entity, members = cluster_entity(parts)
        claims.append((entity.entity_id, (unit, entity, members)))
    return Exchange(work, "claims", shards).write(shard, claims)


def _entities(work: str, shard: int, shards: int) -> int:
    """Shard ``shard``'s entity ids: the entities and the mentions with their entity, as
    Arrow tables (``transforms.write.WriteRecords`` makes them where the rows are made),
    and each mention's entity and name (keyed by mention, as relation aggregation reads
    them)."""
    import pyarrow.feather as feather

    from algorithms.canonical_blocks import distinct_ids
    from schemas import ENTITY_SCHEMA, MENTION_SCHEMA
    from transforms.write import records_table

    entities, mentions, entity_of = [], [], []
    for claims in Exchange(work, "claims", shards).grouped(shard).values():
        for entity, members in distinct_ids(claims):
            entities.append(entity)
            mentions += [m._replace(entity_id=entity.entity_id) for m in members]
            entity_of += [(m.mention_id, (entity.entity_id, entity.name)) for m in members]
    for name, rows, schema in (
        ("mention_rows", mentions, MENTION_SCHEMA),
        ("entity_rows", entities, ENTITY_SCHEMA),
    ):
        folder = os.path.join(work, SHUFFLE, name)
        os.makedirs(folder, exist_ok=True)
        feather.write_feather(records_table(rows, schema), os.path.join(folder, f"{shard}.arrow"))
    del mentions
    Exchange(work, "entity_of", shards).write(shard, entity_of)
    return len(entities)


def _write_canonical(work: str, generation: str, shards: int) -> dict[str, int]:
    """The mentions and entities tables on one worker, as ``WriteRecords`` writes them:
    every shard's Arrow tables, sorted by id."""
    import pyarrow.feather as feather

    from schemas import ENTITY_SCHEMA, MENTION_SCHEMA
    from transforms.write import sorted_table, write_parquet

    os.makedirs(generation, exist_ok=True)
    counts = {}
    for name, folder, schema, column in (
        ("mentions", "mention_rows", MENTION_SCHEMA, "mention_id"),
        ("entities", "entity_rows", ENTITY_SCHEMA, "entity_id"),
    ):
        paths = [os.path.join(work, SHUFFLE, folder, f"{s}.arrow") for s in range(shards)]
        tables = [feather.read_table(path, memory_map=False) for path in paths]
        table = sorted_table(tables, schema, column)
        del tables
        write_parquet(table, os.path.join(generation, f"{name}.parquet"))
        counts[name] = table.num_rows
    return counts


def canonicalize_sharded(
    work: str, segment: str, generation: str, config: Any, shards: int
) -> dict[str, Any]:
    """Canonicalize the segment's mentions in ``shards`` worker processes per stage;
    write the mentions and entities tables. Returns per-stage figures."""
    figures: dict[str, Any] = {"shards": shards}
    each = [(s, shards) for s in range(shards)]
    run_stage("partition", _partition_canonical, [(work, segment, shards)], figures)
    counts = run_stage("blocks", _blocks, [(work, *a) for a in each], figures)
    run_stage("edges", _edges, [(work, s, shards, config) for s in range(shards)], figures)
    figures["edge_count"] = run_stage("components", _components, [(work, shards)], figures)[0]
    run_stage("clusters", _clusters, [(work, *a) for a in each], figures)
    run_stage("claims", _claims, [(work, *a) for a in each], figures)
    run_stage("entities", _entities, [(work, *a) for a in each], figures)
    written = run_stage("write", _write_canonical, [(work, generation, shards)], figures)
    figures.update(written[0], block_count=sum(c["blocks"] for c in counts))
    return figures


# ---- relation aggregation ------------------------------------------------------------


def _subject_of(statement: Any) -> str:
    return statement.subject_mention_id


def _partition_statements(work: str, segment: str, shards: int) -> int:
    """Statements by subject mention."""
    from schemas import Statement
    from store.segments import EXTRACTED_STATEMENTS

    path = os.path.join(segment, EXTRACTED_STATEMENTS)
    return _partition(work, path, Statement, [("statements", _subject_of)], shards)


def _subjects(work: str, shard: int, shards: int) -> int:
    """Shard ``shard`` of the mentions: the statements whose subject it holds, with the
    subject's entity; each keyed by its object mention, or by its relation already."""
    from apache_beam.pvalue import TaggedOutput

    from transforms.summaries import by_object, with_subject

    statements = Exchange(work, "statements", shards).grouped(shard)
    entity_of = Exchange(work, "entity_of", shards).grouped(shard)
    by_mention, by_relation = [], []
    for mention_id, group in statements.items():
        joined = {"statements": group, "entity": entity_of.get(mention_id, [])}
        for named in with_subject((mention_id, joined)):
            for out in by_object(named):
                if isinstance(out, TaggedOutput):
                    by_relation.append(out.value)
                else:
                    by_mention.append(out)
    Exchange(work, "by_object", shards).write(shard, by_mention)
    Exchange(work, "values", shards).write(shard, by_relation)
    return sum(len(group) for group in statements.values())


def _objects(work: str, shard: int, shards: int) -> int:
    """Shard ``shard`` of the mentions: the statements whose object it holds, keyed by
    their relation."""
    from transforms.summaries import with_object

    entity_of = Exchange(work, "entity_of", shards).grouped(shard)
    keyed = [
        item
        for mention_id, group in Exchange(work, "by_object", shards).grouped(shard).items()
        for item in with_object(
            (mention_id, {"statements": group, "entity": entity_of.get(mention_id, [])})
        )
    ]
    return Exchange(work, "by_relation", shards).write(shard, keyed)


def _relations(work: str, shard: int, shards: int) -> int:
    """Shard ``shard`` of the relation keys: one relation each."""
    from transforms.summaries import keyed_relation

    relations = [
        (0, keyed_relation((key, members)))
        for exchange in ("by_relation", "values")
        for key, members in Exchange(work, exchange, shards).grouped(shard).items()
    ]
    return Exchange(work, "relations", 1).write(shard, relations)


def _write_relations(work: str, generation: str) -> int:
    """The relations table and its (empty) HNSW file, on one worker."""
    relations = Exchange(work, "relations", 1).grouped(0).get(0, [])
    write_vector_table(
        relations,
        os.path.join(generation, "relations.parquet"),
        os.path.join(generation, "relations.usearch"),
        lambda r: r.relation_id,
    )
    return len(relations)


def aggregate_sharded(work: str, segment: str, generation: str, shards: int) -> dict[str, Any]:
    """Aggregate the segment's statements into relations in ``shards`` worker processes
    per stage, from the mentions' entities the canonicalization left in the exchange;
    write the relations table. Returns per-stage figures."""
    if not os.path.isdir(os.path.join(work, SHUFFLE, "entity_of")):
        raise FileNotFoundError(f"no canonicalization exchange under {work}: run it first")
    figures: dict[str, Any] = {"shards": shards}
    each = [(work, s, shards) for s in range(shards)]
    counts = run_stage("partition", _partition_statements, [(work, segment, shards)], figures)
    run_stage("subjects", _subjects, each, figures)
    run_stage("objects", _objects, each, figures)
    run_stage("aggregate", _relations, each, figures)
    written = run_stage("write", _write_relations, [(work, generation)], figures)
    figures.update(statements=counts[0], relations=written[0])
    return figures


def clear(work: str, *names: str) -> None:
    """Remove the named exchanges (all of them without names)."""
    folder = os.path.join(work, SHUFFLE)
    for name in names or [""]:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(os.path.join(folder, name))


# ---- the benchmark's steps -------------------------------------------------------------


def step_canonicalize(work: str, config: Any, shards: int = 1) -> dict[str, Any]:
    """The benchmark's canonicalize step: every mention by key in ``shards`` worker
    processes a stage (:func:`canonicalize_sharded`), then the entities' shapes."""
    generation = os.path.join(work, GENERATION)
    clear(work)
    figures = _stage_totals(
        canonicalize_sharded(work, os.path.join(work, SEGMENT), generation, config, shards)
    )
    figures["mentions_per_core_s"] = round(figures["mentions"] / max(figures["process_s"], 1e-9))
    entities = read_rows(os.path.join(generation, "entities.parquet"), _EntityShape)
    figures.update(entity_shapes(entities))
    # What relation aggregation reads of the canonicalization (its entity_of output).
    clear(work, *(name for name in EXCHANGES if name != "entity_of"))
    return figures


class _EntityShape(NamedTuple):
    mention_count: int
    aliases: list[str]


def step_relations(work: str, shards: int = 1) -> dict[str, Any]:
    """The benchmark's relations step: every statement by key in ``shards`` worker
    processes a stage (:func:`aggregate_sharded`)."""
    generation = os.path.join(work, GENERATION)
    figures = aggregate_sharded(work, os.path.join(work, SEGMENT), generation, shards)
    clear(work)
    return _stage_totals(figures)


def _stage_totals(figures: dict[str, Any]) -> dict[str, Any]:
    """A sharded step's figures with its stages' wall time, busy seconds and the largest
    peak RSS of any of its worker processes."""
    stages = list(figures["stages"].values())
    figures["stages_wall_s"] = round(sum(stage["wall_s"] for stage in stages), 3)
    figures["process_s"] = round(sum(stage["process_s"] for stage in stages), 3)
    figures["worker_peak_rss_mb"] = max(max(stage["peak_rss_mb"]) for stage in stages)
    return figures
