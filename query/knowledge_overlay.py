"""A layered generation's knowledge read as its base's layer and the change since it.

A refresh or stream window writes its knowledge tables as its parent's base and a delta
(:mod:`store.knowledge_layers`). A reader reads the base's layer in place from its map
files (:mod:`query.mapped_layer`; or holds it, from the parent or an earlier window over
the same base), and the new layer is that one with the delta's rows after the base's and
the base rows that the delta rewrote or removed left out ("dead"). The reopen costs what
changed since the base, not the corpus.

Rows of an overlaid layer are numbered base rows first, then delta rows, so they are not
in id order as a whole layer's are; every lookup that gives rows from both parts orders
them by id, so callers see what a whole layer gives them (the graph arm's walk reads its
nodes' edges through them: :mod:`query.local_graph`). Whatever needs every row at once
asks :meth:`query.knowledge_layer.KnowledgeLayer.folded` for the whole layer, built on
that first use.
"""

import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from algorithms.normalize import normalize_surface
from query.columns import (
    ArrowSequence,
    Converted,
    first_items,
    get_many,
    items_at,
    lists_at,
)
from query.knowledge_layer import (
    SURFACE_COLUMNS,
    KnowledgeLayer,
    Surface,
    index_file_view,
    stored_alias_index,
)
from query.mapped_layer import EntityRows
from store.bundles import (
    COMMUNITIES,
    COMMUNITY_INDEX,
    ENTITIES,
    RELATION_INDEX,
    RELATIONS,
    numbers,
)
from store.knowledge_layers import (
    ID_COLUMNS,
    REMOVED_SUFFIX,
    delta_columns,
    is_layered,
    layer_files,
    read_file,
    table_schema,
)
from store.knowledge_maps import DESCRIPTION, FUNCTIONAL_CATEGORIES, description_rows
from store.sorted_columns import finder


class Joined(Converted):
    """The base's rows, then the delta's, as one read-only sequence."""

    def __init__(self, base: Sequence[Any], delta: Sequence[Any]) -> None:
        self._base, self._delta, self._split = base, delta, len(base)

    def __len__(self) -> int:
        return self._split + len(self._delta)

    def item(self, index: int) -> Any:
        if index < self._split:
            return self._base[index]
        return self._delta[index - self._split]

    def tolist(self) -> list[Any]:
        """Every item as a Python object."""
        return [*_items(self._base), *_items(self._delta)]

    def firsts(self, rows: Sequence[int]) -> list[Any]:
        """The first item of each of the lists ``rows`` (see :func:`first_items`)."""
        split = self._split
        found = iter(first_items(self._base, [r for r in rows if r < split]))
        fresh = iter(first_items(self._delta, [r - split for r in rows if r >= split]))
        return [next(found) if r < split else next(fresh) for r in rows]

    def lists_at(self, rows: Sequence[int]) -> pa.Array:
        """The lists of ``rows`` as one Arrow array (see :func:`query.columns.lists_at`)."""
        split = self._split
        base = [r for r in rows if r < split]
        delta = [r - split for r in rows if r >= split]
        parts = [lists_at(self._base, base), lists_at(self._delta, delta)]
        joined = pa.concat_arrays([part.cast(pa.list_(pa.string())) for part in parts])
        order = np.argsort(np.asarray([r >= split for r in rows], dtype=np.int8), kind="stable")
        place = np.empty(len(rows), dtype=np.int64)
        place[order] = np.arange(len(rows))
        return joined.take(pa.array(place, pa.int64()))

    def items_at(self, rows: Sequence[int]) -> list[Any]:
        """The items of ``rows``: the base's read in one pass where it can be."""
        split = self._split
        base = [r for r in rows if r < split]
        delta = [r - split for r in rows if r >= split]
        found = iter(items_at(self._base, base))
        fresh = iter(items_at(self._delta, delta))
        return [next(found) if r < split else next(fresh) for r in rows]

    @property
    def arrow(self) -> Any:
        """The items as one Arrow array (both parts must be Arrow-backed)."""
        return pa.concat_arrays([_arrow(self._base), _arrow(self._delta)])


def _items(values: Sequence[Any]) -> list[Any]:
    tolist = getattr(values, "tolist", None)
    return list(tolist()) if tolist is not None else list(values)


def _arrow(values: Sequence[Any]) -> Any:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, (ArrowSequence, Joined)):
        return values.arrow
    return pa.array(list(values))


