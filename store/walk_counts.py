"""Each entity's edges in the graph arm's walk graph, counted when the generation's map
files are written, so that a walk need not read a node's whole edge list to learn them.

A walk's node sends its mass in shares of its degree: its edges (the distinct chunks it
occurs in, and the distinct entities it shares a relation with whose evidence is all
visible, both ends occurring in a chunk: :mod:`query.whole_graph`). Counting them at read
time means reading the node's whole chunk list and relations, and an entity in a hundred
thousand chunks is in the neighbourhood of most walks on a large corpus. This file holds
them for the caller who sees every chunk, one row per entity row of the entities' map
file (``walk.map.arrow``: ``edges``, the count; ``partners``, the entity rows it shares
a usable relation with; ``via``, the relation naming each pair), counted over the rows the
generation holds whole (each table, or its base when it is layered: the layer its
readers map, :mod:`query.mapped_layer`). A generation passes validation only when every chunk its
knowledge tables name is one of its chunks (``validation.knowledge``: ``chunks_found``),
so every named chunk is visible to that caller.

The file names the sizes of the two table files it was counted from; a reader uses it
only while they are the generation's rows files (a window that keeps both bases links
its parent's file, and the change on top is the reader's to account for:
:mod:`query.knowledge_overlay`).
"""

import os
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import storage
from store.bundles import ENTITIES, RELATIONS, numbers
from store.knowledge_layers import has_table, read_file, rows_file

WALK_MAP = "walk.map.arrow"
COLUMNS = ("edges", "partners", "via")
SIZE_KEYS = {ENTITIES: b"evidex.entities_size", RELATIONS: b"evidex.relations_size"}


class WalkEdges(NamedTuple):
    """Each entity row's edges in the walk graph of every chunk."""

    counts: np.ndarray  # its edges: distinct chunks and distinct partners
    partners: pa.ListArray  # the entity rows it shares a usable relation with, ascending
    via: pa.ListArray  # for each partner, the first usable relation between them (its row)


