"""Arrow id columns sorted by id, searched by bisection.

Knowledge tables are written sorted by their id, and a refresh changes a few of their
rows: the update puts new rows in place and looks ids up, and validation walks a table
against its parent, by bisecting the columns rather than hashing every id.
"""

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def increasing(values: pa.Array) -> bool:
    """Whether every value is greater than the one before it (no nulls)."""
    if values.null_count:
        return False
    if len(values) < 2:
        return True
    later = pc.greater(values.slice(1), values.slice(0, len(values) - 1))
    return bool(pc.all(later).as_py())


class Scalars(Sequence[Any]):
    """An Arrow column seen as a Python sequence, for :mod:`bisect` (each item read
    as it is asked for, so a search reads a few dozen values, not the column)."""

    def __init__(self, values: pa.Array) -> None:
        self._values = values

    @property
    def values(self) -> pa.Array:
        """The column."""
        return self._values

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i: Any) -> Any:
        return self._values[i].as_py()

    def find(self, value: Any) -> int:
        """The row holding ``value`` in the sorted column, by bisection, or -1."""
        at = bisect.bisect_left(self, value)
        return at if at < len(self) and self[at] == value else -1


def group(
    codes: np.ndarray, values: np.ndarray, groups: int, *, distinct: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``values`` grouped by ``codes`` (ints in ``[0, groups)``) as ``(offsets,
    values)``: group ``g`` is ``values[offsets[g]:offsets[g + 1]]``, in the order of
    ``values``' positions; ``distinct`` keeps one of each repeated (code, value) pair
    and orders each group by value instead."""
    codes = np.asarray(codes, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if distinct:
        order = np.lexsort((values, codes))
        codes, values = codes[order], values[order]
        keep = np.ones(len(codes), dtype=bool)
        keep[1:] = (codes[1:] != codes[:-1]) | (values[1:] != values[:-1])
        codes, values = codes[keep], values[keep]
    else:
        order = np.argsort(codes, kind="stable")
        codes, values = codes[order], values[order]
    return np.searchsorted(codes, np.arange(groups + 1), side="left"), values


FENCE = 256
"""One key in this many of a sorted column is kept apart as its fence (:class:`Fenced`)."""


def fence(values: pa.Array, every: int = FENCE) -> pa.Array:
    """Every ``every``-th value of a sorted column, from the first: its fence."""
    return values.take(pa.array(np.arange(0, len(values), every, dtype=np.int64)))


def finder(values: Any) -> Callable[[Any], int]:
    """The row of a value in a sorted column, or -1: the column's own ``find`` when it has
    one (a :class:`Fenced` column), a bisection over it otherwise (over its ``arrow``
    array when it is a view of one)."""
    found = getattr(values, "find", None)
    if found is not None:
        return found  # type: ignore[no-any-return]
    return Scalars(getattr(values, "arrow", values)).find


class Fenced(Scalars):
    """A sorted column searched through its fence: a bisection of the fence (a small list
    held in memory, made on first use) picks the block of :data:`FENCE` rows that can hold
    the value, and a bisection of that block finds it. A column memory-mapped from a file
    is then read a few pages per lookup (the block's), where a bisection of the whole
    column reads a page per probe, each from a different part of the file."""

    def __init__(self, values: pa.Array, fence: pa.Array, every: int = FENCE) -> None:
        super().__init__(values)
        self._fence, self._every = fence, every
        self._heads: list[Any] | None = None
        self._ids: SortedIds | bool | None = False  # not looked at yet

    def find(self, value: Any) -> int:
        """The row holding ``value``, or -1."""
        if self._heads is None:
            self._heads = self._fence.to_pylist()
        block = bisect.bisect_right(self._heads, value) - 1
        if block < 0:
            return -1
        lo = block * self._every
        at = bisect.bisect_left(self, value, lo, min(lo + self._every, len(self)))
        return at if at < len(self) and self[at] == value else -1

    def find_many(self, values: Sequence[str] | pa.Array) -> np.ndarray:
        """The row holding each of ``values`` (-1: not there): one vectorized search when
        the column holds ids of one width (:class:`SortedIds`: its prefixes are read
        whole on first use, one pass over the column), a search each otherwise."""
        if self._ids is False:
            self._ids = SortedIds.of(self.values)
        if isinstance(self._ids, SortedIds):
            return self._ids.positions(values)
        strings = values.to_pylist() if isinstance(values, pa.Array) else values
        return np.asarray([self.find(v) for v in strings], dtype=np.int64)


def prefixes_of(values: pa.Array, width: int) -> np.ndarray | None:
    """The first ``width`` bytes of each string of ``values`` (as ``S<width>``), read
    from its buffers; ``None`` when the strings are not all one width of at least
    ``width`` bytes, or one is null."""
    if values.null_count or not pa.types.is_string(values.type) or not len(values):
        return None
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)
    offsets = offsets[values.offset : values.offset + len(values) + 1]
    size = int(offsets[1] - offsets[0])
    if size < width or np.any(np.diff(offsets) != size):
        return None
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)
    data = data[offsets[0] : offsets[-1]].reshape(len(values), size)
    return np.ascontiguousarray(data[:, :width]).view(f"S{width}").ravel()


def _heads(prefixes: np.ndarray, skip: int = 0) -> np.ndarray:
    """8 bytes of each prefix (from byte ``skip``) as an unsigned number, ordered as the
    bytes are (big-endian)."""
    raw = np.ascontiguousarray(prefixes).view(np.uint8).reshape(len(prefixes), -1)
    return np.ascontiguousarray(raw[:, skip : skip + 8]).view(">u8").ravel().astype(np.uint64)


class SortedIds:
    """A strictly increasing column of ids of one width in bytes (hex digests) searched with
    ``numpy.searchsorted`` over each id's first :data:`PREFIX` bytes, each candidate
    then compared whole: a few hundred lookups in one vectorized pass instead of a
    bisection each.

    Example:
        >>> ids = SortedIds.of(table["mention_id"].combine_chunks())  # None: not one width
        >>> ids.rows(["00ab...", "f3c1..."])  # ascending rows of the ids found
    """

    PREFIX = 16

    def __init__(self, values: pa.Array, prefixes: np.ndarray) -> None:
        self._values = values
        self._prefixes = prefixes
        self._heads: np.ndarray | None = None  # each prefix's first 8 bytes, as a number
        self._tails: np.ndarray | None = None  # and its next 8

    @classmethod
    def of(cls, values: pa.Array) -> "SortedIds | None":
        """The searchable column, or ``None`` when its values are not all one width of
        at least :data:`PREFIX` bytes, or hold a null."""
        prefixes = prefixes_of(values, cls.PREFIX)
        return None if prefixes is None else cls(values, prefixes)

    def rows(self, wanted: Sequence[str]) -> np.ndarray:
        """Ascending distinct rows holding one of ``wanted`` (absent ones find nothing)."""
        found = self.positions(wanted)
        return np.unique(found[found >= 0])

    def positions(self, wanted: Sequence[str] | pa.Array) -> np.ndarray:
        """The row of each of ``wanted`` (strings, or an Arrow string array without
        nulls), in their order (-1: not there). Searched by the first 8 bytes as numbers,
        a match compared whole; ids that share those bytes by their next 8 within them,
        then one by one."""
        found = np.full(len(wanted), -1, dtype=np.int64)
        if not len(wanted):
            return found
        if self._heads is None:
            self._heads = _heads(self._prefixes)
        wanted = wanted if isinstance(wanted, pa.Array) else pa.array(wanted, pa.string())
        keys = prefixes_of(wanted, self.PREFIX)
        if keys is None:  # ids of other widths: their prefixes one by one
            keys = np.array(
                [w.encode()[: self.PREFIX] for w in wanted.to_pylist()], dtype=f"S{self.PREFIX}"
            )
        heads = _heads(keys)
        order = np.argsort(heads, kind="stable")  # sorted keys: each search starts near the last
        left, right = np.empty_like(order), np.empty_like(order)
        left[order] = np.searchsorted(self._heads, heads[order], "left")
        right[order] = np.searchsorted(self._heads, heads[order], "right")
        one = np.flatnonzero(right - left == 1)  # held once: compare that row whole
        if len(one):
            rows = left[one]
            same = pc.equal(self._values.take(pa.array(rows)), wanted.take(pa.array(one)))
            hit = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
            found[one[hit]] = rows[hit]
        shared = np.flatnonzero(right - left > 1)  # shared first bytes: rare
        if len(shared) and self._tails is None:
            self._tails = _heads(self._prefixes, 8)
        tails = _heads(keys[shared], 8) if len(shared) else heads[:0]
        for i, tail in zip(shared.tolist(), tails.tolist(), strict=True):
            block = self._tails[left[i] : right[i]]  # type: ignore[index]  # made above
            lo = int(left[i] + np.searchsorted(block, tail, "left"))
            hi = int(left[i] + np.searchsorted(block, tail, "right"))
            value = wanted[i].as_py()
            for row in range(lo, hi):
                if self._values[row].as_py() == value:
                    found[i] = row
        return found

    @property
    def nbytes(self) -> int:
        return int(self._prefixes.nbytes)
