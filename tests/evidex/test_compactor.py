"""The stream's background compaction: one child at a time, at a lower CPU priority than
the windows, and one that fails is reported once, with nothing activated."""

import os
import time
import types

import pytest

from evidex.compactor import NICENESS, BackgroundCompaction
from pipelines.compact import MergePolicy
from store.activation import read_active


@pytest.mark.slow
def test_a_failed_background_compaction_is_reported_once(tmp_path):
    root = str(tmp_path / "root")
    # A policy that always calls for compaction, of a generation the root does not hold.
    compactor = BackgroundCompaction(root, policy=MergePolicy(max_segments=-1))
    manifest = types.SimpleNamespace(segments=[])
    try:
        note = compactor.maybe_start("20260101T000000.000000Z", manifest, {})
        assert note.startswith("compacting in the background") and compactor.running
        pid, mine = compactor._running.process.pid, os.getpriority(os.PRIO_PROCESS, 0)
        wanted, deadline = min(19, mine + NICENESS), time.monotonic() + 5
        while os.getpriority(os.PRIO_PROCESS, pid) != wanted and time.monotonic() < deadline:
            time.sleep(0.01)  # the child lowers its priority first thing
        assert os.getpriority(os.PRIO_PROCESS, pid) == wanted  # windows get the cores first
        assert compactor.maybe_start("20260101T000000.000000Z", manifest, {}) == ""  # one at a time
        compactor.wait(300)
        assert compactor.finished() is None and not compactor.running
        failure = compactor.take_failure()
        assert "background compaction of 20260101T000000.000000Z failed" in failure
        assert compactor.take_failure() == ""
    finally:
        compactor.stop()
    assert read_active(root) is None
