import gc
import threading
import time

import numpy as np
import pytest

from query.lexical import LexicalIndex
from store.config import LexicalConfig
from store.npy import header_dtype
from transforms.lexical import build_bm25


@pytest.fixture
def collections_release_the_gil():
    """Make the AST race likely: every garbage collection pauses its thread briefly."""
    threshold = gc.get_threshold()

    def pause(phase: str, info: dict) -> None:
        time.sleep(0.00005)

    gc.set_threshold(5, 1, 1)
    gc.callbacks.append(pause)
    yield
    gc.callbacks.remove(pause)
    gc.set_threshold(*threshold)


def test_header_dtype_reads_the_header_only(tmp_path):
    np.save(tmp_path / "v.npy", np.zeros((3, 4), dtype=np.float32))
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert header_dtype(str(tmp_path / "v.npy")) == np.float32
    assert header_dtype(str(tmp_path / "o.npy")).hasobject
    (tmp_path / "bad.npy").write_bytes(b"not a header")
    with pytest.raises(ValueError):
        header_dtype(str(tmp_path / "bad.npy"))


def test_npy_headers_and_bm25_indexes_read_from_eight_threads_at_once(
    tmp_path, collections_release_the_gil
):
    np.save(tmp_path / "v.npy", np.zeros((3, 4), dtype=np.float32))
    texts = ["rivers flow north", "rivers freeze in winter", "mountains rise", "seas"]
    build_bm25(texts, config=LexicalConfig()).save(str(tmp_path / "bm25"))
    errors: list[str] = []

    def read(i: int) -> None:
        for _ in range(300):
            try:
                if i % 2:
                    index = LexicalIndex.open(str(tmp_path / "bm25"), LexicalConfig(), rows=4)
                    assert index.scores("rivers").shape == (4,)
                else:
                    assert header_dtype(str(tmp_path / "v.npy")) == np.float32
            except Exception as exc:  # every failure is collected and asserted on below
                errors.append(repr(exc))
                return

    threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
