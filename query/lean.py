"""A read-only process without pandas: pyarrow's lazy pandas probe settled up front.

pyarrow asks whether pandas is installed the first time it converts Python values
(``pa.array``), only to check whether the input is a pandas object or holds pandas'
missing-value markers, and importing pandas
costs a cold ``evidex query`` 0.2-0.6 s. :func:`settle_pandas_probe` lets that one probe
find no pandas, so pyarrow treats every input as a plain sequence or array; any later
call that needs pandas (``to_pandas``, ``Table.from_pandas``) still imports it, because
pyarrow tries again whenever pandas is required rather than only asked about.

Only the CLI's query commands call it: a process that builds pandas objects and hands
them to ``pa.array`` before converting anything with pyarrow would see them as plain
sequences.
"""

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _Refuse(importlib.abc.MetaPathFinder):
    """Finds ``name`` nowhere (while it is on ``sys.meta_path``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == self._name:
            raise ModuleNotFoundError(f"{fullname} is not imported by a read-only process")
        return None


def settle_pandas_probe() -> bool:
    """Let pyarrow's first pandas probe run with pandas out of reach.

    Returns:
        Whether the probe was settled without pandas (``False`` when pandas was imported
        already).
    """
    if "pandas" in sys.modules:
        return False
    refuse = _Refuse("pandas")
    sys.meta_path.insert(0, refuse)
    try:
        import pyarrow as pa

        # pyarrow asks twice, and remembers each answer: its Python-side check of the
        # input's type, and its C++ converter of Python sequences (for pandas' NA values).
        pa.array([], type=pa.string())
        pa.array([""])
    finally:
        sys.meta_path.remove(refuse)
    return "pandas" not in sys.modules