def walk_edges(entities: pa.Table, relations: pa.Table) -> WalkEdges:
    """Each entity row's edges in the walk graph of every chunk (``entities``:
    ``entity_id``, ``chunk_ids``, rows in id order; ``relations``: ``subject_id``,
    ``object_id``, ``chunk_ids``, rows in id order): its distinct chunks, and its
    partners over relations with an entity object other than the subject, some evidence,
    and both ends in a chunk (the first such relation of a pair, by row, names it)."""
    entities, relations = entities.combine_chunks(), relations.combine_chunks()
    n = entities.num_rows
    lists = entities.column("chunk_ids").combine_chunks()
    owners = numbers(pc.list_parent_indices(lists)).astype(np.int64)
    items = pc.list_flatten(lists)
    codes = numbers(pc.dictionary_encode(items).indices).astype(np.int64)
    width = max(int(codes.max(initial=0)) + 1, 1)
    chunks = np.bincount(np.unique(owners * width + codes) // width, minlength=n)
    ids = entities.column("entity_id").combine_chunks()
    subject = _rows(relations.column("subject_id"), ids)
    target = _rows(relations.column("object_id"), ids)
    evidence = numbers(pc.fill_null(pc.list_value_length(relations.column("chunk_ids")), 0))
    occurs = np.append(chunks > 0, False)  # row -1: no entity
    usable = (target >= 0) & (subject >= 0) & (target != subject) & (evidence > 0)
    usable &= occurs[subject] & occurs[target]
    named = first_of_pairs(np.flatnonzero(usable), subject, target, n)
    low = np.minimum(subject[named], target[named])
    high = np.maximum(subject[named], target[named])
    owner = np.concatenate([low, high])
    partner = np.concatenate([high, low])
    via = np.concatenate([named, named])
    order = np.lexsort((partner, owner))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
    return WalkEdges(
        counts=(chunks + offsets[1:] - offsets[:-1]).astype(np.int64),
        partners=pa.ListArray.from_arrays(pa.array(offsets), pa.array(partner[order])),
        via=pa.ListArray.from_arrays(pa.array(offsets), pa.array(via[order])),
    )


def first_of_pairs(
    rows: np.ndarray, subject: np.ndarray, target: np.ndarray, n_entities: int
) -> np.ndarray:
    """Of the relation ``rows`` (ascending; entity ends ``subject`` and ``target``), the
    first of each unordered pair of entities, ascending: the relation that names the
    pair's edge in the walk graph (:mod:`query.whole_graph` builds it by the same rule)."""
    low = np.minimum(subject[rows], target[rows])
    high = np.maximum(subject[rows], target[rows])
    _, first = np.unique(low * max(n_entities, 1) + high, return_index=True)
    return rows[np.sort(first)]  # type: ignore[no-any-return]


def _rows(ids: pa.ChunkedArray, entity_ids: pa.Array) -> np.ndarray:
    """The entity row of each id (-1: null, or no entity)."""
    at = pc.index_in(ids.combine_chunks().cast(pa.string()), value_set=entity_ids)
    return numbers(pc.fill_null(at, -1)).astype(np.int64)  # type: ignore[no-any-return]


def _sizes(path: str) -> dict[bytes, bytes]:
    """The sizes of the generation's two rows files, as the file's metadata names them."""
    return {
        key: str(os.path.getsize(os.path.join(path, rows_file(path, table)))).encode()
        for table, key in SIZE_KEYS.items()
    }


def write_walk_map(
    staging: str, parent: str | None = None, read: Mapping[str, pa.Table] | None = None
) -> bool:
    """Give the generation at ``staging`` its walk counts: a hard link of the
    ``parent``'s file when that was counted from the same two rows files, else counted
    here over its rows files (a table's base when it is layered: the reader's overlay
    of the change knows which counts it touched). A window that keeps both bases writes
    nothing; one that folds a table has just written it whole. ``read``: rows files the
    map writer has read already, by table. Returns whether it counted."""
    if storage.is_remote(staging) or not all(has_table(staging, t) for t in SIZE_KEYS):
        return False
    target = os.path.join(staging, WALK_MAP)
    if os.path.exists(target):
        return False
    sizes = _sizes(staging)
    if parent is not None and not storage.is_remote(parent):
        theirs = os.path.join(parent, WALK_MAP)
        if _same_rows(parent, staging) and _metadata(theirs) == sizes:
            storage.reuse_file(theirs, target)
            return False
    held = read or {}

    def rows(table: str, columns: list[str]) -> pa.Table:
        if table in held:
            return held[table].select(columns)
        return read_file(os.path.join(staging, rows_file(staging, table)), columns)

    entities = rows(ENTITIES, ["entity_id", "chunk_ids"])
    relations = rows(RELATIONS, ["subject_id", "object_id", "chunk_ids"])
    edges = walk_edges(entities, relations)
    batch = pa.record_batch(
        [pa.array(edges.counts, pa.int64()), edges.partners, edges.via],
        names=list(COLUMNS),
    )
    batch = batch.replace_schema_metadata(sizes)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    storage.write_bytes(target, sink.getvalue().to_pybytes())
    return True


def _same_rows(parent: str, staging: str) -> bool:
    """Whether both of ``staging``'s rows files are hard links of ``parent``'s."""
    for table in SIZE_KEYS:
        if not has_table(parent, table):
            return False
        theirs = os.path.join(parent, rows_file(parent, table))
        mine = os.path.join(staging, rows_file(staging, table))
        if not (os.path.exists(theirs) and os.path.samefile(theirs, mine)):
            return False
    return True


def _metadata(path: str) -> dict[bytes, bytes] | None:
    try:
        schema = pa.ipc.open_file(pa.memory_map(path, "r")).schema
    except FileNotFoundError:
        return None
    meta = schema.metadata or {}
    return {key: meta.get(key, b"") for key in SIZE_KEYS.values()}


def open_walk_edges(path: str) -> WalkEdges | None:
    """The walk edges of the generation at ``path``, memory-mapped, or ``None``: no
    file, a remote bundle, or a file counted from other rows files."""
    if storage.is_remote(path):
        return None
    target = os.path.join(path, WALK_MAP)
    if _metadata(target) != _sizes(path):
        return None
    batch = pa.ipc.open_file(pa.memory_map(target, "r")).get_batch(0)
    if batch.schema.names != list(COLUMNS):
        return None
    counts = batch.column("edges").to_numpy(zero_copy_only=True)
    return WalkEdges(counts, batch.column("partners"), batch.column("via"))
