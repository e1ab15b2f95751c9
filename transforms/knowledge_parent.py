"""The parent generation as a refresh or stream window's knowledge update reads it: the
documents the change drops, the rows it touches, and the whole tables only where a
table is written whole, cut or clustered again (:mod:`store.knowledge_rows` looks rows up
without passing over the table)."""

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Set
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from algorithms.canonicalize import KnownUnit, MentionRef, type_class, updated_counts
from algorithms.normalize import squashed
from schemas import ENTITY_SCHEMA, Entity
from store import knowledge_layers, table_cache
from store.bundles import ENTITIES
from store.knowledge_rows import KnowledgeRows
from store.row_index import RowIndex, squashed_column
from store.sorted_columns import Scalars
from transforms.gather import batched_rows
from transforms.write import records_table

__all__ = [
    "LiveIds",
    "Names",
    "changed_entities",
    "dropped_documents",
    "known_units",
    "replaced",
    "unchanged_documents",
    "without",
]


def dropped_documents(gathered: Mapping[str, list[Any]], rows: list[KnowledgeRows]) -> list[str]:
    """The parent's documents that the change rewrites or deletes, sorted: as given
    (``dropped``: a stream's committer knows them), or every document the parent's
    ``rows`` name (a ``doc_id`` or ``sentence_doc_ids`` column) that is not
    ``unchanged`` (a refresh, which passes the documents it keeps)."""
    if "dropped" in gathered:
        return sorted(set(batched_rows(gathered["dropped"])))
    unchanged = set(batched_rows(gathered["unchanged"]))
    named: set[str] = set()
    for table in rows:
        column = "doc_id" if "doc_id" in table.columns else "sentence_doc_ids"
        named |= table.values(column)
    return sorted(named - unchanged)


def unchanged_documents(gathered: Mapping[str, list[Any]]) -> pa.Array:
    """The parent's documents that stay live, as one sorted Arrow array (for the work
    that visits every row: cutting communities)."""
    return pa.array(sorted(batched_rows(gathered["unchanged"])), type=pa.string())


def without(table: pa.Table, column: str, values: list[str]) -> pa.Table:
    """``table`` less the rows whose ``column`` holds one of ``values``."""
    if not values or not table.num_rows:
        return table
    gone = pc.is_in(table[column], value_set=pa.array(values, type=pa.string()))
    return table.filter(pc.invert(gone))


def replaced(
    rows: KnowledgeRows,
    ids: Set[str],
    added: pa.Table,
    schema: pa.Schema,
    prepare: Callable[[pa.Table], pa.Table] | None = None,
) -> pa.Table:
    """The whole table ``rows`` stands for, less the rows with ``ids``, plus ``added``
    (ids not left in it), sorted by id: a table the update writes whole."""
    table = rows.folded()
    if prepare is not None:
        table = prepare(table)
    gone = pa.array(sorted(ids), type=pa.string())
    at = knowledge_layers.positions(table[rows.key].combine_chunks(), gone)
    kept = knowledge_layers.without_rows(table, at)
    return knowledge_layers.merged(kept.cast(schema), added, rows.key)


UNIT_SEPARATOR = "\x1f"
"""Between a unit's norm and type class in a unit key."""


def _unit_keys(table: pa.Table) -> pa.ChunkedArray:
    """Each mention row's unit ``(norm, type class)`` as one string (norm, separator,
    class), column-wise: the type class of each distinct label, taken per row."""
    labels = pc.dictionary_encode(table["label"]).combine_chunks()
    classes = pa.array([type_class(x) for x in labels.dictionary.to_pylist()], pa.string())
    return pc.binary_join_element_wise(table["norm"], classes.take(labels.indices), UNIT_SEPARATOR)


def _unit_index(base: pa.Table) -> tuple[RowIndex, dict[str, list[str]]]:
    """The base's mention rows by unit key, and each squashed form's unit keys."""
    index = RowIndex.of(_unit_keys(base))
    by_form: dict[str, list[str]] = defaultdict(list)
    for unit in sorted(index.values()):
        by_form[squashed(unit.split(UNIT_SEPARATOR)[0])].append(unit)
    return index, dict(by_form)


def _units_of(rows: pa.Table) -> dict[tuple[str, str], tuple[str, str, int]]:
    """The units of mention ``rows`` (sorted by id): each one's first row's id and
    entity, and its number of rows."""
    units: dict[tuple[str, str], tuple[str, str, int]] = {}
    for mention_id, norm, label, entity_id in zip(
        rows["mention_id"].to_pylist(),
        rows["norm"].to_pylist(),
        rows["label"].to_pylist(),
        rows["entity_id"].to_pylist(),
        strict=True,
    ):
        unit = (norm, type_class(label))
        first, owner, count = units.get(unit, (mention_id, entity_id, 0))
        units[unit] = (first, owner, count + 1)
    return units


