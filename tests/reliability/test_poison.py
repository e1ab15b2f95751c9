"""Poison corpus (issue 9, item 1) at the sizes the issue names.

600 ordinary JSONL records and ten ordinary text files plus hostile inputs, about
1.5% of the documents: zero bytes, invalid UTF-8, NUL bytes, bidi and zero-width
characters, 5,000-deep nested HTML, a ``.pdf`` that is not a PDF, a 200 MB text
file, a one-line 50 MB Markdown file, a 50 MB JSONL line and JSONL with broken
lines. The build runs in a child process (DirectRunner, ``--knowledge=false``: the
knowledge layer is not what this test is about) so that its own peak RSS is
measured, with the default dead-letter ratio (5%) and size limit (5 MB).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.build_index import BuildFailedError, run
from store.activation import read_active
from store.bundles import list_bundles
from tests.conftest import write_corpus

GOOD = {
    f"good{i}.txt": f"Good document number {i} explains how topic {i} works in plain words. "
    f"It has a second sentence about item {i} so that chunking has something to do."
    for i in range(10)
}
GOOD_RECORDS = 600
MB = 1_000_000

HOSTILE: dict[str, str | bytes] = {
    "empty.txt": b"",
    "latin1.txt": b"caf\xe9 cr\xe8me \xff\xfe not utf-8",
    "notpdf.pdf": b"this is plain text wearing a .pdf name\n",
    "broken.jsonl": b'{"_id": "ok-line", "text": "A valid JSONL record about ferries."}\n'
    b'{"_id": "cut", "text": "unterminated\n'
    b"[1, 2, 3]\n"
    b'{"_id": "bad-bytes", "text": "\xff\xfe"}\n'
    b'{"text": "a record without any id field"}\n',
}
# Written in pieces by the fixture: (name, size in bytes, one line?).
LARGE = [("huge.txt", 200 * MB, False), ("oneline.md", 50 * MB, True)]

# Valid text that is hostile to naive tooling: accepted, with exact spans.
ODD_BUT_VALID: dict[str, str | bytes] = {
    "nul.txt": "before\x00after: NUL bytes inside an otherwise normal sentence.",
    "bidi.txt": "Payment \u202eevil\u202c limit is \u200bRs\u200d 500 per\ufeff day \u2066x\u2069.",
    "nested.html": "<html><body>"
    + "<div>" * 5000
    + "<p>Deep nesting still has one readable sentence.</p>"
    + "</div>" * 5000
    + "</body></html>",
}

EXPECTED_DEAD = {
    "empty.txt": "empty",
    "latin1.txt": "undecodable",
    "notpdf.pdf": "broken_pdf",
    "huge.txt": "oversized",
    "oneline.md": "oversized",
    "broken.jsonl#L2": "malformed_json",
    "broken.jsonl#L3": "malformed_json",
    "broken.jsonl#L4": "undecodable",
    "broken.jsonl#L5": "missing_field",
    "records.jsonl#L301": "oversized",
}

PEAK_RSS_LIMIT_MB = 1536  # a build of this corpus without the hostile files peaks near 0.8 GB

# Runs one build in this child process and prints its own peak RSS. VmHWM belongs to
# the process's address space, which exec replaces; ru_maxrss would carry over the
# size of the (large) pytest process that forked it.
_CHILD = """
import json, sys
from pipelines.build_index import run
result = run(sys.argv[1:], bundle_id="poison")
with open("/proc/self/status", encoding="ascii") as status:
    hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"path": result.path, "peak_rss_mb": hwm_kb / 1024}))
