"""Arrow's memory pool for evidex processes.

pyarrow's wheels allocate with mimalloc by default. On the project machine that pool made
the Arrow-heavy steps several times slower on fresh memory (reading a SciFact
generation's 284k-row mention table: 0.35-0.66 s, against 0.07-0.14 s with jemalloc or the
system allocator), and those steps are most of what a refresh and its validation do
besides embedding (docs/benchmarks.md, "Arrow's memory pool"). Entry points call
:func:`choose_memory_pool` first; a user's ``ARROW_DEFAULT_MEMORY_POOL`` is left alone.
"""

import os

ENV = "ARROW_DEFAULT_MEMORY_POOL"
POOL = "system"


def choose_memory_pool() -> str:
    """Make the system allocator Arrow's pool in this process and in the processes it
    starts (Beam workers, the compaction beside a stream), unless
    ``ARROW_DEFAULT_MEMORY_POOL`` already names one; returns the pool in use."""
    import pyarrow as pa

    if not os.environ.get(ENV):
        os.environ[ENV] = POOL
        pa.set_memory_pool(pa.system_memory_pool())
    return str(pa.default_memory_pool().backend_name)