class Overlaid(Mapping[Any, list[int]]):
    """key -> rows over a base index and a delta index (rows of the delta's own
    numbering, placed after ``offset``), less the base's dead rows; rows from both parts
    come in the order of ``order`` (their id), as a whole layer's ascending rows do.

    ``base_key`` maps a key to the base's key for it (``None``: the base has nothing
    under it), and ``keys`` gives every key then (when the base's keys are not the
    layer's: an entity row's relations are found in the base by the entity's id).
    """

    def __init__(
        self,
        base: Mapping[Any, list[int]],
        delta: Mapping[Any, list[int]],
        offset: int,
        dead: set[int],
        order: Callable[[int], Any],
        base_key: Callable[[Any], Any] | None = None,
        keys: Callable[[], Iterable[Any]] | None = None,
    ) -> None:
        self._base, self._delta, self._offset = base, delta, offset
        self._dead, self._order, self._base_key, self._keys = dead, order, base_key, keys

    def __getitem__(self, key: Any) -> list[int]:
        found = self._base_key(key) if self._base_key is not None else key
        old = [] if found is None else self._base.get(found, [])
        rows = [r for r in old if r not in self._dead]
        new = [self._offset + r for r in self._delta.get(key, [])]
        rows = sorted([*rows, *new], key=self._order) if rows and new else rows or new
        if not rows:
            raise KeyError(key)
        return rows

    def get_many(self, keys: Sequence[Any]) -> list[list[int]]:
        """Each key's rows (``[]``: not a key), the base's looked up in one pass."""
        found = [self._base_key(k) for k in keys] if self._base_key is not None else list(keys)
        asked = [i for i, k in enumerate(found) if k is not None]
        old: list[list[int]] = [[] for _ in keys]
        for i, rows in zip(asked, get_many(self._base, [found[i] for i in asked]), strict=True):
            old[i] = [r for r in rows if r not in self._dead]
        result = []
        for key, rows in zip(keys, old, strict=True):
            new = [self._offset + r for r in self._delta.get(key, [])]
            result.append(sorted([*rows, *new], key=self._order) if rows and new else rows or new)
        return result

    def __iter__(self) -> Iterator[Any]:
        if self._keys is not None:
            return iter(k for k in self._keys() if k in self)
        keys = dict.fromkeys(self._delta)
        keys.update(dict.fromkeys(k for k in self._base if k not in keys and k in self))
        return iter(keys)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class KeyRows(Mapping[int, int]):
    """An ANN key's row: the delta's (after ``offset``) first, then a live base row."""

    def __init__(
        self, base: Mapping[int, int], delta: Mapping[int, int], offset: int, dead: set[int]
    ) -> None:
        self._base, self._delta, self._offset, self._dead = base, delta, offset, dead

    def __getitem__(self, key: int) -> int:
        if key in self._delta:
            return self._offset + self._delta[key]
        row = self._base[key]
        if row in self._dead:
            raise KeyError(key)
        return row

    def __iter__(self) -> Iterator[int]:
        yield from self._delta
        yield from (k for k, r in self._base.items() if r not in self._dead)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Patched(Converted):
    """The delta's lists, each made whole when asked for: a list held as a change
    against its base row (``removed`` not null: the items added since the base, the
    removed ones in ``removed``) is that row's list less the removed, plus the added,
    sorted; any other is whole as it is."""

    def __init__(
        self,
        lists: Sequence[list[str]],
        removed: Sequence[list[str] | None],
        base_rows: Sequence[int | None],
        base: Sequence[list[str]],
    ) -> None:
        self._lists, self._removed, self._base_rows, self._base = lists, removed, base_rows, base

    def __len__(self) -> int:
        return len(self._lists)

    def item(self, index: int) -> list[str]:
        gone, row = self._removed[index], self._base_rows[index]
        if gone is None:
            return list(self._lists[index])
        if row is None:
            raise ValueError(f"delta row {index} holds a change, but its base has no row")
        dropped = set(gone)
        kept = [item for item in self._base[row] if item not in dropped]
        return sorted([*kept, *self._lists[index]])

    def tolist(self) -> list[list[str]]:
        return [self.item(i) for i in range(len(self))]


