"""Streaming mode end to end: a real stream process watching a directory, one delta bundle
per window, and a kill/restart that neither loses nor duplicates a document."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.refresh import read_state
from store.activation import read_active
from store.bundles import bundle_path, read_manifest
from store.segments import live_revisions, open_segments

DOCS = {
    "owls.md": "# Owls\n\nBarn owls hunt at night and locate mice by sound alone, as Masakazu "
    "Konishi showed.",
    "glass.txt": "Glass is made by melting sand with soda ash and lime, then cooling it fast.",
    "rust.md": "# Rust\n\nIron rusts when it reacts with oxygen and water to form iron oxide. "
    "Antoine Lavoisier named oxygen.",
}
WAIT = 240


# Run the real stream, but stop its commit just before ``ACTIVE`` is swapped: it writes
# the file named by argv[1] and waits there forever, so a kill lands inside the commit
# however fast the commit is (the stream itself is unchanged).
HOLD_BEFORE_SWAP = """
import runpy, sys, time
from pathlib import Path
from store.pointer import LocalPointerStore

reached = Path(sys.argv.pop(1))

def held(self, expected, new):
    reached.write_text(new)
    while True:
        time.sleep(60)

LocalPointerStore.swap_locked = held
sys.argv[0] = "pipelines.stream"
runpy.run_module("pipelines.stream", run_name="__main__", alter_sys=True)
"""


# Run the real stream, but stop a window inside its knowledge write: the mentions are
# written as the parent's base and a delta, the entities' base is linked, then it writes
# the file named by argv[1] and waits there forever.
HOLD_IN_KNOWLEDGE_WRITE = """
import runpy, sys, time
from pathlib import Path
from store import knowledge_layers, storage

reached = Path(sys.argv.pop(1))
real = knowledge_layers.write_change

def held(staging, name, parent, **kwargs):
    if name == "entities.parquet":
        base = knowledge_layers.layer_files(name)[0]
        source = base if knowledge_layers.is_layered(parent, name) else name
        storage.reuse_file(storage.join(parent, source), storage.join(staging, base))
        reached.write_text(staging)
        while True:
            time.sleep(60)
    return real(staging, name, parent, **kwargs)

