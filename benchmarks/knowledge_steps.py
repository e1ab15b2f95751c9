"""The steps of ``benchmarks.knowledge_scale`` that build a generation's knowledge
tables from the synthetic workload, each run in its own process by that module.

``generate`` writes the workload's extraction as one segment; ``canonicalize``,
``relations`` and ``communities`` call the functions the Beam transforms call on their
gathered inputs (``algorithms.canonicalize.canonicalize``,
``algorithms.summaries.aggregate_relations``, ``algorithms.communities.
detect_communities``) and write their tables with the product's writers
(``transforms.write``, ``transforms.ann``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from benchmarks.knowledge_workload import DocumentRows, generate
from schemas import Mention, Statement

SEGMENT = "segment"
GENERATION = "generation"
WINDOW_ROWS = "window_rows"
DIMENSION = 384  # the bundled model's: the width of the (empty) HNSW files


class HashNameEncoder:
    """Benchmark-only stand-in for ``transforms.canonicalize.NameEncoder``: each name's
    vector is a fixed unit vector from its BLAKE2 hash (no model, deterministic).

    Example:
        >>> HashNameEncoder("unused").embed(["tumour", "tumor"]).shape
        (2, 32)
    """

    def __init__(self, model: str = "") -> None:
        self.model = model

    def embed(self, names: list[str]) -> np.ndarray:
        """``(len(names), 32)`` float32 unit vectors."""
        raw = b"".join(hashlib.blake2b(n.encode(), digest_size=32).digest() for n in names)
        vectors = np.frombuffer(raw, dtype=np.uint8).reshape(len(names), 32).astype(np.float32)
        vectors -= 127.5
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def peak_rss_mb() -> float:
    """This process's peak RSS (its own ``VmHWM``: a forked child's ``ru_maxrss`` starts
    at its parent's peak) or, if larger, that of the largest process it waited for."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                own = int(line.split()[1]) / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return round(max(own, children), 1)


def bytes_under(path: str, *, own_only: bool = False) -> int:
    """Bytes of the files under ``path``, each file (inode) once: a hard link of a file
    written before is no new byte. ``own_only``: only files no other folder links to
    (what a window wrote, not the base it links)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            status = os.stat(os.path.join(folder, name))
            if (status.st_dev, status.st_ino) in seen or (own_only and status.st_nlink > 1):
                continue
            seen.add((status.st_dev, status.st_ino))
            total += status.st_size
    return total


def read_rows(path: str, row_type: Any) -> list[Any]:
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(row_type._fields))
    columns = [table.column(name).to_pylist() for name in row_type._fields]
    return [row_type(*values) for values in zip(*columns, strict=True)]


def _entity_names(generation: str) -> dict[str, str]:
    """entity id -> name, from the generation's entities table."""
    import pyarrow.parquet as pq

    entities = pq.read_table(
        os.path.join(generation, "entities.parquet"), columns=["entity_id", "name"]
    )
    return dict(zip(entities["entity_id"].to_pylist(), entities["name"].to_pylist(), strict=True))


