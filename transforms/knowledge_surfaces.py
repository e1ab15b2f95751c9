"""The surfaces of an incremental knowledge update: the relations and communities tables
and their HNSW files of the new generation, written from what the update
(:mod:`transforms.knowledge_update`) recomputed and the vectors embedded for it, over the
parent's: rows looked up (:mod:`store.knowledge_rows`), the change written as a delta,
and the parent's HNSW files updated in place (removed keys removed, new keys added), not
rebuilt."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from algorithms.summaries import COOCCURRENCE
from schemas import RELATION_SCHEMA, Relation
from store import bundles, knowledge_layers, storage, table_cache
from store.config import AnnConfig
from store.knowledge_rows import KnowledgeRows
from transforms.ann import AnnKeyCollisionError, build_index, keys_and_vectors, save_index
from transforms.embed import text_key
from transforms.gather import Gather, single
from transforms.knowledge_parent import replaced
from transforms.write import vector_rows_table, with_vector_columns, write_parquet

__all__ = [
    "KnowledgeUpdate",
    "WriteSurfaces",
    "embeddable",
    "embedded",
    "read_table",
    "write_table",
]


class KnowledgeUpdate(NamedTuple):
    """What the update step hands to the surface writer."""

    removed_relations: list[str]  # parent relation ids that are gone or recomputed
    relations: list[Relation]  # recomputed and new relations
    communities: pa.Table | None  # the new generation's (COMMUNITY_SCHEMA); None: the parent's
    reclustered: bool


def read_table(generation: str, name: str, columns: list[str] | None = None) -> pa.Table:
    """A knowledge table of a generation, whole or folded from its base and delta (a
    stream's last window wrote it: :mod:`store.table_cache`)."""
    return knowledge_layers.read_table(generation, name, columns)


def write_table(table: pa.Table, path: str) -> None:
    """Write a whole knowledge table; a stream keeps it in memory for the validation
    and the window that read it next."""
    write_parquet(table, path)
    table_cache.written(path, table)


def embeddable(relation: Relation, floor: float) -> bool:
    return relation.category != COOCCURRENCE and relation.confidence >= floor


def _local_index(path: str, scratch: str) -> Any:
    """The HNSW file at ``path`` (any filesystem), loaded to be changed."""
    from usearch.index import Index

    local = os.path.join(scratch, os.path.basename(path))
    with FileSystems.open(path) as src, open(local, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return Index.restore(local)


def _updated_index(
    parent_index: str,
    scratch: str,
    removed: np.ndarray,
    added: tuple[np.ndarray, np.ndarray],
) -> Any:
    """The parent's HNSW file with ``removed`` keys removed and ``added`` (sorted keys,
    vectors) added on one thread, in key order.

    Raises:
        AnnKeyCollisionError: an added key is already a remaining row's key.
    """
    keys, vectors = added
    index = _local_index(parent_index, scratch)
    if len(removed):
        index.remove(removed)
    if len(keys):
        clash = keys[np.asarray(index.contains(keys), dtype=bool)]
        if len(clash):
            raise AnnKeyCollisionError(f"ANN key {int(clash[0])} added twice")
        index.add(keys, vectors, threads=1)
    return index


def _embedded_rows(table: pa.Table, column: str, wanted: set[str]) -> pa.Table:
    """The rows of a parent table whose ``column`` text is ``wanted`` and has a vector."""
    return table.filter(
        pc.and_(
            pc.is_in(table[column], value_set=pa.array(sorted(wanted), type=pa.string())),
            pc.is_valid(table["embedding"]),
        )
    )


def embedded(table: pa.Table, column: str, wanted: set[str]) -> set[str]:
    """The ``wanted`` texts the parent table holds a vector for (they are not embedded)."""
    return set(_embedded_rows(table, column, wanted)[column].to_pylist())


def _vector_lookup(table: pa.Table, column: str, wanted: set[str]) -> dict[str, np.ndarray]:
    """text -> parent vector, for the ``wanted`` texts the parent table embedded."""
    rows = _embedded_rows(table, column, wanted)
    flat = pc.list_flatten(rows["embedding"]).to_numpy().astype(np.float32)
    matrix = flat.reshape(rows.num_rows, -1) if rows.num_rows else []
    return dict(zip(rows[column].to_pylist(), matrix, strict=True))


class _WriteSurfacesFn(beam.DoFn):
    """Gathered ``{update, vectors}`` -> the relations and communities tables and their
    HNSW files in ``staging``."""

    def __init__(
        self,
        *,
        parent: str,
        staging: str,
        dimension: int,
        floor: float,
        ann: AnnConfig,
        fold_share: float = knowledge_layers.FOLD_SHARE,
    ) -> None:
        self._parent = parent
        self._staging = staging
        self._dimension = dimension
        self._floor = floor
        self._ann = ann
        self._fold_share = fold_share

    def process(self, gathered: dict[str, list[Any]]) -> Iterator[tuple[str, int]]:
        update: KnowledgeUpdate = single(gathered["update"], None)
        embedded = {key: vector for key, vector in gathered["vectors"]}

        def vector(text: str, parent: dict[str, np.ndarray]) -> Any:
            return parent.get(text, embedded.get(text_key(text)))

        with tempfile.TemporaryDirectory() as scratch:
            yield from self._relations(update, vector, scratch)
            if update.communities is None:
                yield from self._parent_communities()
            else:
                yield from self._communities(
                    update.communities, update.reclustered, vector, scratch
                )

    def _relations(self, update: KnowledgeUpdate, vector: Any, scratch: str) -> Iterator[Any]:
        """The parent's relation rows less the removed ones, plus the recomputed ones."""
        join = storage.join
        parent_relations = KnowledgeRows(self._parent, bundles.RELATIONS)
        gone = parent_relations.with_ids(update.removed_relations)
        summaries = {r.summary for r in update.relations if embeddable(r, self._floor)}
        known = _vector_lookup(parent_relations.where("summary", summaries), "summary", summaries)
        pairs = [
            (r, vector(r.summary, known) if embeddable(r, self._floor) else None)
            for r in update.relations
        ]
        fresh = vector_rows_table(
            pairs, RELATION_SCHEMA, self._dimension, row_id=lambda r: r.relation_id
        )
        recomputed = set(fresh["relation_id"].to_pylist())
        knowledge_layers.write_change(
            self._staging,
            bundles.RELATIONS,
            self._parent,
            upserts=fresh,
            removed=[r for r in update.removed_relations if r not in recomputed],
            whole=lambda: replaced(
                parent_relations, set(update.removed_relations), fresh, fresh.schema
            ),
            write=write_table,
            fold_share=self._fold_share,
        )
        gone_keys = gone.filter(pc.is_valid(gone["embedding"]))["ann_key"].to_numpy()
        added = keys_and_vectors(
            [(r.relation_id, v) for r, v in pairs if v is not None], self._dimension
        )
        index = _updated_index(
            join(self._parent, bundles.RELATION_INDEX), scratch, gone_keys, added
        )
        yield save_index(index, join(self._staging, bundles.RELATION_INDEX))

    def _parent_communities(self) -> Iterator[Any]:
        """Communities the update left as they were: the parent's table (whole, or base
        and delta) and HNSW file, byte for byte."""
        knowledge_layers.link_table(self._parent, self._staging, bundles.COMMUNITIES)
        target = storage.join(self._staging, bundles.COMMUNITY_INDEX)
        storage.reuse_file(storage.join(self._parent, bundles.COMMUNITY_INDEX), target)
        yield target, 0

    def _communities(
        self, kept: pa.Table, reclustered: bool, vector: Any, scratch: str
    ) -> Iterator[Any]:
        """The update's communities: a report the parent embedded keeps its vector."""
        join = storage.join
        parent_communities = read_table(self._parent, bundles.COMMUNITIES)
        ids = kept["community_id"].to_pylist()
        reports = kept["report"].to_pylist()
        by_report = _vector_lookup(parent_communities, "report", set(reports))
        community_vectors = [vector(report, by_report) for report in reports]
        communities = with_vector_columns(kept, ids, community_vectors, self._dimension)
        if reclustered:
            yield from self._write(bundles.COMMUNITIES, communities)
        else:  # cut: the rows the cut changed, over the parent's base
            upserts, removed = knowledge_layers.changed_rows(
                parent_communities.cast(communities.schema), communities, "community_id"
            )
            knowledge_layers.write_change(
                self._staging,
                bundles.COMMUNITIES,
                self._parent,
                upserts=upserts,
                removed=removed,
                whole=lambda: communities,
                write=write_table,
                fold_share=self._fold_share,
            )
        keys, vectors = keys_and_vectors(
            [(i, v) for i, v in zip(ids, community_vectors, strict=True) if v is not None],
            self._dimension,
        )
        if reclustered:
            index = build_index(keys, vectors, config=self._ann)
        else:
            before = parent_communities["ann_key"].to_numpy()
            index = _updated_index(
                join(self._parent, bundles.COMMUNITY_INDEX),
                scratch,
                np.setdiff1d(before, keys),
                (np.zeros(0, dtype=np.uint64), np.zeros((0, self._dimension), np.float32)),
            )
        yield save_index(index, join(self._staging, bundles.COMMUNITY_INDEX))

    def _write(self, filename: str, table: pa.Table) -> Iterator[tuple[str, int]]:
        path = storage.join(self._staging, filename)
        write_table(table, path)
        yield path, table.num_rows


class WriteSurfaces(beam.PTransform):
    """``{update: one KnowledgeUpdate, vectors: (text_key, vector)}`` -> the relations and
    communities tables and HNSW files of the new generation, the parent's updated in place.

    Memory bound: the parent's relation and community tables and HNSW files on one worker.
    """

    def __init__(
        self,
        *,
        parent: str,
        staging: str,
        dimension: int,
        floor: float,
        ann: AnnConfig,
        fold_share: float = knowledge_layers.FOLD_SHARE,
    ) -> None:
        super().__init__()
        self._fn = _WriteSurfacesFn(
            parent=parent,
            staging=staging,
            dimension=dimension,
            floor=floor,
            ann=ann,
            fold_share=fold_share,
        )

    def expand(self, inputs: Any) -> beam.PCollection:
        return dict(inputs) | "GatherSurfaces" >> Gather() | "WriteSurfaces" >> beam.ParDo(self._fn)

    def write(self, updates: list[KnowledgeUpdate], vectors: list[tuple[str, Any]]) -> None:
        """What the transform does, on an update and ``(text_key, vector)`` pairs in
        memory (the stream's committer: ``transforms.knowledge_update.apply_update``)."""
        for _ in self._fn.process({"update": updates, "vectors": vectors}):
            pass