class Change:
    """One table's change since its base: the delta's rows and the base rows it kills."""

    def __init__(self, base_ids: Any, delta: pa.Table | None, removed: list[str], key: str):
        """``base_ids``: the base's sorted ids (an Arrow array, or a column with a
        ``find``: :func:`store.sorted_columns.finder`)."""
        self.rows = delta
        self.ids: list[str] = [] if delta is None else delta.column(key).to_pylist()
        self.offset = len(base_ids)
        find = finder(base_ids)
        self.base_row: dict[str, int] = {}  # the base row of each id the change kills
        for value in sorted({*removed, *self.ids}):
            at = find(value)
            if at >= 0:
                self.base_row[value] = at
        self.dead = set(self.base_row.values())
        self.row_of = {value: self.offset + i for i, value in enumerate(self.ids)}

    def column(self, name: str) -> ArrowSequence:
        """The delta's column ``name`` (empty without a delta)."""
        if self.rows is None:
            return ArrowSequence(pa.array([], type=pa.null()))
        return ArrowSequence(self.rows.column(name))

    def values(self, name: str) -> list[Any]:
        return [] if self.rows is None else self.rows.column(name).to_pylist()

    def rewritten(self) -> dict[int, int]:
        """Each rewritten row's delta row -> its dead base row."""
        return {self.row_of[v]: row for v, row in self.base_row.items() if v in self.row_of}


def entity_rows(change: Change, base_ids: Any, ids: Sequence[str | None]) -> list[int]:
    """Each id's row in the overlaid entities (-1: null, or no live entity has it)."""
    find, _, _ = _live_entity_rows(change, base_ids)
    return [-1 if value is None else find(value) for value in ids]


def _live_entity_rows(
    change: Change, base_ids: Any
) -> tuple[Callable[[str], int], Callable[[Any], np.ndarray], Callable[[list[str]], np.ndarray]]:
    """Finders of entity ids among the live entities (the delta's rows first, then the
    base's live rows; -1: none): one id, an Arrow column of them at once, or a few
    (the base searched in one pass where its ids can be)."""
    find_base = finder(base_ids)
    delta_ids = pa.array(change.ids, pa.string())
    dead = np.fromiter(change.dead, dtype=np.int64, count=len(change.dead))

    def find(value: str) -> int:
        row = change.row_of.get(value, -1)
        if row < 0:
            at = find_base(value)
            row = at if at >= 0 and at not in change.dead else -1
        return row

    def find_all(values: Any) -> np.ndarray:
        found = pc.fill_null(pc.index_in(values, value_set=_arrow(base_ids)), -1)
        rows = numbers(found.cast(pa.int64())).copy()
        rows[np.isin(rows, dead)] = -1
        fresh = pc.fill_null(pc.index_in(values, value_set=delta_ids), -1)
        fresh_rows = numbers(fresh.cast(pa.int64()))
        rows[fresh_rows >= 0] = change.offset + fresh_rows[fresh_rows >= 0]
        return rows

    base_many = getattr(base_ids, "find_many", None)

    def find_many(values: Sequence[str] | pa.Array) -> np.ndarray:
        strings = values.to_pylist() if isinstance(values, pa.Array) else values
        if base_many is None:
            return np.asarray([find(v) for v in strings], dtype=np.int64)
        rows = base_many(values).copy()
        rows[np.isin(rows, dead)] = -1
        for i, value in enumerate(strings):
            fresh = change.row_of.get(value)
            if fresh is not None:
                rows[i] = fresh
        return rows  # type: ignore[no-any-return]

    return find, find_all, find_many


def delta_adjacency(subjects: Sequence[int], objects: Sequence[int]) -> dict[int, list[int]]:
    """entity row -> the delta's relation rows (its own numbering) it is an end of."""
    found: dict[int, list[int]] = defaultdict(list)
    for r, (s, o) in enumerate(zip(subjects, objects, strict=True)):
        found[s].append(r)
        if o >= 0:
            found[o].append(r)
    return dict(found)


def grouped_lists(owners: Sequence[int], lists: Sequence[Sequence[str]]) -> dict[str, list[int]]:
    """item -> the owners whose list holds it (each once, in owner order)."""
    found: dict[str, list[int]] = defaultdict(list)
    for owner, items in zip(owners, lists, strict=True):
        for item in dict.fromkeys(items):
            found[item].append(owner)
    return dict(found)


def key_rows(keys: Sequence[int]) -> dict[int, int]:
    """ANN key -> the delta's row (its own numbering)."""
    return {int(k): i for i, k in enumerate(keys)}


def _change(path: str, table: str, columns: list[str], base_ids: Any) -> Change:
    """What the generation at ``path`` changed of ``table`` since its base."""
    key = ID_COLUMNS[table]
    if not is_layered(path, table):
        return Change(base_ids, None, [], key)
    _, delta_file, removed_file = (os.path.join(path, f) for f in layer_files(table))
    delta = read_file(delta_file, list(dict.fromkeys([key, *columns])))
    removed = read_file(removed_file)["id"].to_pylist()
    return Change(base_ids, delta, removed, key)


