"""Kill the build at many points: the active bundle never changes, and nothing partial
can ever be activated."""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from query import load_bundle, retrieve
from store.activation import ActivationError, activate, read_active
from store.bundles import bundle_path, list_bundles, verify_bundle

KILL_POINTS = 20
QUERIES = ("Which river reaches the Black Sea?", "How is green tea made?")


def _start_build(corpus: str, root: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.build_index", "--input", corpus, "--root", root],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # so SIGKILL reaches every process the build started
    )


def _answers(root: str, model) -> list[list[tuple[str, int, int]]]:
    bundle = load_bundle(root, model=model)
    return [[(e.doc_id, e.start, e.end) for e in retrieve(bundle, q, k=3)] for q in QUERIES]


@pytest.mark.slow
def test_killing_the_build_anywhere_leaves_the_active_bundle_alone(
    validated_root, tiny_corpus, tmp_path, query_encoder
):
    root = str(tmp_path / "root")
    shutil.copytree(validated_root, root)
    baseline = _answers(root, query_encoder)

    started = time.monotonic()
    assert _start_build(str(tiny_corpus), root).wait(timeout=300) == 0
    duration = time.monotonic() - started
    completed = set(list_bundles(root)) - {"b1"}

    rng = random.Random(20261130)
    points = sorted(rng.uniform(0.05, 1.0) * duration for _ in range(KILL_POINTS))
    for pair in range(0, KILL_POINTS, 2):  # two builds at a time to halve the wall time
        procs = [(_start_build(str(tiny_corpus), root), p) for p in points[pair : pair + 2]]
        begin = time.monotonic()
        for proc, at in procs:
            time.sleep(max(0.0, at - (time.monotonic() - begin)))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)

        assert read_active(root) == "b1"
        assert _answers(root, query_encoder) == baseline
        for bundle_id in set(list_bundles(root)) - {"b1"}:
            verify_bundle(bundle_path(root, bundle_id))  # a published bundle is never partial
            with pytest.raises(ActivationError, match="not been validated"):
                activate(root, bundle_id)
        staging = os.path.join(root, "staging")
        for leftover in os.listdir(staging) if os.path.isdir(staging) else []:
            with pytest.raises(ActivationError):
                activate(root, leftover)
    assert completed, "the reference build should have published a bundle"
