"""A knowledge table as a base and a delta: a refresh or stream window writes what
changed, not the table.

A generation holds each of its row-keyed knowledge tables (mentions, entities,
relations, communities) in one of two forms:

- *whole*: ``entities.parquet``, sorted by id (a build, a compaction, or a window that
  folded its delta);
- *layered*: a base, ``entities.base.parquet`` (the whole table of an earlier
  generation, hard-linked from it: on a local root no byte is copied), and the change
  since that base: ``entities.delta.parquet``, the rows added or rewritten (the table's
  schema, sorted by id), and ``entities.removed.parquet``, the ids of base rows that are
  gone (one ``id`` column, sorted).

The table a reader sees (:func:`read_table`) is the base less its removed rows and the
rows the delta rewrites, plus the delta's rows, in id order. Each window writes the
delta again, its parent's folded with its own change (:func:`write_change`), so what it
writes grows with the change since the base, not with the corpus; when the delta passes
``KnowledgeConfig.fold_share`` of the base's rows the window writes the table whole, and that is the
next windows' base. A reader that holds the base (a stream, a server: see
:mod:`store.table_cache`, which knows a hard link of a file it read) reads only the delta.
"""

import bisect
import logging
import os
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store import storage, table_cache
from store.sorted_columns import Scalars, increasing

logger = logging.getLogger(__name__)

ID_COLUMNS = {
    "mentions.parquet": "mention_id",
    "entities.parquet": "entity_id",
    "relations.parquet": "relation_id",
    "communities.parquet": "community_id",
}
"""The layered tables (file name -> id column)."""
RELATIVE_LISTS = {"entities.parquet": "chunk_ids"}
"""A layered table's list column (sorted items) that a delta row may hold as its change
against the base row with the same id: the items added since the base in the column
itself, those removed since it in ``<column>_removed`` (null: the row holds its whole
list). An entity named in a hundred thousand chunks is then rewritten by a window that
names it once without its hundred thousand chunk ids."""
REMOVED_SUFFIX = "_removed"
FOLD_SHARE = 0.1
"""A delta (rows added, rewritten and removed) past this share of its base's rows is
folded: the window writes the table whole (``KnowledgeConfig.fold_share``)."""
BISECT_LIMIT = 4096
"""Up to this many ids are found in a base by bisection; more by one hashed pass."""


def layer_files(name: str) -> tuple[str, str, str]:
    """The base, delta and removed-ids file names of table ``name`` (``x.parquet``)."""
    stem = name.removesuffix(".parquet")
    return f"{stem}.base.parquet", f"{stem}.delta.parquet", f"{stem}.removed.parquet"


def rows_file(path: str, name: str) -> str:
    """The file holding table ``name``'s whole rows in the generation at ``path``: the
    table itself, or its base when it is layered."""
    return layer_files(name)[0] if is_layered(path, name) else name


def table_files(name: str) -> tuple[str, ...]:
    """Every file name table ``name`` may be stored under, whole or layered."""
    return (name, *layer_files(name)) if name in ID_COLUMNS else (name,)


def has_table(path: str, name: str) -> bool:
    """Whether the generation at ``path`` holds table ``name``, whole or layered."""
    return storage.exists(storage.join(path, name)) or (
        name in ID_COLUMNS and storage.exists(storage.join(path, layer_files(name)[0]))
    )


def is_layered(path: str, name: str) -> bool:
    """Whether the generation at ``path`` holds table ``name`` as a base and a delta."""
    return (
        name in ID_COLUMNS
        and not storage.exists(storage.join(path, name))
        and has_table(path, name)
    )


def table_schema(path: str, name: str) -> pa.Schema:
    """The schema of table ``name`` of the generation at ``path`` (a layered table's
    delta has its base's schema: :func:`write_change`)."""
    where = storage.join(path, name if not is_layered(path, name) else layer_files(name)[0])
    if storage.is_remote(where):
        return read_file(where).schema
    return pq.read_schema(where)


