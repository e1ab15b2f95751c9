"""Staging folders: heartbeats of running builds, cleanup of failed ones, gc of stale ones."""

import json
import os
import time
from pathlib import Path

from evidex.cli import main
from store import staging


def _stage(root, bundle_id: str, *, beat: float | None = None) -> None:
    folder = root / "staging" / bundle_id
    (folder / "failures").mkdir(parents=True)
    (folder / "chunks.parquet").write_bytes(b"partial")
    (folder / "failures" / "ingest.parquet").write_bytes(b"dead letters")
    if beat is not None:
        record = {"time": beat, "host": "h", "pid": 1}
        (root / "staging" / f"{bundle_id}.heartbeat").write_text(json.dumps(record))


def test_a_running_builds_heartbeat_keeps_its_folder_from_gc(tmp_path):
    root = tmp_path
    now = 1_000_000.0
    _stage(root, "dead", beat=now - 3600)
    _stage(root, "old-no-beat")
    old = now - 7200
    for parent, _dirs, files in os.walk(root / "staging" / "old-no-beat"):
        for name in [*files, "."]:
            os.utime(os.path.join(parent, name), (old, old))
    with staging.heartbeat(str(root), "live", clock=lambda: now - 5):
        _stage(root, "live")
        assert (root / "staging" / "live.heartbeat").exists()
        assert staging.stale(str(root), older_than_s=600, now=now) == ["dead", "old-no-beat"]
        assert staging.collect(str(root), older_than_s=600, now=now, dry_run=True) == [
            "dead",
            "old-no-beat",
        ]
        assert (root / "staging" / "dead").exists()
        assert staging.collect(str(root), older_than_s=600, now=now) == ["dead", "old-no-beat"]
        assert sorted(os.listdir(root / "staging")) == ["live", "live.heartbeat"]
    assert not (root / "staging" / "live.heartbeat").exists()  # the build ended


def test_the_heartbeat_is_refreshed_while_the_build_runs(tmp_path):
    def beat_time(path: str) -> float:
        return json.loads(Path(path).read_text())["time"]

    ticks = iter(range(1_000_000))
    with staging.heartbeat(str(tmp_path), "b", interval_s=0.01, clock=lambda: next(ticks)) as path:
        deadline = time.monotonic() + 10
        while beat_time(path) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert beat_time(path) >= 2  # rewritten by the thread, not only at the start


def test_discard_keeps_only_the_failures_when_asked(tmp_path):
    _stage(tmp_path, "a")
    _stage(tmp_path, "b")
    staging.discard(str(tmp_path), "a", keep_failures=True)
    staging.discard(str(tmp_path), "b")
    kept = tmp_path / "staging" / "a"
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*")) == [
        "failures",
        "failures/ingest.parquet",
    ]
    assert not (tmp_path / "staging" / "b").exists()


def test_gc_command_removes_stale_staging_without_touching_bundles(tmp_path, capsys):
    _stage(tmp_path, "dead", beat=time.time() - 3600)
    assert main(["gc", "--root", str(tmp_path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload == {"deleted": [], "staging_deleted": ["dead"], "dry_run": False}
    assert not (tmp_path / "staging" / "dead").exists()
    assert not (tmp_path / "staging" / "dead.heartbeat").exists()