def known_units(
    mentions: KnowledgeRows, forms: Set[str], gone: pa.Table
) -> dict[tuple[str, str], KnownUnit]:
    """The live units of the parent's mentions whose squashed form is one of ``forms``
    (the units that linking a window's new mentions consults), each with the entity of
    its first mention by id and its live mention count; ``gone`` (the mention rows of
    dropped documents) are not live.

    Where the process keeps what it reads (a stream), counted from the base's unit
    index (built once per base file) and the delta, so a unit named a hundred thousand
    times costs what one named once does; otherwise from the rows of those forms."""
    gone_ids = gone["mention_id"].to_pylist()
    if not forms:
        return {}
    if not table_cache.enabled() or not mentions.sorted:
        rows = without(mentions.where("norm", forms, key=squashed_column), "mention_id", gone_ids)
        return {u: KnownUnit(owner, n) for u, (_, owner, n) in _units_of(rows).items()}
    index, by_form = mentions.derived("mention-units", _unit_index, 100 * mentions.base.num_rows)
    dead = np.union1d(mentions.dead_rows(), mentions.base_positions(gone_ids))
    delta = mentions.delta_where("norm", sorted(forms), squashed_column)
    units = _units_of(without(delta, "mention_id", gone_ids).sort_by("mention_id"))
    for key in {u for form in forms for u in by_form.get(form, ())}:
        rows = index.rows([key])
        live = rows[~np.isin(rows, dead)] if len(dead) else rows
        if not len(live):
            continue
        norm, tclass = key.split(UNIT_SEPARATOR)
        first = mentions.base.slice(int(live[0]), 1).to_pylist()[0]
        first_id, owner, count = units.get((norm, tclass), (first["mention_id"], "", 0))
        if first["mention_id"] <= first_id:
            first_id, owner = first["mention_id"], first["entity_id"]
        units[(norm, tclass)] = (first_id, owner, count + len(live))
    return {u: KnownUnit(owner, n) for u, (_, owner, n) in units.items()}


def _in_sorted(items: pa.Array | None) -> Callable[[str], bool]:
    """Membership in a sorted list of items, by bisection (a base row's chunks)."""
    if items is None or not len(items):
        return lambda item: False
    keys = Scalars(items)
    return lambda item: keys.find(item) >= 0


def changed_entities(
    parent: KnowledgeRows,
    touched: Set[str],
    gained: Mapping[str, list[MentionRef]],
    lost: Mapping[str, list[MentionRef]],
    prepare: Callable[[pa.Table], pa.Table],
) -> pa.Table:
    """The parent's ``touched`` entities after the mentions they ``gained`` and ``lost``
    (those left with a mention), as rows of the entities table's delta: an entity the
    base holds gets its chunks as a change against its base row (chunks added since the
    base, and in ``chunk_ids_removed`` those removed since it), so rewriting an entity
    named in a hundred thousand chunks writes and reads what changed; any other gets its
    whole chunk list (``chunk_ids_removed`` null). ``prepare`` completes parent rows
    written before a column was added."""
    column = knowledge_layers.RELATIVE_LISTS[ENTITIES]
    removed_column = column + knowledge_layers.REMOVED_SUFFIX
    rows = prepare(parent.with_ids(touched))
    changes = (
        rows[removed_column].to_pylist()
        if removed_column in rows.column_names
        else [None] * rows.num_rows
    )
    lists = rows[column]
    plain = rows.drop_columns([c for c in (column, removed_column) if c in rows.column_names])
    updated, removed_lists = [], []
    for at, (row, change) in enumerate(zip(plain.to_pylist(), changes, strict=True)):
        entity_id = row["entity_id"]
        counted = updated_counts(Entity(**row, chunk_ids=[]), gained[entity_id], lost[entity_id])
        if counted is None:
            continue
        plus = {m.chunk_id for m in gained[entity_id]}
        minus = {m.chunk_id for m in lost[entity_id]}
        base_list = parent.base_list(entity_id, column)
        in_base = _in_sorted(base_list)
        if base_list is not None and (change is not None or not parent.in_delta(entity_id)):
            # a change against the base row: added since it (A), removed since it (R)
            added = set(lists[at].values.to_pylist()) if change is not None else set()
            was_removed = set(change or ())
            added = {c for c in (added - minus) | plus if not in_base(c)}
            was_removed = (was_removed | {c for c in minus if in_base(c)}) - plus
            updated.append(counted._replace(chunk_ids=sorted(added)))
            removed_lists.append(sorted(was_removed))
        else:  # the whole list (an entity since the base, or a delta row written whole)
            chunks = set(lists[at].values.to_pylist())
            updated.append(counted._replace(chunk_ids=sorted((chunks - minus) | plus)))
            removed_lists.append(None)
    table = records_table(updated, ENTITY_SCHEMA)
    return table.append_column(removed_column, pa.array(removed_lists, pa.list_(pa.string())))


class LiveIds(Set[str]):
    """The ids of a parent table's live rows, asked one at a time (``in``)."""

    def __init__(self, rows: KnowledgeRows) -> None:
        self._rows = rows

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and self._rows.with_ids([value]).num_rows > 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows.folded()[self._rows.key].to_pylist())

    def __len__(self) -> int:
        return self._rows.count()


class Names(Mapping[str, str]):
    """Entity id -> canonical name: the update's new and rewritten entities first, the
    parent's live ones looked up as they are asked for."""

    def __init__(self, parent: KnowledgeRows, added: pa.Table, removed: Set[str]) -> None:
        self._parent, self._removed = parent, removed
        self._names = dict(
            zip(added["entity_id"].to_pylist(), added["name"].to_pylist(), strict=True)
        )

    def prefetch(self, entity_ids: Set[str]) -> None:
        """Look the parent's names of ``entity_ids`` up in one go (those asked next)."""
        wanted = set(entity_ids) - set(self._names) - self._removed
        found = self._parent.with_ids(wanted)
        self._names.update(
            zip(found["entity_id"].to_pylist(), found["name"].to_pylist(), strict=True)
        )

    def __getitem__(self, entity_id: str) -> str:
        if entity_id in self._removed:
            raise KeyError(entity_id)
        if entity_id not in self._names:
            found = self._parent.with_ids([entity_id])
            if not found.num_rows:
                raise KeyError(entity_id)
            self._names[entity_id] = found["name"][0].as_py()
        return self._names[entity_id]

    def __iter__(self) -> Iterator[str]:
        ids = self._parent.folded()["entity_id"].to_pylist()
        return iter(sorted({*ids, *self._names} - self._removed))

    def __len__(self) -> int:
        return len(set(self))
