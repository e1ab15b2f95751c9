"""Opening a generation's knowledge layer (:mod:`query.knowledge_layer`): read in place
from its map files (:mod:`query.mapped_layer`), with a layered generation's change on
top (:mod:`query.knowledge_overlay`); or, without map files, built from every row of its
tables."""

import os
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from query.columns import ArrowSequence
from query.knowledge_layer import (
    SURFACE_COLUMNS,
    KnowledgeLayer,
    Surface,
    adjacency_index,
    alias_index,
    index_file_view,
    stored_alias_index,
)
from query.knowledge_overlay import overlaid
from query.mapped_layer import mapped_layer
from store import storage
from store.bundles import (
    COMMUNITIES,
    COMMUNITY_INDEX,
    ENTITIES,
    RELATION_INDEX,
    RELATIONS,
    numbers,
)
from store.knowledge_layers import has_table, is_layered, read_table, table_schema
from store.knowledge_maps import FUNCTIONAL_CATEGORIES, map_name, rows_file

Reader = Callable[[str, list[str]], pa.Table]
"""Reads columns of one knowledge table (by its file name) of the layer being built."""


def _surface(read: Reader, path: str, table: str, index_file: str) -> Surface:
    id_col, text_col, chunk_col = SURFACE_COLUMNS[table]
    data = read(table, [id_col, text_col, chunk_col, "ann_key"])
    keys = numbers(data.column("ann_key")).tolist()
    return Surface(
        ids=ArrowSequence(data.column(id_col)),
        texts=ArrowSequence(data.column(text_col)),
        chunk_ids=ArrowSequence(data.column(chunk_col)),
        index=index_file_view(path, index_file),
        row_of_key=dict(zip(keys, range(len(keys)), strict=True)),
    )


def _entity_rows(ids: Any, entity_ids: Any) -> np.ndarray:
    """Each of ``ids``' row in ``entity_ids`` (-1: null or not an entity)."""
    found = pc.fill_null(pc.index_in(ids, value_set=entity_ids), -1)
    return numbers(found.cast(pa.int64()))


LAYERS = (ENTITIES, RELATIONS, COMMUNITIES)
"""The tables a reader builds the layer from."""
HELD_BASES = 2
"""Base layers kept to overlay later generations on (a stream's reader needs one: the
base every window since the last fold was written over)."""
_HELD: "OrderedDict[tuple[Any, ...], KnowledgeLayer]" = OrderedDict()
_HELD_LOCK = threading.Lock()


def load_knowledge(path: str) -> KnowledgeLayer | None:
    """The knowledge layer of the bundle at ``path``, or ``None`` if it was built without.

    A generation whose tables have map files (:mod:`store.knowledge_maps`: every bundle
    written since they exist, on a local disk) is read in place from them
    (:mod:`query.mapped_layer`): the open builds nothing over the rows. A layered
    generation is the layer of its base files overlaid with the change since them
    (:mod:`query.knowledge_overlay`): the open reads what changed. A reader that opened
    an earlier generation over the same base files reuses the base's layer (and what it
    converted of it). Without map files (a remote bundle, one written before them), the
    layer is built from every row: columns stay Arrow arrays behind
    :class:`query.columns.ArrowSequence` and the alias and adjacency indexes are numpy
    arrays (:class:`query.columns.Grouped`).

    Raises:
        ValueError: a relation's subject is not one of the entities.
    """
    if not has_table(path, ENTITIES):
        return None
    key = _base_key(path)
    if key is None:
        return whole_layer(path)
    layered = any(is_layered(path, t) for t in LAYERS)
    base = _held(key) if layered else None
    if base is None:
        base = mapped_layer(path, with_indexes=not layered)
        if base is None:
            return whole_layer(path)
        _hold(key, base)
    if not layered:
        return base
    found = overlaid(base, path, lambda: whole_layer(path))
    return found if found is not None else whole_layer(path)


