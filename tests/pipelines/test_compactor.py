"""The stream's background compaction: one child at a time, at a lower CPU priority than
the windows, and one that fails is reported once, with nothing activated."""

import os
import time
import types

import pytest

from pipelines.compact import MergePolicy
from pipelines.compactor import NICENESS, BackgroundCompaction
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


def test_a_refused_compaction_says_which_checks_failed(tmp_path):
    """The child's report (``evidex compact --json``) names the failed checks: the
    progress line quotes them and the log keeps the report."""
    import json
    import subprocess
    import sys
    import tempfile

    from pipelines.compactor import _Running

    report = {
        "compacted": True,
        "validation": "failed",
        "failed_checks": [{"name": "ann.mean_recall@10", "observed": 0.975}],
    }
    child = f"import sys; print({json.dumps(json.dumps(report))}); sys.exit(1)"
    compactor = BackgroundCompaction(str(tmp_path))
    # As maybe_start opens them: finished() closes both.
    out = tempfile.TemporaryFile()  # noqa: SIM115
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115
        prefix="evidex-compact-", suffix=".log", delete=False
    )
    process = subprocess.Popen([sys.executable, "-c", child], stdout=out, stderr=log)
    compactor._running = _Running(process, "b1", {}, out, log)
    process.wait(60)
    try:
        assert compactor.finished() is None
        failure = compactor.take_failure()
        assert "failed (exit 1, validation failed: ann.mean_recall@10 = 0.975)" in failure
        with open(log.name, encoding="utf-8") as handle:
            assert json.loads(handle.read())["failed_checks"] == report["failed_checks"]
    finally:
        os.unlink(log.name)