knowledge_layers.write_change = held
sys.argv[0] = "pipelines.stream"
runpy.run_module("pipelines.stream", run_name="__main__", alter_sys=True)
"""


def start_stream(
    watch: Path,
    root: Path,
    *extra: str,
    hold_before_swap: Path | None = None,
    hold_in_knowledge: Path | None = None,
) -> subprocess.Popen:
    log = open(root.parent / f"stream-{time.monotonic_ns()}.log", "w")  # noqa: SIM115
    launch = ["-m", "pipelines.stream"]
    if hold_before_swap is not None:
        launch = ["-c", HOLD_BEFORE_SWAP, str(hold_before_swap)]
    if hold_in_knowledge is not None:
        launch = ["-c", HOLD_IN_KNOWLEDGE_WRITE, str(hold_in_knowledge)]
    return subprocess.Popen(
        [sys.executable, *launch, "--input", str(watch), "--root", str(root),
         "--window", "4s", "--poll", "1s", "--stop_after", "900s", *extra],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )  # fmt: skip


def active_documents(root: Path) -> dict[str, str]:
    active = read_active(str(root))
    if active is None:
        return {}
    path = bundle_path(str(root), active)
    segments = open_segments(path, read_manifest(path), verify=False)
    return {doc_id: doc.revision for doc_id, doc in live_revisions(segments).items()}


def wait_for(root: Path, expected: set[str], *, changed_from: dict[str, str] | None = None):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        docs = active_documents(root)
        if set(docs) == expected and (
            changed_from is None
            or any(changed_from.get(d) not in (None, r) for d, r in docs.items())
        ):
            return docs
        time.sleep(1)
    raise AssertionError(f"active bundle never held exactly {sorted(expected)}")


def top_doc(root: Path, query: str, model) -> str:
    from query import load_bundle, retrieve

    return retrieve(load_bundle(str(root), model=model), query, k=1)[0].doc_id


@pytest.mark.slow
def test_each_window_publishes_exactly_the_documents_present(tmp_path, query_encoder):
    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    (watch / "owls.md").write_text(DOCS["owls.md"], encoding="utf-8")
    (watch / "glass.txt").write_text(DOCS["glass.txt"], encoding="utf-8")
    stream = start_stream(watch, root)
    try:
        first = wait_for(root, {"owls.md", "glass.txt"})
        assert top_doc(root, "How do owls find mice?", query_encoder) == "owls.md"

        (watch / "glass.txt").write_text(DOCS["glass.txt"] + " It is brittle.", encoding="utf-8")
        (watch / "rust.md").write_text(DOCS["rust.md"], encoding="utf-8")
        second = wait_for(root, {"owls.md", "glass.txt", "rust.md"}, changed_from=first)
        assert second["glass.txt"] != first["glass.txt"]
        assert second["owls.md"] == first["owls.md"]
        assert top_doc(root, "Why does iron rust?", query_encoder) == "rust.md"

        (watch / "owls.md").unlink()
        wait_for(root, {"glass.txt", "rust.md"})
        assert top_doc(root, "How do owls find mice?", query_encoder) != "owls.md"
        state = read_state(str(root))
        assert state["bundle_id"] == read_active(str(root))
    finally:
        stream.kill()
        stream.wait()


@pytest.mark.slow
def test_a_killed_stream_restarts_without_losing_or_duplicating(tmp_path):
    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    (watch / "owls.md").write_text(DOCS["owls.md"], encoding="utf-8")
    stream = start_stream(watch, root, "--knowledge=false")
    try:
        wait_for(root, {"owls.md"})
        stream.send_signal(signal.SIGKILL)  # between windows
        stream.wait()
        (watch / "glass.txt").write_text(DOCS["glass.txt"], encoding="utf-8")
        # Kill it again during the commit: the window's generation is written and
        # validated, and the stream is about to swap ACTIVE.
        reached = tmp_path / "swap-reached"
        stream = start_stream(watch, root, "--knowledge=false", hold_before_swap=reached)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not reached.exists():
            assert stream.poll() is None, "the stream exited before its commit"
            time.sleep(0.2)
        assert reached.exists(), "the stream never reached its commit"
        assert Path(bundle_path(str(root), reached.read_text())).is_dir()  # written, not active
        stream.send_signal(signal.SIGKILL)
        stream.wait()
        assert set(active_documents(root)) == {"owls.md"}  # the half-committed window is not active
        (watch / "rust.md").write_text(DOCS["rust.md"], encoding="utf-8")
        stream = start_stream(watch, root, "--knowledge=false")
        docs = wait_for(root, {"owls.md", "glass.txt", "rust.md"})
        assert len(docs) == 3
    finally:
        stream.kill()
        stream.wait()


BEES = (
    "# Bees\n\nHoney bees live in colonies led by a queen. Worker bees collect nectar from "
    "clover, lavender and apple blossoms, and the colony turns it into honey in the hive. "
    "Karl von Frisch showed that bees dance to tell each other where flowers are. Beekeepers "
    "in Slovenia and New Zealand keep the Carniolan bee and the Italian bee."
)


@pytest.mark.slow
def test_a_stream_killed_inside_a_knowledge_write_restarts_with_its_knowledge(tmp_path):
    from query.knowledge import load_knowledge
    from store import knowledge_layers

    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    (watch / "owls.md").write_text(DOCS["owls.md"], encoding="utf-8")
    (watch / "bees.md").write_text(BEES, encoding="utf-8")
    reached = tmp_path / "knowledge-write-reached"
    layered = ("--fold_share", "1")  # a tiny corpus: its windows are large changes
    stream = start_stream(watch, root, *layered, hold_in_knowledge=reached)
    try:
        wait_for(root, {"owls.md", "bees.md"})  # the first window builds its knowledge whole
        first = read_active(str(root))
        (watch / "rust.md").write_text(DOCS["rust.md"], encoding="utf-8")
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not reached.exists():
            assert stream.poll() is None, "the stream exited before its knowledge write"
            time.sleep(0.2)
        assert reached.exists(), "the stream never reached its knowledge write"
        stream.send_signal(signal.SIGKILL)
        stream.wait()
        assert read_active(str(root)) == first  # the half-written window is not active
        stream = start_stream(watch, root, *layered)
        wait_for(root, {"owls.md", "bees.md", "rust.md"})
    finally:
        stream.kill()
        stream.wait()
    path = bundle_path(str(root), read_active(str(root)))
    assert knowledge_layers.is_layered(path, "mentions.parquet")
    mentions = knowledge_layers.read_table(path, "mentions.parquet")
    assert set(mentions["doc_id"].to_pylist()) == {"owls.md", "bees.md", "rust.md"}
    seen = lambda chunks: True  # noqa: E731
    assert load_knowledge(path).resolve("Antoine Lavoisier", seen)


def compactions(root: Path) -> list[int]:
    """Pids of the background compactions of ``root`` (their command lines name it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not a process
        if b"compact" in argv and str(root).encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_stream_killed_during_a_background_compaction_loses_nothing(tmp_path):
    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    (watch / "owls.md").write_text(DOCS["owls.md"], encoding="utf-8")
    stream = start_stream(watch, root, "--knowledge=false", "--max_segments", "1")
    try:
        wait_for(root, {"owls.md"})
        (watch / "glass.txt").write_text(DOCS["glass.txt"], encoding="utf-8")
        wait_for(root, {"owls.md", "glass.txt"})  # two segments: compaction starts beside
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not compactions(root):
            time.sleep(0.2)
        children = compactions(root)
        assert children, "no background compaction started"
        before = read_active(str(root))
        stream.send_signal(signal.SIGKILL)
        stream.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and compactions(root):
            time.sleep(0.2)
        assert not compactions(root), "the compaction outlived the stream"
        assert read_active(str(root)) == before
        assert set(active_documents(root)) == {"owls.md", "glass.txt"}
        (watch / "rust.md").write_text(DOCS["rust.md"], encoding="utf-8")
        stream = start_stream(watch, root, "--knowledge=false")
        docs = wait_for(root, {"owls.md", "glass.txt", "rust.md"})
        assert len(docs) == 3
    finally:
        stream.kill()
        stream.wait()


@pytest.mark.slow
def test_the_beam_streaming_pipeline_publishes_the_watched_input(tmp_path):
    """``--engine beam``: MatchContinuously -> windows -> the committer, whose first
    generation a refresh builds. On the DirectRunner the windows fire once the source
    stops (see docs/runners.md), so this checks the wiring."""
    from pipelines.stream import run

    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    (watch / "owls.md").write_text(DOCS["owls.md"], encoding="utf-8")
    run(["--input", str(watch), "--root", str(root), "--engine", "beam", "--window", "2s",
         "--poll", "1s", "--stop_after", "5s", "--knowledge=false"])  # fmt: skip
    assert set(active_documents(root)) == {"owls.md"}
    assert read_state(str(root))["bundle_id"] == read_active(str(root))


def test_object_notifications_replace_polling_on_the_beam_engine(tmp_path):
    """``--notifications``: the Pub/Sub subscription of the bucket's object notifications
    is the pipeline's source instead of the polled listing; the windows, the in-pipeline
    processing and the committer are the same. (Pub/Sub cannot run here: the pipeline
    is built, not run.)"""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.stream import run
    from pipelines.stream_windows import build_windowed_pipeline

    def labels(notifications):
        pipeline = beam.Pipeline(options=PipelineOptions(["--streaming"]))
        build_windowed_pipeline(
            pipeline, input_pattern=str(tmp_path), root=str(tmp_path / "root"),
            window_seconds=10, poll_seconds=2, stop_after=None, notifications=notifications,
        )  # fmt: skip
        return {t.full_label for t in pipeline.transforms_stack[0].parts}

    polled = labels(None)
    notified = labels("projects/my-project/subscriptions/evidex-inbox")
    assert "WatchInput" in polled and "Notifications" not in polled
    assert "Notifications" in notified and "WatchInput" not in notified
    steps = {"Window", "ParseArrivals", "SkipLive", "ChunkDocuments", "EmbedChunks"}
    assert steps | {"ExtractKnowledge", "GatherWindow", "CommitWindow"} <= polled & notified
    with pytest.raises(SystemExit, match="--engine beam"):
        run(["--input", str(tmp_path), "--notifications", "projects/p/subscriptions/s"])


def test_a_stream_keeps_in_memory_only_what_its_next_window_reads(two_bundle_root):
    import pyarrow.parquet as pq

    from pipelines.stream_windows import ROWS, retain_active_tables
    from store import table_cache
    from store.segments import EXTRACTED_STATEMENTS

    root = str(two_bundle_root)
    assert read_active(root) == "b1" and EXTRACTED_STATEMENTS in ROWS
    active, other = bundle_path(root, "b1"), bundle_path(root, "b2")
    files = [os.path.join(b, name) for b in (active, other) for name in ROWS]
    files += [os.path.join(other, "entities.parquet")]
    assert all(os.path.isfile(f) for f in files), files
    table_cache.disable()
    table_cache.enable(64 << 20)
    try:
        for path in files:
            table_cache.read(path, None, lambda path=path: pq.read_table(path))
        retain_active_tables(root)
        assert table_cache.stats()["entries"] == len(ROWS)
        loads: list[str] = []

        def load(path: str):
            loads.append(path)
            return pq.read_table(path)

        for path in files[: len(ROWS)]:  # the active generation's rows: from memory
            table_cache.read(path, None, lambda path=path: load(path))
        assert loads == []
        table_cache.read(files[-1], None, lambda: load(files[-1]))
        assert loads == [files[-1]]  # another generation's: read again
    finally:
        table_cache.disable()
