"""``.npy`` headers read safely from several threads at once.

numpy parses a ``.npy`` header with ``ast.literal_eval``. CPython 3.11 keeps the
AST converter's recursion depth in interpreter-wide state, so when one thread is
paused half-way through a conversion (a garbage collection that runs a
finalizer can release the GIL) and another thread converts meanwhile, one of
them fails with ``SystemError: AST constructor recursion depth mismatch``.
Every ``.npy`` read evidex makes (bundle verification, BM25 index loads) holds
:data:`HEADER_LOCK`, so evidex's own threads never convert at the same time.
"""

import threading

import numpy as np

HEADER_LOCK = threading.Lock()


def header_dtype(path: str) -> np.dtype:
    """The dtype in a ``.npy`` file's header, without reading (or unpickling) the array.

    Raises:
        OSError: the file cannot be read.
        ValueError: the header is not a ``.npy`` header.
    """
    fmt = np.lib.format
    with HEADER_LOCK, open(path, "rb") as handle:
        version = fmt.read_magic(handle)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        return read(handle)[2]