"""


def _write_large(directory: Path, name: str, size: int, one_line: bool) -> None:
    piece = b"x" * MB if one_line else b"word " * (MB // 5)
    with open(directory / name, "wb") as handle:
        for _ in range(size // len(piece)):
            handle.write(piece)


def _records(directory: Path) -> None:
    with open(directory / "records.jsonl", "wb") as handle:
        for i in range(GOOD_RECORDS):
            if i == 300:  # one 50 MB line in the middle of an otherwise good file
                handle.write(b'{"_id": "giant", "text": "')
                for _ in range(50):
                    handle.write(b"y" * MB)
                handle.write(b'"}\n')
            record = {"_id": f"rec{i}", "text": f"Record {i} says that rule {i} applies."}
            handle.write(json.dumps(record).encode() + b"\n")


@pytest.fixture(scope="module")
def poison_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = write_corpus(
        tmp_path_factory.mktemp("poison"), {**GOOD, **HOSTILE, **ODD_BUT_VALID}
    )
    for name, size, one_line in LARGE:
        _write_large(directory, name, size, one_line)
    _records(directory)
    return directory


@pytest.fixture(scope="module")
def over_ratio_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("over"), {**GOOD, **HOSTILE, **ODD_BUT_VALID})


@pytest.mark.slow
def test_poison_corpus_builds_and_every_hostile_input_is_a_dead_letter(poison_corpus, tmp_path):
    child = subprocess.run(
        [
            *(sys.executable, "-c", _CHILD),
            *("--input", str(poison_corpus), "--root", str(tmp_path), "--knowledge=false"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    outcome = json.loads(child.stdout.strip().splitlines()[-1])
    path, peak = outcome["path"], outcome["peak_rss_mb"]
    dead = pq.read_table(os.path.join(path, "failures", "ingest.parquet")).to_pylist()
    got = {d["record_id"]: d["error_type"] for d in dead}
    assert got == EXPECTED_DEAD
    assert all(d["message"] and d["stage"] == "ingest" for d in dead)
    for stage in ("chunk", "embed"):
        assert (
            pq.ParquetFile(os.path.join(path, "failures", f"{stage}.parquet")).metadata.num_rows
            == 0
        )

    docs = {
        d["doc_id"]: d for d in pq.read_table(os.path.join(path, "documents.parquet")).to_pylist()
    }
    records = {f"rec{i}" for i in range(GOOD_RECORDS)}
    assert set(docs) == set(GOOD) | set(ODD_BUT_VALID) | {"ok-line"} | records
    assert "\x00" in docs["nul.txt"]["text"] and "\u202e" in docs["bidi.txt"]["text"]
    assert (
        docs["nested.html"]["text"]
        .strip()
        .endswith("Deep nesting still has one readable sentence.")
    )
    chunks = pq.read_table(os.path.join(path, "chunks.parquet")).to_pylist()
    assert {c["doc_id"] for c in chunks} == set(docs)
    for c in chunks:
        assert docs[c["doc_id"]]["text"][c["start"] : c["end"]] == c["text"]
    manifest = json.loads(Path(path, "manifest.json").read_text(encoding="utf-8"))
    assert manifest["dead_letter_counts"]["ingest"] == len(EXPECTED_DEAD)
    print(f"peak RSS {peak:.0f} MB")  # recorded in docs/reliability.md
    assert peak < PEAK_RSS_LIMIT_MB


@pytest.mark.slow
def test_above_the_bad_ratio_the_build_fails_and_the_active_bundle_is_untouched(
    over_ratio_corpus, validated_root, tmp_path
):
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    active_bytes = (root / "ACTIVE").read_bytes()
    before = (read_active(str(root)), list_bundles(str(root)))
    with pytest.raises(
        BuildFailedError, match=r"dead-letter ratio \d+\.\d% exceeds the limit 5\.0%"
    ):
        run(
            ["--input", str(over_ratio_corpus), "--root", str(root), "--knowledge=false"],
            bundle_id="too-bad",
        )
    assert (read_active(str(root)), list_bundles(str(root))) == before
    assert (root / "ACTIVE").read_bytes() == active_bytes
    history = [json.loads(h) for h in (root / "history.jsonl").read_text().splitlines()]
    assert [h["bundle_id"] for h in history] == ["b1"]
    assert not (root / "bundles" / "too-bad").exists()