def _whole_lists(change: Change, column: str, base: Sequence[list[str]]) -> Sequence[Any]:
    """The change's list ``column``, its rows held as a change against their base rows
    made whole (:class:`Patched`) where the delta holds such rows."""
    lists = change.column(column)
    removed = column + REMOVED_SUFFIX
    if change.rows is None or removed not in change.rows.column_names:
        return lists
    base_rows = [change.base_row.get(value) for value in change.ids]
    return Patched(lists, change.column(removed), base_rows, base)


def _overlaid_surface(
    base: Surface, change: Change, path: str, table: str, index_file: str
) -> Surface:
    id_col, text_col, chunk_col = SURFACE_COLUMNS[table]
    return Surface(
        ids=Joined(base.ids, change.column(id_col)),
        texts=Joined(base.texts, change.column(text_col)),
        chunk_ids=Joined(base.chunk_ids, change.column(chunk_col)),
        index=index_file_view(path, index_file),
        row_of_key=KeyRows(
            base.row_of_key, key_rows(change.values("ann_key")), change.offset, change.dead
        ),
    )


def overlaid(
    base: KnowledgeLayer, path: str, fold: Callable[[], KnowledgeLayer]
) -> KnowledgeLayer | None:
    """The layer at ``path`` as ``base`` (the layer of its base files, read from their
    map files: :func:`query.mapped_layer.mapped_layer`) and its change; ``None`` when
    its tables cannot be read that way (aliases not normalized at build, a base without
    its relations' ends by entity id).

    The base's relations find their entities by id among the entities live now (the
    relations' base may be newer than the entities': each table folds on its own).

    Raises:
        ValueError: a changed relation's subject is not one of the entities.
    """
    if "alias_norms" not in table_schema(path, ENTITIES).names:
        return None
    if base.relations_of is None or base.subject_ids is None or base.object_ids is None:
        return None
    base_entities = base.entity_ids
    columns = delta_columns(path, ENTITIES, ["name", "chunk_ids", "alias_norms"])
    ent = _change(path, ENTITIES, columns, base_entities)
    rel_columns = [*SURFACE_COLUMNS[RELATIONS], "ann_key", "subject_id", "object_id"]
    rel_columns += ["predicate", "object_text", "category", "support", "confidence"]
    rel = _change(path, RELATIONS, rel_columns, base.relations.ids)
    com_columns = [*SURFACE_COLUMNS[COMMUNITIES], "ann_key"]
    com = _change(path, COMMUNITIES, com_columns, base.communities.ids)

    entity_ids = Joined(base.entity_ids, ent.column("entity_id"))
    delta_chunks = _whole_lists(ent, "chunk_ids", base.entity_chunks)
    new_aliases: Mapping[str, list[int]] = {}
    if ent.rows is not None and ent.rows.num_rows:
        new_aliases = stored_alias_index(ent.rows.column("alias_norms"))
    find, find_all, find_many = _live_entity_rows(ent, base_entities)
    subjects = [-1 if v is None else find(v) for v in rel.values("subject_id")]
    if -1 in subjects:
        missing = rel.values("subject_id")[subjects.index(-1)]
        raise ValueError(f"{path}: relation subject {missing!r} is not an entity")
    objects = [-1 if v is None else find(v) for v in rel.values("object_id")]
    relations = _overlaid_surface(base.relations, rel, path, RELATIONS, RELATION_INDEX)
    relation_ids = relations.ids
    categories = rel.values("category")
    named = [r for r, c in enumerate(categories) if c in FUNCTIONAL_CATEGORIES]
    chunk_lists = rel.values("chunk_ids")

    def base_key(node: int) -> str | None:
        """An entity row's id, under which the base holds its relations."""
        return None if node in ent.dead else entity_ids[node]

    def live_entities() -> Iterator[int]:
        return (r for r in range(len(entity_ids)) if r not in ent.dead)

    return KnowledgeLayer(
        entity_ids=entity_ids,
        entity_names=Joined(base.entity_names, ent.column("name")),
        entity_chunks=Joined(base.entity_chunks, delta_chunks),
        aliases=Overlaid(base.aliases, new_aliases, ent.offset, ent.dead, entity_ids.__getitem__),
        relations=relations,
        subjects=Joined(EntityRows(_arrow(base.subject_ids), find, find_all, find_many), subjects),
        objects=Joined(EntityRows(_arrow(base.object_ids), find, find_all, find_many), objects),
        predicates=Joined(base.predicates, rel.column("predicate")),
        object_texts=Joined(base.object_texts, rel.column("object_text")),
        categories=Joined(base.categories, rel.column("category")),
        supports=Joined(base.supports, rel.values("support")),
        confidences=Joined(base.confidences, rel.values("confidence")),
        communities=_overlaid_surface(base.communities, com, path, COMMUNITIES, COMMUNITY_INDEX),
        adjacency=Overlaid(
            base.relations_of,
            delta_adjacency(subjects, objects),
            rel.offset,
            rel.dead,
            relation_ids.__getitem__,
            base_key=base_key,
            keys=live_entities,
        ),
        functional=Overlaid(
            base.functional,
            grouped_lists(named, [chunk_lists[r] for r in named]),
            rel.offset,
            rel.dead,
            relation_ids.__getitem__,
        ),
        chunk_entities=_overlaid_lookup(
            base.chunk_entities,
            lambda: grouped_lists(range(len(delta_chunks)), list(delta_chunks)),
            ent,
            entity_ids.__getitem__,
        ),
        descriptions=_overlaid_lookup(
            base.descriptions,
            lambda: _descriptions(categories, rel.values("object_text")),
            rel,
            relation_ids.__getitem__,
        ),
        walk_edges=None
        if base.walk_edges is None
        else base.walk_edges.overlaid(
            lambda: _touched(base, ent, rel, subjects + objects, delta_chunks)
        ),
        dead_entities=frozenset(ent.dead),
        fold=fold,
    )