def _base_key(path: str) -> tuple[Any, ...] | None:
    """The identity of the files the layer's base is read from (each table's base when
    it is layered, the table itself when not, and their map files), or ``None`` off a
    local disk."""
    if storage.is_remote(path):
        return None
    key: list[Any] = []
    for table in LAYERS:
        name = rows_file(path, table)
        for file in (name, map_name(name)):
            try:
                st = os.stat(os.path.join(path, file))
            except FileNotFoundError:
                key.append(None)
                continue
            key.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(key)


def _held(key: tuple[Any, ...]) -> KnowledgeLayer | None:
    with _HELD_LOCK:
        layer = _HELD.get(key)
        if layer is not None:
            _HELD.move_to_end(key)
        return layer


def _hold(key: tuple[Any, ...], layer: KnowledgeLayer) -> None:
    """Keep ``layer`` (read from map files) as the base of later generations over the
    same files."""
    with _HELD_LOCK:
        _HELD[key] = layer
        _HELD.move_to_end(key)
        while len(_HELD) > HELD_BASES:
            _HELD.popitem(last=False)


def drop_held() -> None:
    """Forget the layers kept as bases (tests; a process that wants the memory back)."""
    with _HELD_LOCK:
        _HELD.clear()


def whole_layer(path: str) -> KnowledgeLayer:
    """The layer at ``path`` built over every row of its tables (folded when layered)."""
    return _build(path, _whole_tables(path))


def _whole_tables(path: str) -> Reader:
    return lambda name, columns: read_table(path, name, columns)


def _build(path: str, read: Reader) -> KnowledgeLayer:
    """The layer from the tables ``read`` gives, every structure built over every row,
    its surfaces searching the generation's HNSW files."""
    stored = "alias_norms" in table_schema(path, ENTITIES).names
    entities = read(
        ENTITIES, ["entity_id", "name", "chunk_ids", "alias_norms" if stored else "aliases"]
    )
    entity_ids = entities.column("entity_id").combine_chunks()
    relations = _surface(read, path, RELATIONS, RELATION_INDEX)
    columns = ["subject_id", "object_id", "predicate", "object_text", "category", "support"]
    meta = read(RELATIONS, [*columns, "confidence"])
    subjects = _entity_rows(meta.column("subject_id"), entity_ids)
    if len(subjects) and subjects.min() < 0:
        missing = meta.column("subject_id")[int(np.argmin(subjects))].as_py()
        raise ValueError(f"{path}: relation subject {missing!r} is not an entity")
    objects = _entity_rows(meta.column("object_id"), entity_ids)
    categories = meta.column("category")
    functional: dict[str, list[int]] = defaultdict(list)
    named = pc.is_in(categories, value_set=pa.array(sorted(FUNCTIONAL_CATEGORIES)))
    for r in np.flatnonzero(numbers(pc.cast(named, pa.int8()))).tolist():
        for c in relations.chunk_ids[r]:
            functional[c].append(r)
    return KnowledgeLayer(
        entity_ids=ArrowSequence(entity_ids),
        entity_names=ArrowSequence(entities.column("name")),
        entity_chunks=ArrowSequence(entities.column("chunk_ids")),
        aliases=(
            stored_alias_index(entities.column("alias_norms"))
            if stored
            else alias_index(entities.column("aliases"))
        ),
        relations=relations,
        subjects=subjects.tolist(),
        objects=objects.tolist(),
        predicates=ArrowSequence(meta.column("predicate")),
        object_texts=ArrowSequence(meta.column("object_text")),
        categories=ArrowSequence(categories),
        supports=numbers(meta.column("support")).tolist(),
        confidences=numbers(meta.column("confidence")).tolist(),
        communities=_surface(read, path, COMMUNITIES, COMMUNITY_INDEX),
        adjacency=adjacency_index(subjects, objects, len(entity_ids)),
        functional=dict(functional),
    )
