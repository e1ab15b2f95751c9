"""A refresh reads only the input files whose size or modification time changed since
the listing behind the active generation; the others' documents are kept unread."""

import json
import os

import pyarrow.parquet as pq
import pytest

from pipelines.refresh import read_state, refresh
from store.activation import read_active
from store.bundles import FAILURES_DIR, bundle_path, read_manifest
from store.segments import live_revisions, open_segments

FAST = ["--knowledge=false", "--max_bad_ratio=0.5"]  # one duplicate below is a dead letter


def live(root):
    path = bundle_path(str(root), read_active(str(root)))
    return live_revisions(open_segments(path, read_manifest(path), verify=False))


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.mark.slow
def test_a_refresh_reads_only_changed_files_and_keeps_the_rest_unread(tmp_path):
    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    (watch / "owls.txt").write_text("Barn owls hunt at night by sound alone.", encoding="utf-8")
    write_jsonl(
        watch / "feed.jsonl",
        [{"_id": "g1", "title": "Glass", "text": "Glass is made from sand and soda ash."},
         {"_id": "r1", "title": "Rust", "text": "Iron rusts in water and oxygen."}],
    )  # fmt: skip
    first = refresh(str(watch), str(root), FAST)
    assert first.status == "activated" and first.new == 3
    before = live(root)
    files = read_state(str(root))["files"]
    assert files.keys() == {str(watch / "owls.txt"), str(watch / "feed.jsonl")}

    # Same size and modification time: the file counts as untouched and is not read, so
    # an edit that keeps both (only possible by hand, as here) is not seen.
    owls = watch / "owls.txt"
    stat = owls.stat()
    owls.write_text("Barn owls hunt at night by SOUND alone.", encoding="utf-8")
    os.utime(owls, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # The feed changes: one record edited, one removed, one new; and a new file arrives
    # claiming the id of a document in the untouched file.
    write_jsonl(
        watch / "feed.jsonl",
        [{"_id": "g1", "title": "Glass", "text": "Glass is made from sand, soda ash and lime."},
         {"_id": "t1", "title": "Tea", "text": "Green tea is steamed soon after picking."}],
    )  # fmt: skip
    (watch / "bees.jsonl").write_text(
        json.dumps({"_id": "owls.txt", "title": "Bees", "text": "Bees dance."}) + "\n",
        encoding="utf-8",
    )
    second = refresh(str(watch), str(root), FAST)
    assert second.status == "activated", second.reason
    after = live(root)
    assert set(after) == {"owls.txt", "g1", "t1"}
    assert after["owls.txt"].revision == before["owls.txt"].revision  # kept, unread
    assert after["g1"].revision != before["g1"].revision
    assert (second.new, second.changed, second.deleted) == (1, 1, 1)
    # (Two of the first segment's three documents are gone, so the merge policy compacted
    # the refreshed generation: its dead letters are in the bundle the refresh built.)
    assert "compacted" in second.reason
    built = read_manifest(bundle_path(str(root), second.bundle_id)).parent_bundle_id
    failures = pq.read_table(
        os.path.join(bundle_path(str(root), built), FAILURES_DIR, "ingest.parquet")
    ).to_pylist()
    assert [(f["record_id"], f["error_type"]) for f in failures] == [("owls.txt", "duplicate_id")]
    assert str(owls) in failures[0]["message"]

    # Once its modification time moves, the file is read again and the edit lands.
    os.utime(owls, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    third = refresh(str(watch), str(root), FAST)
    assert third.status == "activated" and third.changed == 1
    assert live(root)["owls.txt"].revision != before["owls.txt"].revision


@pytest.mark.slow
def test_compaction_runs_beside_the_windows_and_they_rebase_onto_it(tmp_path):
    from pipelines.compact import MergePolicy
    from pipelines.compactor import BackgroundCompaction

    watch, root = tmp_path / "in", str(tmp_path / "root")
    watch.mkdir()
    texts = {
        "owls.txt": "Barn owls hunt at night by sound alone.",
        "glass.txt": "Glass is made from sand and soda ash in a furnace.",
        "rust.txt": "Iron rusts when water and oxygen reach it.",
        "tea.txt": "Green tea leaves are steamed soon after picking.",
        "bees.txt": "Honey bees dance to tell the hive where flowers are.",
    }

    def land(name):
        (watch / name).write_text(texts[name], encoding="utf-8")

    compactor = BackgroundCompaction(root, policy=MergePolicy(max_segments=1))
    try:
        land("owls.txt")
        assert refresh(str(watch), root, compactor=compactor).status == "activated"
        land("glass.txt")
        second = refresh(str(watch), root, compactor=compactor)
        assert "compacting in the background" in second.reason and compactor.running
        compactor.wait(600)
        # Nothing activated meanwhile: the compacted generation takes the source's place.
        third = refresh(str(watch), root, compactor=compactor)
        assert third.status == "activated" and third.reason.startswith("compacted into")
        compacted = read_active(root)
        assert read_manifest(bundle_path(root, compacted)).parent_bundle_id == second.bundle_id
        assert len(read_manifest(bundle_path(root, compacted)).segments) == 1

        land("rust.txt")
        fourth = refresh(str(watch), root, compactor=compactor)  # 2 segments: compacts again
        assert compactor.running
        land("tea.txt")
        fifth = refresh(str(watch), root, compactor=compactor)  # a window beside it
        assert fifth.status == "activated" and fifth.new == 1
        compactor.wait(600)
        land("bees.txt")
        sixth = refresh(str(watch), root, compactor=compactor)
    finally:
        compactor.stop()
    # The window after the compaction builds on it: tea (added by a window meanwhile)
    # is read again into the new segment without being embedded again, and the windows'
    # segments are gone from the generation.
    assert sixth.status == "activated" and "rebased onto compacted" in sixth.reason
    manifest = read_manifest(bundle_path(root, sixth.bundle_id))
    rebased_onto = manifest.parent_bundle_id
    assert read_manifest(bundle_path(root, rebased_onto)).parent_bundle_id == fourth.bundle_id
    assert [s.bundle_id for s in manifest.segments] == [rebased_onto, sixth.bundle_id]
    assert sorted(live(root)) == sorted(texts)
    assert manifest.delta["new"] + manifest.delta["changed"] == 2  # tea again, and bees
    chunks = pq.read_table(os.path.join(bundle_path(root, sixth.bundle_id), "chunks.parquet"))
    assert set(chunks["doc_id"].to_pylist()) == {"tea.txt", "bees.txt"}
    assert sixth.chunks_embedded == chunks["doc_id"].to_pylist().count("bees.txt")


@pytest.mark.slow
def test_explicit_deletes_reach_unread_files_and_can_be_taken_back(tmp_path):
    watch, root = tmp_path / "in", tmp_path / "root"
    watch.mkdir()
    owls = watch / "owls.txt"
    owls.write_text("Barn owls hunt at night by sound alone.", encoding="utf-8")
    feed = [
        {"_id": "g1", "title": "Glass", "text": "Glass is made from sand and soda ash."},
        {"_id": "r1", "title": "Rust", "text": "Iron rusts in water and oxygen."},
    ]
    write_jsonl(watch / "feed.jsonl", feed)
    assert refresh(str(watch), str(root), FAST).new == 3

    # A tombstone file deletes the document of a file that is not read again.
    (watch / "batch.tombstone").write_text("owls.txt\n", encoding="utf-8")
    second = refresh(str(watch), str(root), FAST)
    assert second.status == "activated", second.reason
    assert set(live(root)) == {"g1", "r1"} and second.deleted == 1
    # A delete record appended to the feed deletes its id.
    write_jsonl(watch / "feed.jsonl", [*feed, {"_id": "r1", "deleted": True}])
    third = refresh(str(watch), str(root), FAST)
    assert set(live(root)) == {"g1"} and third.deleted == 1
    manifest = read_manifest(bundle_path(str(root), third.bundle_id))
    assert manifest.delta["deleting_files"] == [
        str(watch / "batch.tombstone"),
        str(watch / "feed.jsonl"),
    ]
    # The deleted file changes and is read again: the tombstone, unchanged, still holds.
    stat = owls.stat()
    owls.write_text("Barn owls hunt at night by hearing alone.", encoding="utf-8")
    os.utime(owls, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    fourth = refresh(str(watch), str(root), FAST)
    assert fourth.status == "activated", fourth.reason
    assert set(live(root)) == {"g1"}
    # Taking the tombstone away brings the document back from its unchanged file.
    (watch / "batch.tombstone").unlink()
    fifth = refresh(str(watch), str(root), FAST)
    assert fifth.status == "activated", fifth.reason
    assert set(live(root)) == {"g1", "owls.txt"} and fifth.new == 1
