"""Opening a generation's knowledge layer (:mod:`query.knowledge_layer`): whole, from
every row of its tables, or, for a generation written as a base and a delta whose base a
process already holds, as that base's layer overlaid with the delta
(:mod:`query.knowledge_overlay`)."""

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
    FUNCTIONAL_CATEGORIES,
    SURFACE_COLUMNS,
    KnowledgeLayer,
    Surface,
    adjacency_index,
    alias_index,
    index_file_view,
    stored_alias_index,
)
from query.knowledge_overlay import overlaid
from store import storage
from store.bundles import (
    COMMUNITIES,
    COMMUNITY_INDEX,
    ENTITIES,
    RELATION_INDEX,
    RELATIONS,
    numbers,
)
from store.knowledge_layers import (
    has_table,
    is_layered,
    layer_files,
    read_file,
    read_table,
    table_schema,
)
from store.sorted_columns import increasing

Reader = Callable[[str, list[str]], pa.Table]
"""Reads columns of one knowledge table (by its file name) of the layer being built."""


def _surface(read: Reader, path: str, table: str, index_file: str | None) -> Surface:
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
"""Layers kept to overlay later generations on (a stream's reader needs one: the base
every window since the last fold was written over)."""
_HELD: "OrderedDict[tuple[Any, ...], KnowledgeLayer]" = OrderedDict()
_HELD_LOCK = threading.Lock()


def load_knowledge(path: str) -> KnowledgeLayer | None:
    """The knowledge layer of the bundle at ``path``, or ``None`` if it was built without.

    Columns stay Arrow arrays behind :class:`query.columns.ArrowSequence` and the alias
    and adjacency indexes are numpy arrays (:class:`query.columns.Grouped`), so opening
    costs a few vectorized passes, not a Python object per row. A generation written as
    its parent's base and a delta, opened by a process that built the layer of that base
    (it opened the parent), is that layer overlaid with the delta
    (:mod:`query.knowledge_overlay`): the open reads and builds only what changed.

    Raises:
        ValueError: a relation's subject is not one of the entities.
    """
    if not has_table(path, ENTITIES):
        return None
    key = _base_key(path)
    if key is None:
        return whole_layer(path)
    if any(is_layered(path, t) for t in LAYERS):
        base = _held(key)
        if base is None:
            base = _hold(key, _build(path, _base_tables(path), with_indexes=False))
        found = overlaid(base, path, lambda: whole_layer(path))
        if found is not None:
            return found
        return whole_layer(path)
    return _hold(key, whole_layer(path))


def _base_key(path: str) -> tuple[Any, ...] | None:
    """The identity of the files the layer's base is read from (each table's base when
    it is layered, the table itself when not), or ``None`` off a local disk."""
    if storage.is_remote(path):
        return None
    key: list[Any] = []
    for table in LAYERS:
        name = layer_files(table)[0] if is_layered(path, table) else table
        try:
            st = os.stat(os.path.join(path, name))
        except FileNotFoundError:
            return None
        key.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(key)


def _held(key: tuple[Any, ...]) -> KnowledgeLayer | None:
    with _HELD_LOCK:
        layer = _HELD.get(key)
        if layer is not None:
            _HELD.move_to_end(key)
        return layer


def _hold(key: tuple[Any, ...], layer: KnowledgeLayer) -> KnowledgeLayer:
    """Keep ``layer`` as the base of later generations over the same files (when its ids
    are in order, as every written table's are)."""
    if all(
        increasing(ids)
        for ids in (
            layer.entity_ids.arrow,  # type: ignore[attr-defined]
            layer.relations.ids.arrow,  # type: ignore[attr-defined]
            layer.communities.ids.arrow,  # type: ignore[attr-defined]
        )
    ):
        with _HELD_LOCK:
            _HELD[key] = layer
            _HELD.move_to_end(key)
            while len(_HELD) > HELD_BASES:
                _HELD.popitem(last=False)
    return layer


def drop_held() -> None:
    """Forget the layers kept as bases: the next open of a layered generation builds its
    base's layer again (tests; a process that wants the memory back)."""
    with _HELD_LOCK:
        _HELD.clear()


def whole_layer(path: str) -> KnowledgeLayer:
    """The layer at ``path`` built over every row of its tables (folded when layered)."""
    return _build(path, _whole_tables(path), with_indexes=True)


def _whole_tables(path: str) -> Reader:
    return lambda name, columns: read_table(path, name, columns)


def _base_tables(path: str) -> Reader:
    def read(name: str, columns: list[str]) -> pa.Table:
        layered = is_layered(path, name)
        return read_file(os.path.join(path, layer_files(name)[0] if layered else name), columns)

    return read


def _build(path: str, read: Reader, *, with_indexes: bool) -> KnowledgeLayer:
    """The layer from the tables ``read`` gives, every structure built over every row;
    with ``with_indexes``, the generation's HNSW files for its surfaces."""
    stored = "alias_norms" in table_schema(path, ENTITIES).names
    entities = read(
        ENTITIES, ["entity_id", "name", "chunk_ids", "alias_norms" if stored else "aliases"]
    )
    entity_ids = entities.column("entity_id").combine_chunks()
    relations = _surface(read, path, RELATIONS, RELATION_INDEX if with_indexes else None)
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
        communities=_surface(read, path, COMMUNITIES, COMMUNITY_INDEX if with_indexes else None),
        adjacency=adjacency_index(subjects, objects, len(entity_ids)),
        functional=dict(functional),
    )
