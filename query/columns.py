"""Python views of Arrow columns for the read side, converted on use.

Opening a generation must not cost a Python object per row: a SciFact-size knowledge
layer holds ~120k entities and relations, and converting every column to lists and dicts
took over a second per open, which a stream's reader pays once per window.
:class:`ArrowSequence` converts one item when it is asked for (and the whole column once,
when it is iterated), and :class:`Grouped` keeps a key -> rows index as two numpy arrays.
"""

from abc import abstractmethod
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.bundles import numbers
from store.sorted_columns import group


class Converted(Sequence[Any]):
    """A read-only sequence whose items are made when asked for: a subclass makes one
    (:meth:`item`, given an index in range and not negative) or all of them
    (:meth:`tolist`); slicing and iterating go through :meth:`tolist`."""

    @abstractmethod
    def item(self, index: int) -> Any:
        """Item ``index`` (``0 <= index < len(self)``)."""

    @abstractmethod
    def tolist(self) -> list[Any]:
        """Every item."""

    def items_at(self, rows: Sequence[int]) -> list[Any]:
        """The items of ``rows`` (each in range, not negative), in their order."""
        return [self.item(r) for r in rows]

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.tolist()[index]
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"index {index} out of range for {size} rows")
        return self.item(index + size if index < 0 else index)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.tolist())


class ArrowSequence(Converted):
    """A read-only sequence over an Arrow array (or chunked column).

    Indexing converts one item; iterating, slicing or :meth:`tolist` converts the whole
    column once and keeps the list, so a caller that walks every row pays what
    ``to_pylist`` would have.
    """

    def __init__(self, array: Any) -> None:
        self._array = array.combine_chunks() if hasattr(array, "combine_chunks") else array
        self._items: list[Any] | None = None

    @property
    def arrow(self) -> Any:
        """The Arrow array behind the sequence."""
        return self._array

    def __len__(self) -> int:
        return len(self._array)

    def item(self, index: int) -> Any:
        items = self._items
        return items[index] if items is not None else self._array[index].as_py()

    def tolist(self) -> list[Any]:
        """Every item as a Python object (converted once, then kept)."""
        if self._items is None:
            self._items = self._array.to_pylist()
        return self._items

    def items_at(self, rows: Sequence[int]) -> list[Any]:
        """The items of ``rows``, converted in one pass."""
        if self._items is not None:
            return [self._items[r] for r in rows]
        return self._array.take(pa.array(rows, pa.int64())).to_pylist()  # type: ignore[no-any-return]


def items_at(values: Sequence[Any], rows: Sequence[int]) -> list[Any]:
    """The items of ``rows`` of any sequence, in one pass where it offers one."""
    take = getattr(values, "items_at", None)
    return take(rows) if take is not None else [values[r] for r in rows]  # type: ignore[no-any-return]


def first_items(lists: Sequence[Any], rows: Sequence[int]) -> list[Any]:
    """The first item of each of the lists ``rows`` (``None``: an empty list), read in
    one pass where the lists are an Arrow column (or the base of one overlaid)."""
    if isinstance(lists, ArrowSequence) and lists._items is None:
        heads = pc.list_slice(lists.arrow.take(pa.array(rows, pa.int64())), 0, 1)
        found: list[Any] = [None] * len(rows)
        owners: Any = numbers(pc.list_parent_indices(heads)) if len(rows) else []
        for owner, item in zip(owners, pc.list_flatten(heads).to_pylist(), strict=True):
            found[int(owner)] = item
        return found
    firsts = getattr(lists, "firsts", None)
    if firsts is not None:
        return firsts(rows)  # type: ignore[no-any-return]
    return [next(iter(items), None) for items in items_at(lists, rows)]


def get_many(mapping: Mapping[Any, list[int]], keys: Sequence[Any]) -> list[list[int]]:
    """Each key's rows (``[]``: not a key), in one pass where the mapping offers one."""
    many = getattr(mapping, "get_many", None)
    return many(keys) if many is not None else [mapping.get(k, []) for k in keys]  # type: ignore[no-any-return]


