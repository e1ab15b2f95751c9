"""store.memory: the Arrow memory pool evidex processes use."""

import os
import subprocess
import sys

from store.memory import ENV


def _pool_after_choosing(env: dict[str, str]) -> tuple[str, str]:
    """(pool in use, the variable a child process would see), in a fresh interpreter."""
    code = (
        "import os, pyarrow as pa\n"
        "from store.memory import choose_memory_pool\n"
        "name = choose_memory_pool()\n"
        "assert name == pa.default_memory_pool().backend_name\n"
        f"print(name, os.environ.get({ENV!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    pool, inherited = done.stdout.split()
    return pool, inherited


def test_entry_points_use_the_system_allocator_and_pass_it_to_child_processes():
    env = {k: v for k, v in os.environ.items() if k != ENV}
    assert _pool_after_choosing(env) == ("system", "system")


def test_a_pool_the_user_named_is_kept():
    import pyarrow as pa

    others = [b for b in pa.supported_memory_backends() if b != "system"]
    wanted = others[0] if others else "system"  # a pool other than ours where the wheel has one
    assert _pool_after_choosing({**os.environ, ENV: wanted}) == (wanted, wanted)
