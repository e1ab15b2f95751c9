"""Arrow id columns sorted by id, searched by bisection.

Knowledge tables are written sorted by their id, and a refresh changes a few of their
rows: the update puts new rows in place and looks ids up, and validation walks a table
against its parent, by bisecting the columns rather than hashing every id.
"""

from collections.abc import Sequence
from typing import Any

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

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i: Any) -> Any:
        return self._values[i].as_py()