def _touched(
    base: KnowledgeLayer,
    ent: Change,
    rel: Change,
    ends: Sequence[int],
    delta_chunks: Sequence[Any],
) -> tuple[set[int], dict[int, int]]:
    """The base's entity rows whose edges in the walk graph the change may have changed
    (their counts no longer hold): the rows it rewrote or removed, the ends of every
    relation it added, rewrote or removed (``ends``: those of the delta's relations), the
    partners over the base's relations of an entity it removed or left in no chunk (a
    relation needs both ends in a chunk), and those of an entity it added (the
    relations' base may be newer than the entities' and name it already); and each
    base row it rewrote -> the row it is now (a partner the counts name by its base row)."""
    touched = set(ent.dead)
    dead = sorted(rel.dead)
    ends = [*ends, *items_at(base.subjects, dead), *items_at(base.objects, dead)]
    new_row = {old: new for new, old in ent.rewritten().items()}
    gone = [
        row
        for row in sorted(ent.dead)
        if row not in new_row or not len(delta_chunks[new_row[row] - ent.offset])
    ]
    relations = [r for rows in get_many(base.adjacency, gone) for r in rows]
    assert base.relations_of is not None  # an overlaid layer's base has it
    added = [v for v in ent.ids if v not in ent.base_row]
    relations += [r for rows in get_many(base.relations_of, added) for r in rows]
    ends += items_at(base.subjects, relations) + items_at(base.objects, relations)
    touched.update(e for e in ends if e >= 0)
    return touched, new_row


def _overlaid_lookup(
    base: Mapping[Any, list[int]] | None,
    delta: Callable[[], Mapping[Any, list[int]]],
    change: Change,
    order: Callable[[int], Any],
) -> Mapping[Any, list[int]] | None:
    """A base's lookup with the change's on top, or ``None`` when the base has none; the
    change's own (``delta``) is made on the first lookup, not by the reopen (the graph
    arm's walk is what reads these)."""
    if base is None:
        return None
    return Deferred(lambda: Overlaid(base, delta(), change.offset, change.dead, order))


class Deferred(Mapping[Any, list[int]]):
    """A lookup made on its first use."""

    def __init__(self, make: Callable[[], Mapping[Any, list[int]]]) -> None:
        self._make: Callable[[], Mapping[Any, list[int]]] | None = make
        self._made: Mapping[Any, list[int]] | None = None
        self._lock = threading.Lock()

    def _lookup(self) -> Mapping[Any, list[int]]:
        if self._made is None:
            with self._lock:
                if self._made is None and self._make is not None:
                    self._made, self._make = self._make(), None
        assert self._made is not None
        return self._made

    def __getitem__(self, key: Any) -> list[int]:
        return self._lookup()[key]

    def get_many(self, keys: Sequence[Any]) -> list[list[int]]:
        """Each key's rows (``[]``: not a key), in one pass where the lookup offers one."""
        return get_many(self._lookup(), keys)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._lookup())

    def __len__(self) -> int:
        return len(self._lookup())


def _descriptions(categories: Sequence[str], texts: Sequence[str | None]) -> dict[str, list[int]]:
    """normalized description -> the delta's relation rows (its own numbering) that state
    it, as :func:`store.knowledge_maps.write_maps` indexes the base's."""
    named = [r for r, category in enumerate(categories) if category == DESCRIPTION]
    return description_rows(named, [texts[r] for r in named], normalize_surface)