def read_file(path: str, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file on any filesystem, through :mod:`store.table_cache` (a stream
    reads what its last window wrote, or a hard link of it, from memory)."""

    def load() -> pa.Table:
        if storage.is_remote(path):
            return pq.read_table(pa.BufferReader(storage.read_bytes(path)), columns=columns)
        return pq.ParquetFile(path).read(columns=columns)

    return table_cache.read(path, columns, load)


def read_table(path: str, name: str, columns: list[str] | None = None) -> pa.Table:
    """Table ``name`` of the generation at ``path`` as readers see it, whole or folded
    from its base and delta; ``columns`` of it (all by default; a layered table also
    reads its id column to fold).

    Raises:
        FileNotFoundError: the generation holds no such table.
    """
    join = storage.join
    if not is_layered(path, name):
        if not storage.exists(join(path, name)):
            raise FileNotFoundError(join(path, name))
        return read_file(join(path, name), columns)
    key = ID_COLUMNS[name]
    wanted = None if columns is None else list(dict.fromkeys([key, *columns]))
    base_file, delta_file, removed_file = (join(path, f) for f in layer_files(name))

    def folded() -> pa.Table:
        base = read_file(base_file, wanted)
        delta = read_file(delta_file, _delta_columns(delta_file, name, wanted))
        removed = read_file(removed_file)["id"].combine_chunks()
        table = fold(base, delta, removed, key)
        return table if columns is None else table.select(columns)

    tag = f"folded:{name}:{'' if columns is None else ','.join(columns)}"
    # Kept under the delta file, which every change rewrites; the base never changes.
    return table_cache.remember(delta_file, tag, folded, _size(base_file, delta_file))


def relative_column(name: str) -> tuple[str, str] | None:
    """Table ``name``'s list column a delta may hold as a change, and the column of the
    items removed (:data:`RELATIVE_LISTS`), or ``None``."""
    column = RELATIVE_LISTS.get(name)
    return None if column is None else (column, column + REMOVED_SUFFIX)


def delta_columns(path: str, name: str, wanted: list[str]) -> list[str]:
    """The columns to read of the delta of table ``name`` of the generation at ``path``
    (layered): ``wanted``, and the removed items of a list it may hold as a change
    (:data:`RELATIVE_LISTS`) where ``wanted`` names that list and the delta has them."""
    found = _delta_columns(storage.join(path, layer_files(name)[1]), name, wanted)
    return wanted if found is None else found


def _delta_columns(delta_file: str, name: str, wanted: list[str] | None) -> list[str] | None:
    """The columns to read of a delta: ``wanted``, and the removed items of a relative
    list column among them where the delta has that column."""
    relative = relative_column(name)
    if wanted is None or relative is None or relative[0] not in wanted:
        return wanted
    names = read_file(delta_file).schema.names if storage.is_remote(delta_file) else None
    if names is None:
        names = pq.read_schema(delta_file).names
    return [*wanted, relative[1]] if relative[1] in names else wanted


def absolute(base: pa.Table, delta: pa.Table, key: str, column: str) -> pa.Table:
    """``delta`` with every row that holds list ``column`` as a change against its base
    row (its ``<column>_removed`` not null) given its whole list instead, and without
    the removed items' column.

    Raises:
        ValueError: a relative row's id is not in ``base``.
    """
    removed_name = column + REMOVED_SUFFIX
    if removed_name not in delta.column_names:
        return delta
    rows = true_rows(pc.is_valid(delta[removed_name]))
    if not rows:
        return delta.drop_columns([removed_name])
    ids = delta[key].take(pa.array(rows, type=pa.int64())).combine_chunks()
    at = positions(base[key].combine_chunks(), ids)
    if len(at) != len(rows):
        raise ValueError(f"a delta row holds its {column} as a change, but its base has no row")
    lists = delta[column].to_pylist()
    removed = delta[removed_name].take(pa.array(rows, type=pa.int64())).to_pylist()
    whole = base[column].take(pa.array(at, type=pa.int64())).to_pylist()
    for row, before, gone in zip(rows, whole, removed, strict=True):
        lists[row] = sorted((set(before) - set(gone)) | set(lists[row]))
    field = delta.schema.field(column)
    at_column = delta.schema.get_field_index(column)
    table = delta.set_column(at_column, field, pa.array(lists, type=field.type))
    return table.drop_columns([removed_name])


def _size(*paths: str) -> int:
    """Rough bytes of a folded table in memory: four times its files (compressed)."""
    return 4 * sum(os.path.getsize(p) for p in paths if not storage.is_remote(p))


def positions(ids: pa.Array, wanted: pa.Array) -> list[int]:
    """Row numbers of ``ids`` (distinct; bisected when sorted) that hold one of
    ``wanted``, ascending."""
    if not len(wanted) or not len(ids):
        return []
    if len(wanted) > BISECT_LIMIT or not increasing(ids):
        return true_rows(pc.is_in(ids, value_set=wanted))
    keys = Scalars(ids)
    return [at for v in sorted(set(wanted.to_pylist())) if (at := keys.find(v)) >= 0]


def true_rows(mask: pa.Array | pa.ChunkedArray) -> list[int]:
    """Row numbers where the boolean ``mask`` is true, ascending (a chunked mask is
    combined first: pyarrow 25's ``indices_nonzero`` crashes on one of no chunks)."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    return pc.indices_nonzero(mask).to_pylist()


def take_rows(table: pa.Table, rows: Sequence[int] | np.ndarray) -> pa.Table:
    """Rows numbered ``rows`` (ascending) of ``table``, in one piece: up to
    :data:`BISECT_LIMIT` rows as slices of runs (a table read in many chunks is not
    concatenated, as ``take`` would), more by ``take``."""
    if len(rows) > BISECT_LIMIT:
        return table.take(pa.array(rows, type=pa.int64())).combine_chunks()
    if not len(rows):
        return table.schema.empty_table()
    pieces, start, end = [], int(rows[0]), int(rows[0]) + 1
    for row in rows[1:]:
        if row != end:
            pieces.append(table.slice(start, end - start))
            start = int(row)
        end = int(row) + 1
    pieces.append(table.slice(start, end - start))
    return pa.concat_tables(pieces).combine_chunks()


def without_rows(table: pa.Table, rows: list[int]) -> pa.Table:
    """``table`` less the rows numbered ``rows`` (ascending), as slices of it."""
    if not rows:
        return table
    pieces, start = [], 0
    for row in rows:
        if row > start:
            pieces.append(table.slice(start, row - start))
        start = row + 1
    pieces.append(table.slice(start))
    return pa.concat_tables(pieces)


def split_rows(table: pa.Table, rows: list[int]) -> tuple[pa.Table, pa.Table]:
    """``table`` less the rows numbered ``rows`` (ascending), and those rows, each in
    ``table``'s order: slices of it (no row copied) for up to :data:`BISECT_LIMIT` rows,
    one filtering pass for more."""
    taken = table.take(pa.array(rows, type=pa.int64()))
    if len(rows) <= BISECT_LIMIT:
        return without_rows(table, rows), taken
    keep = np.ones(table.num_rows, dtype=bool)
    keep[rows] = False
    return table.filter(pa.array(keep)), taken


def merged(kept: pa.Table, added: pa.Table, key: str) -> pa.Table:
    """``kept`` (sorted by ``key``) and ``added`` (ids not in ``kept``) as one table sorted
    by ``key``: the added rows go in place between slices of the kept ones instead of
    sorting every row again. Sorts everything when ``kept`` is not sorted or ``added``
    is past :data:`BISECT_LIMIT` rows."""
    if not added.num_rows:
        return kept
    ids = kept[key].combine_chunks()
    added = added.select(kept.column_names).cast(kept.schema).sort_by(key)
    if added.num_rows > BISECT_LIMIT or not increasing(ids):
        return pa.concat_tables([kept, added]).sort_by(key)
    keys = Scalars(ids)
    pieces, start = [], 0
    for row, value in enumerate(added[key].to_pylist()):
        at = bisect.bisect_left(keys, value, lo=start)
        pieces += [kept.slice(start, at - start), added.slice(row, 1)]
        start = at
    pieces.append(kept.slice(start))
    return pa.concat_tables(pieces)


def fold(base: pa.Table, delta: pa.Table, removed: pa.Array, key: str) -> pa.Table:
    """The table a base and a delta stand for: ``base`` less the rows whose id is
    ``removed`` or rewritten by ``delta``, plus ``delta``'s rows (a list held as a
    change made whole: :func:`absolute`), sorted by ``key``."""
    for column in RELATIVE_LISTS.values():
        if column in base.column_names:
            delta = absolute(base, delta, key, column)
    ids = base[key].combine_chunks()
    gone = pa.concat_arrays([removed.cast(pa.string()), delta[key].combine_chunks()])
    kept = without_rows(base, positions(ids, gone))
    return merged(kept, delta, key)


def _same_values(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Per row, whether ``a`` and ``b`` (one type, one length) hold the same value
    (nulls equal nulls; lists compared item by item)."""
    if len(a) == 0:
        return np.zeros(0, dtype=bool)
    a_null = pc.is_null(a).to_numpy(zero_copy_only=False)
    b_null = pc.is_null(b).to_numpy(zero_copy_only=False)
    if pa.types.is_list(a.type) or pa.types.is_large_list(a.type):
        same = pc.equal(pc.list_value_length(a), pc.list_value_length(b))
        same = pc.fill_null(same, False).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(same)
        if len(rows):
            picked = pa.array(rows)
            left, right = a.take(picked), b.take(picked)
            items = _same_values(pc.list_flatten(left), pc.list_flatten(right))
            owners = pc.list_parent_indices(left).to_numpy()
            same[rows[np.unique(owners[~items])]] = False
    else:
        same = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
    return (same & ~a_null & ~b_null) | (a_null & b_null)


def changed_rows(old: pa.Table, new: pa.Table, key: str) -> tuple[pa.Table, list[str]]:
    """What turns ``old`` into ``new`` (both keyed by ``key``, one schema): the rows of
    ``new`` that are not in ``old`` as they are, and the ids of ``old`` that ``new`` lacks."""
    new_ids = new[key].combine_chunks()
    at = pc.index_in(new_ids, value_set=old[key].combine_chunks())
    found = pc.is_valid(at).to_numpy(zero_copy_only=False)
    same = found.copy()
    rows = np.flatnonzero(found)
    if len(rows):
        theirs = old.take(pc.filter(at, pc.is_valid(at)))
        mine = new.take(pa.array(rows))
        for name in new.column_names:
            same[rows] &= _same_values(mine[name].combine_chunks(), theirs[name].combine_chunks())
    gone = pc.invert(pc.is_in(old[key], value_set=new_ids))
    return new.filter(pa.array(~same)), old[key].filter(gone).to_pylist()


def link_table(parent: str, staging: str, name: str) -> None:
    """Table ``name`` of the ``parent`` generation, unchanged, in ``staging``: its files
    (whole, or base and delta) linked as they are."""
    join = storage.join
    files = [f for f in table_files(name) if storage.exists(join(parent, f))]
    for file in [name] if name in files else files:
        storage.reuse_file(join(parent, file), join(staging, file))


def _rows(path: str, key: str) -> int:
    """Rows of the Parquet file at ``path`` (from its footer where it is local)."""
    if storage.is_remote(path):
        return read_file(path, [key]).num_rows
    return pq.ParquetFile(path).metadata.num_rows


def _ids_table(ids: list[str]) -> pa.Table:
    return pa.table({"id": pa.array(sorted(set(ids)), type=pa.string())})


def write_change(
    staging: str,
    name: str,
    parent: str,
    *,
    upserts: pa.Table,
    removed: list[str],
    whole: Callable[[], pa.Table],
    write: Callable[[pa.Table, str], None],
    fold_share: float = FOLD_SHARE,
) -> str:
    """Write table ``name`` of a new generation into ``staging``: the ``parent``
    generation's table with the rows of ``upserts`` added or rewritten (by id) and the
    rows whose id is in ``removed`` gone.

    The parent's base is hard-linked (:func:`store.storage.reuse_file`; the parent's
    whole table when it has no base) and the delta since it written; the table is
    written whole instead, by ``write(whole(), path)``, when the delta would pass
    ``fold_share`` of the base's rows. ``whole()`` must return the new table
    itself, sorted by id.

    A change of nothing links the parent's files as they are.

    Returns:
        ``"whole"`` or ``"layered"``: how the table was written.
    """
    join = storage.join
    key = ID_COLUMNS[name]
    base_name, delta_name, removed_name = layer_files(name)
    if not upserts.num_rows and not removed:  # unchanged: the parent's files, linked
        link_table(parent, staging, name)
        return "layered" if is_layered(parent, name) else "whole"
    if is_layered(parent, name):
        base_source = join(parent, base_name)
        parent_delta = read_file(join(parent, delta_name))
        parent_removed = read_file(join(parent, removed_name))["id"].to_pylist()
    else:
        base_source = join(parent, name)
        parent_delta, parent_removed = upserts.schema.empty_table(), []
    base_rows = _rows(base_source, key)
    relative = relative_column(name)
    own = [c for c in upserts.column_names if relative is None or c != relative[1]]
    if not table_schema(parent, name).equals(upserts.select(own).schema):
        base_rows = 0  # written before a column was added: the table is written whole
    # The parent's delta rows that this change neither removes nor rewrites stay.
    dropped = pa.array(sorted({*removed, *upserts[key].to_pylist()}), type=pa.string())
    stay = parent_delta.filter(pc.invert(pc.is_in(parent_delta[key], value_set=dropped)))
    delta = pa.concat_tables([stay, upserts], promote_options="permissive").sort_by(key)
    gone = sorted({*parent_removed, *removed})
    if relative is not None and relative[1] not in delta.column_names:
        delta = delta.append_column(relative[1], pa.nulls(delta.num_rows, pa.list_(pa.string())))
    if delta.num_rows + len(gone) > fold_share * max(1, base_rows):
        write(whole(), join(staging, name))
        logger.info("%s written whole (%d rows changed since its base)", name, delta.num_rows)
        return "whole"
    storage.reuse_file(base_source, join(staging, base_name))
    write(delta.combine_chunks(), join(staging, delta_name))
    write(_ids_table(gone), join(staging, removed_name))
    logger.info(
        "%s written as its base (%d rows) and a delta: %d rows added or rewritten, %d removed",
        name,
        base_rows,
        delta.num_rows,
        len(gone),
    )
    return "layered"