def lists_at(lists: Sequence[Any], rows: Sequence[int]) -> pa.Array:
    """The string lists of ``rows`` as one Arrow list array, taken in one pass where the
    lists are an Arrow column (or the base of one overlaid)."""
    take = getattr(lists, "lists_at", None)
    if take is not None:
        return take(rows)
    if isinstance(lists, ArrowSequence) and lists._items is None:
        return lists.arrow.take(pa.array(rows, pa.int64()))
    return pa.array([list(items) for items in items_at(lists, rows)], pa.list_(pa.string()))


def list_items(values: Any) -> tuple[np.ndarray, Any, np.ndarray]:
    """The items of a column of string lists (an :class:`ArrowSequence`, an Arrow list
    array or column, or Python lists): each item's row, the distinct items (an Arrow
    array), and each item's place among them, so that a caller maps every distinct item
    once."""
    if isinstance(values, ArrowSequence):
        values = values.arrow
    elif isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    elif not isinstance(values, pa.Array):
        values = pa.array([list(items) for items in values], type=pa.list_(pa.string()))
    rows = numbers(pc.list_parent_indices(values)).astype(np.int64)
    encoded = pc.list_flatten(values).dictionary_encode()
    return rows, encoded.dictionary, numbers(encoded.indices)


class Grouped(Mapping[Any, list[int]]):
    """key -> ascending list of ints, stored as ``values`` grouped by key: group ``g``
    is ``values[offsets[g]:offsets[g + 1]]``.

    With ``labels`` the keys are those labels (group ``g`` is ``labels[g]``); without,
    the keys are the group numbers themselves. Keys whose group is empty are absent.
    """

    def __init__(
        self,
        offsets: np.ndarray,
        values: np.ndarray,
        labels: Sequence[Hashable] | None = None,
        position: Mapping[Any, int] | None = None,
    ) -> None:
        self._offsets = offsets
        self._values = values
        self._groups = len(offsets) - 1
        if labels is not None and position is None:
            position = {k: g for g, k in enumerate(labels)}
        self._position = position

    @classmethod
    def of(
        cls, codes: np.ndarray, values: np.ndarray, groups: int, *, distinct: bool = False
    ) -> "Grouped":
        """Group ``values`` by ``codes`` (ints in ``[0, groups)``), each group in the
        order of ``values``' positions; ``distinct`` keeps one of each repeated
        (code, value) pair and orders each group by value instead."""
        offsets, values = group(codes, values, groups, distinct=distinct)
        return cls(offsets, values)

    def labelled(
        self, labels: Sequence[Hashable], position: Mapping[Any, int] | None = None
    ) -> "Grouped":
        """The same groups, keyed by ``labels`` (one per group, in group order).

        ``position`` (label -> group), when the caller holds it already, saves building
        it; it may name more labels than there are groups (those keys are absent).
        """
        if len(labels) != self._groups:
            raise ValueError(f"{len(labels)} labels for {self._groups} groups")
        return Grouped(self._offsets, self._values, labels, position)

    def _group(self, key: Hashable) -> int:
        group = key if self._position is None else self._position.get(key)
        if isinstance(group, (int, np.integer)) and 0 <= group < self._groups:
            return int(group)
        raise KeyError(key)

    def __getitem__(self, key: Hashable) -> list[int]:
        group = self._group(key)
        start, end = self._offsets[group], self._offsets[group + 1]
        if start == end:
            raise KeyError(key)
        return list(self._values[start:end].tolist())

    def __iter__(self) -> Iterator[Hashable]:
        sizes = np.diff(self._offsets)
        if self._position is None:
            return iter(np.flatnonzero(sizes).tolist())
        named = list(self._position.items())  # one step: the map may grow meanwhile
        return iter(k for k, g in named if g < self._groups and sizes[g])

    def __len__(self) -> int:
        return int(np.count_nonzero(np.diff(self._offsets)))
