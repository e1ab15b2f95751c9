"""The stream's background compaction: one child at a time, and one that fails is
reported once, with nothing activated."""

import types

import pytest

from evidex.compactor import BackgroundCompaction
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
        assert compactor.maybe_start("20260101T000000.000000Z", manifest, {}) == ""  # one at a time
        compactor.wait(300)
        assert compactor.finished() is None and not compactor.running
        failure = compactor.take_failure()
        assert "background compaction of 20260101T000000.000000Z failed" in failure
        assert compactor.take_failure() == ""
    finally:
        compactor.stop()
    assert read_active(root) is None
