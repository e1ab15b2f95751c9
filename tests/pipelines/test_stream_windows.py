"""The windowed stream (``--engine beam``): each window's arrivals are processed inside
the running pipeline and committed as one segment. Driven by a ``TestStream`` of file
arrivals on the DirectRunner in streaming mode (event-time windows), against a root whose
first generation a refresh built, as the stream's first window does."""

import json
import shutil
import time
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window

from pipelines.refresh import read_state, refresh
from pipelines.stream_windows import _notified_paths, build_windowed_pipeline
from store.activation import read_active
from store.bundles import bundle_path, read_manifest
from store.regression import RegressionCase, add_case
from store.segments import live_revisions, open_segments

OWLS = "# Owls\n\nBarn owls hunt at night and locate mice by sound alone.\n"
GLASS = "Glass is made by melting sand with soda ash and lime, then cooling it fast.\n"
RUST = "# Rust\n\nIron rusts when it reacts with oxygen and water to form iron oxide.\n"
FEED = [
    {
        "_id": "ant",
        "title": "Ants",
        "text": "Ants leave scent trails that lead the colony to food.",
    },
    {"_id": "bee", "title": "Bees", "text": "Honey bees dance to tell the hive where flowers are."},
]
CAT = {"_id": "cat", "title": "Cats", "text": "Cats purr at a low frequency when they are content."}


def write_feed(path: Path, records: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def first_input(watch: Path) -> None:
    """The first input in ``watch``: written once, then restored from a copy with the
    same modification times, so the listing is the one behind the first generation."""
    pristine = watch.parent / "pristine"
    if not pristine.exists():
        pristine.mkdir()
        (pristine / "owls.md").write_text(OWLS, encoding="utf-8")
        (pristine / "glass.txt").write_text(GLASS, encoding="utf-8")
        write_feed(pristine / "feed.jsonl", FEED)
    for stale in watch.iterdir():
        stale.unlink()
    for original in pristine.iterdir():
        shutil.copy2(original, watch / original.name)


@pytest.fixture(scope="module")
def first_generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A watched input and a root whose active generation holds owls, glass and a feed of
    two records, with the knowledge layer (built by a refresh, as the first window is)."""
    base = tmp_path_factory.mktemp("windows")
    (base / "in").mkdir()
    first_input(base / "in")
    result = refresh(str(base / "in"), str(base / "first"))
    assert result.status == "activated", result.line()
    return base


@pytest.fixture
def case(first_generation: Path) -> Path:
    """The first generation's root copied to ``root``, beside its input as it was (the
    input stays where it was read: a document's source path is part of its state)."""
    first_input(first_generation / "in")
    shutil.rmtree(first_generation / "root", ignore_errors=True)
    shutil.copytree(first_generation / "first", first_generation / "root")
    return first_generation


def run_windows(
    case: Path,
    windows: list[list[str]],
    capsys: pytest.CaptureFixture,
    *,
    at: int = 0,
    build_args: tuple[str, ...] = (),
) -> list[str]:
    """Drop the named files of ``case/in``, one list per 10 s window from event time
    ``at``; the progress lines."""
    stream = TestStream().advance_watermark_to(at)
    for number, names in enumerate(windows):
        start = at + number * 10
        stream = stream.add_elements(
            [window.TimestampedValue(str(case / "in" / n), start + 1) for n in names]
        ).advance_watermark_to(start + 10)
    stream = stream.advance_watermark_to_infinity()
    options = PipelineOptions([])
    options.view_as(StandardOptions).streaming = True
    capsys.readouterr()
    with beam.Pipeline(options=options) as pipeline:
        build_windowed_pipeline(
            pipeline,
            input_pattern=str(case / "in"),
            root=str(case / "root"),
            window_seconds=10,
            poll_seconds=1,
            stop_after=None,
            build_args=build_args,
            arrivals=pipeline | stream,
        )
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("window ")]


def generation(case: Path) -> tuple[str, object, dict[str, str]]:
    active = read_active(str(case / "root"))
    assert active is not None
    path = bundle_path(str(case / "root"), active)
    manifest = read_manifest(path)
    live = live_revisions(open_segments(path, manifest, verify=False))
    return active, manifest, {doc_id: doc.revision for doc_id, doc in live.items()}


def test_each_window_becomes_one_segment_of_its_new_and_changed_documents(case, capsys):
    before, _, first = generation(case)
    (case / "in" / "owls.md").write_text(OWLS.replace("mice", "voles"), encoding="utf-8")
    (case / "in" / "rust.md").write_text(RUST, encoding="utf-8")
    (case / "in" / "cats.md").write_text("# Cats\n\n" + CAT["text"] + "\n", encoding="utf-8")

    lines = run_windows(case, [["owls.md", "rust.md"], ["cats.md"]], capsys)

    assert [line.split(": ")[1] for line in lines] == ["activated", "activated"]
    assert "1 new, 1 changed, 0 deleted, 2 chunks embedded" in lines[0]
    assert "1 new, 0 changed, 0 deleted, 1 chunks embedded" in lines[1]
    active, manifest, live = generation(case)
    assert set(live) == {"owls.md", "glass.txt", "ant", "bee", "rust.md", "cats.md"}
    assert live["owls.md"] != first["owls.md"]
    assert all(live[d] == first[d] for d in ("glass.txt", "ant", "bee"))
    # The window's own segment holds exactly what it added; the first generation's
    # segment is kept with owls' old revision deleted, and the first window's segment too.
    own = manifest.segments[-1]
    assert own.bundle_id == active and manifest.delta["new"] == 1
    assert manifest.delta["unchanged"] == 5 and manifest.delta["changed"] == 0
    kept = {ref.bundle_id: ref.deleted_documents for ref in manifest.segments[:-1]}
    assert kept[before] == ["owls.md"]
    assert read_state(str(case / "root"))["bundle_id"] == active


