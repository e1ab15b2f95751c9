"""A refresh reads only the input files whose size or modification time changed since
the listing behind the active generation; the others' documents are kept unread."""

import json
import os

import pyarrow.parquet as pq
import pytest

from evidex.refresh import read_state, refresh
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