@contextlib.contextmanager
def _timed(figures: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    figures[name] = round(time.perf_counter() - started, 3)


def step_generate(work: str, docs: int, seed: int) -> dict[str, Any]:
    """Write the workload's extraction (a segment) and the window document's rows."""
    return write_workload(generate(docs, seed=seed), work, docs)


def entity_shapes(entities: Sequence[Any]) -> dict[str, float]:
    counts = np.asarray([e.mention_count for e in entities])
    aliases = np.asarray([len(e.aliases) for e in entities])
    return {
        "singleton_entity_share": round(float((counts == 1).mean()), 4),
        "multi_alias_entity_share": round(float((aliases > 1).mean()), 4),
        "top_entity_mentions": int(counts.max()),
    }


def write_vector_table(rows: list[Any], path: str, index: str, row_id: Any) -> None:
    """A relations or communities table without vectors, and its (empty) HNSW file."""
    from store.config import AnnConfig
    from transforms.ann import build_index, save_index
    from transforms.write import vector_rows_table, write_parquet

    schema = _schema_of(rows, path)
    rows = sorted(rows, key=row_id)
    write_parquet(
        vector_rows_table([(r, None) for r in rows], schema, DIMENSION, row_id=row_id), path
    )
    empty = np.zeros((0, DIMENSION), np.float32)
    save_index(build_index(np.zeros(0, np.uint64), empty, config=AnnConfig()), index)


def _schema_of(rows: list[Any], path: str) -> Any:
    from schemas import COMMUNITY_SCHEMA, RELATION_SCHEMA

    return COMMUNITY_SCHEMA if path.endswith("communities.parquet") else RELATION_SCHEMA


def step_communities(work: str, config: Any, seed: int) -> dict[str, Any]:
    """Detect communities over every relation; write the communities table."""

    from algorithms.communities import detect_communities
    from schemas import Relation

    generation = os.path.join(work, GENERATION)
    figures: dict[str, Any] = {"engine": getattr(config, "community_engine", "python-louvain")}
    with _timed(figures, "read_s"):
        relations = read_rows(os.path.join(generation, "relations.parquet"), Relation)
        names = _entity_names(generation)
    with _timed(figures, "detect_s"):
        communities = detect_communities(relations, names, config=config, seed=seed)
    with _timed(figures, "write_s"):
        write_vector_table(
            communities,
            os.path.join(generation, "communities.parquet"),
            os.path.join(generation, "communities.usearch"),
            lambda c: c.community_id,
        )
    figures.update(
        communities=len(communities),
        levels=len({c.level for c in communities}) if communities else 0,
    )
    return figures


def _extraction_tables() -> dict[str, tuple[str, Any]]:
    from schemas import ACRONYM_SCHEMA, MENTION_SCHEMA, STATEMENT_SCHEMA
    from store.segments import EXTRACTED_ACRONYMS, EXTRACTED_MENTIONS, EXTRACTED_STATEMENTS

    return {
        "mentions": (EXTRACTED_MENTIONS, MENTION_SCHEMA),
        "statements": (EXTRACTED_STATEMENTS, STATEMENT_SCHEMA),
        "acronyms": (EXTRACTED_ACRONYMS, ACRONYM_SCHEMA),
    }


class _SegmentWriter:
    """Streams documents' extraction rows into a segment's Parquet files, in blocks."""

    def __init__(self, segment: str, tables: dict[str, tuple[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from transforms.write import PARQUET_OPTIONS

        self.tables = tables
        self.chunk_schema = pa.schema([("chunk_id", pa.string()), ("doc_id", pa.string())])
        os.makedirs(os.path.join(segment, "extraction"), exist_ok=True)
        self.writers = {
            name: pq.ParquetWriter(os.path.join(segment, rel), schema, **PARQUET_OPTIONS)
            for name, (rel, schema) in tables.items()
        }
        self.writers["chunks"] = pq.ParquetWriter(
            os.path.join(segment, "chunks.parquet"), self.chunk_schema, **PARQUET_OPTIONS
        )
        self.block: list[DocumentRows] = []

    def add(self, document: DocumentRows) -> None:
        self.block.append(document)
        if len(self.block) == 2_000:
            self.flush()

    def flush(self) -> None:
        from transforms.write import records_table

        for name, (_, schema) in self.tables.items():
            rows = [r for d in self.block for r in getattr(d, name)]
            self.writers[name].write_table(records_table(rows, schema))
        pairs = [(c, d.doc_id) for d in self.block for c in d.chunk_ids]
        self.writers["chunks"].write_table(records_table(pairs, self.chunk_schema))
        self.block.clear()

    def close(self) -> None:
        self.flush()
        for writer in self.writers.values():
            writer.close()


def write_workload(documents: Iterator[DocumentRows], work: str, docs: int) -> dict[str, Any]:
    """Write the first ``docs`` documents' extraction as one segment under ``work/segment``
    (``extraction/*.parquet`` and a ``chunks.parquet`` of chunk and document ids) and the
    last document's under ``work/window_rows``; returns the workload's measured shapes."""
    tables = _extraction_tables()
    writer = _SegmentWriter(os.path.join(work, SEGMENT), tables)
    totals = dict.fromkeys(("chunks", "mentions", "statements", "acronyms", "doc_entities"), 0)
    drawn = 0
    for index, document in enumerate(documents):
        if index == docs:
            _write_window(document, os.path.join(work, WINDOW_ROWS), tables)
            break
        for name in ("mentions", "statements", "acronyms"):
            totals[name] += len(getattr(document, name))
        totals["chunks"] += len(document.chunk_ids)
        totals["doc_entities"] += document.doc_entities
        drawn = document.drawn_entities
        writer.add(document)
        if index % 10_000 == 9_999:
            print(f"  generated {index + 1:,}/{docs:,} documents", file=sys.stderr, flush=True)
    writer.close()
    return {"workload": _shapes(totals, docs, drawn)}


def _shapes(totals: dict[str, int], docs: int, drawn: int) -> dict[str, Any]:
    chunks = max(1, totals["chunks"])
    return {
        "documents": docs,
        "chunks": totals["chunks"],
        "mentions": totals["mentions"],
        "statements": totals["statements"],
        "acronym_definitions": totals["acronyms"],
        "drawn_entities": drawn,
        "chunks_per_doc": round(totals["chunks"] / max(1, docs), 4),
        "mentions_per_chunk": round(totals["mentions"] / chunks, 4),
        "statements_per_chunk": round(totals["statements"] / chunks, 4),
        "mentions_per_doc_entity": round(totals["mentions"] / max(1, totals["doc_entities"]), 4),
    }


def _write_window(document: DocumentRows, folder: str, tables: dict[str, Any]) -> None:
    from transforms.write import records_table, write_parquet

    os.makedirs(os.path.join(folder, "extraction"), exist_ok=True)
    for name, (rel, schema) in tables.items():
        write_parquet(records_table(getattr(document, name), schema), os.path.join(folder, rel))


def read_window(work: str) -> tuple[dict[str, list[Any]], list[str]]:
    """The window document's rows (``{mentions, statements, acronyms}`` as one batch
    each, as the stream committer hands them on) and the corpus's document ids (all
    unchanged: the window adds a document)."""
    import pyarrow.parquet as pq

    from store.segments import EXTRACTED_ACRONYMS, EXTRACTED_MENTIONS, EXTRACTED_STATEMENTS

    folder = os.path.join(work, WINDOW_ROWS)
    rows: dict[str, list[Any]] = {}
    for name, rel, row_type in (
        ("mentions", EXTRACTED_MENTIONS, Mention),
        ("statements", EXTRACTED_STATEMENTS, Statement),
        ("acronyms", EXTRACTED_ACRONYMS, None),
    ):
        table = pq.read_table(os.path.join(folder, rel))
        columns = [table.column(n).to_pylist() for n in table.column_names]
        make = row_type._make if row_type is not None else tuple
        rows[name] = [[make(values) for values in zip(*columns, strict=True)]]
    chunks = pq.read_table(os.path.join(work, "segment", "chunks.parquet"), columns=["doc_id"])
    return rows, sorted(set(chunks["doc_id"].to_pylist()))