def test_a_window_deletes_gone_files_and_records_and_skips_what_is_live(case, capsys):
    (case / "in" / "glass.txt").unlink()
    write_feed(case / "in" / "feed.jsonl", [FEED[0], CAT])  # bee removed, cat added
    (case / "in" / "owls.md").write_text(OWLS, encoding="utf-8")  # rewritten, same text

    lines = run_windows(case, [["feed.jsonl", "owls.md"]], capsys)

    assert "1 new, 0 changed, 2 deleted, 1 chunks embedded" in lines[0], lines
    _, manifest, live = generation(case)
    assert set(live) == {"owls.md", "ant", "cat"}
    assert manifest.delta["texts_embedded"] == 1  # ant and owls were live as they are


def test_a_document_live_from_another_file_is_a_dead_lettered_duplicate(case, capsys):
    import pyarrow.parquet as pq

    _, _, first = generation(case)
    write_feed(case / "in" / "more.jsonl", [{**FEED[0], "text": "Ants farm aphids."}, CAT])

    # One dead letter beside one new document: past the default ratio on this tiny input.
    lines = run_windows(case, [["more.jsonl"]], capsys, build_args=("--max_bad_ratio=0.5",))

    assert "1 new, 0 changed, 0 deleted" in lines[0], lines
    active, _, live = generation(case)
    assert live["ant"] == first["ant"] and "cat" in live
    letters = pq.read_table(
        Path(bundle_path(str(case / "root"), active)) / "failures" / "ingest.parquet"
    ).to_pylist()
    assert [(d["record_id"], d["error_type"]) for d in letters] == [("ant", "duplicate_id")]


def test_a_stream_restarted_over_committed_arrivals_does_no_work(case, capsys):
    """A restarted stream lists every file again: what a committed generation holds in
    the same state is skipped, so nothing is duplicated or embedded again."""
    (case / "in" / "rust.md").write_text(RUST, encoding="utf-8")
    run_windows(case, [["rust.md"]], capsys)
    active, _, live = generation(case)

    lines = run_windows(case, [["owls.md", "glass.txt", "feed.jsonl", "rust.md"]], capsys)

    assert "unchanged" in lines[0] and "0 chunks embedded" in lines[0], lines
    assert generation(case)[0] == active
    assert generation(case)[2] == live


def test_a_refused_window_leaves_the_active_generation(case, capsys):
    active, _, live = generation(case)
    add_case(str(case / "root"), RegressionCase(query="How is glass made?", expect=("glass.txt",)))
    (case / "in" / "glass.txt").unlink()
    (case / "in" / "rust.md").write_text(RUST, encoding="utf-8")

    lines = run_windows(case, [["rust.md"]], capsys)

    assert ": refused:" in lines[0] and "validation failed" in lines[0], lines
    assert generation(case)[0] == active and generation(case)[2] == live


def test_a_change_whose_arrival_was_lost_is_caught_by_a_refresh(case, capsys):
    """A file changed before the window began that no window read (a source that dropped
    its event) is not silently left out: the window goes to a refresh of the input."""
    (case / "in" / "rust.md").write_text(RUST, encoding="utf-8")
    now = int(time.time()) // 10 * 10 + 10  # a window that begins after the change

    lines = run_windows(case, [["owls.md"]], capsys, at=now)

    assert "1 changed file(s) never arrived" in lines[0], lines
    assert "rust.md" in generation(case)[2]


def test_a_window_over_a_generation_without_query_encoder_exports_one(tmp_path, capsys):
    watch = tmp_path / "in"
    watch.mkdir()
    (watch / "owls.md").write_text(OWLS, encoding="utf-8")
    first = refresh(str(watch), str(tmp_path / "root"), ["--query_encoder_artifact=false"])
    assert first.status == "activated", first.line()
    assert generation(tmp_path)[1].query_encoder is None
    (watch / "rust.md").write_text(RUST, encoding="utf-8")

    lines = run_windows(tmp_path, [["rust.md"]], capsys)

    assert ": activated:" in lines[0] and "refresh" not in lines[0], lines
    assert generation(tmp_path)[1].query_encoder is not None


def test_object_notifications_name_the_finalized_objects():
    class Message:
        def __init__(self, attributes: dict[str, str], data: bytes = b"") -> None:
            self.attributes, self.data = attributes, data

    finalized = Message({"eventType": "OBJECT_FINALIZE", "bucketId": "b", "objectId": "in/a.md"})
    deleted = Message({"eventType": "OBJECT_DELETE", "bucketId": "b", "objectId": "in/a.md"})
    payload = Message({}, json.dumps({"bucket": "b", "name": "in/c.md"}).encode())
    assert list(_notified_paths(finalized)) == ["gs://b/in/a.md"]
    assert list(_notified_paths(deleted)) == []
    assert list(_notified_paths(payload)) == ["gs://b/in/c.md"]
