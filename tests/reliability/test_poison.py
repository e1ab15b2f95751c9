"""Poison corpus (issue 9, item 1), scaled to two shared cores.

Ten ordinary documents plus hostile files: zero bytes, invalid UTF-8, NUL bytes,
bidi and zero-width characters, 5,000-deep nested HTML, a ``.pdf`` that is not a
PDF, a file over the 5 MB ``max_document_bytes`` limit (6 MB, also one 6 MB line)
and a JSONL file with broken lines. The build runs in-process on the DirectRunner
with ``--knowledge=false`` (the knowledge layer is not what this test is about).
"""

import json
import os
import resource
import shutil

import pyarrow.parquet as pq
import pytest

from evidex.activation import read_active
from evidex.bundles import list_bundles
from pipelines.build_index import BuildFailedError, run
from tests.conftest import write_corpus

GOOD = {
    f"good{i}.txt": f"Good document number {i} explains how topic {i} works in plain words. "
    f"It has a second sentence about item {i} so that chunking has something to do."
    for i in range(10)
}

OVER_LIMIT = 6_000_000  # the default max_document_bytes is 5,000,000

HOSTILE: dict[str, str | bytes] = {
    "empty.txt": b"",
    "latin1.txt": b"caf\xe9 cr\xe8me \xff\xfe not utf-8",
    "notpdf.pdf": b"this is plain text wearing a .pdf name\n",
    "huge.txt": b"word " * (OVER_LIMIT // 5),
    "oneline.md": b"x" * OVER_LIMIT,
    "broken.jsonl": b'{"_id": "ok-line", "text": "A valid JSONL record about ferries."}\n'
    b'{"_id": "cut", "text": "unterminated\n'
    b"[1, 2, 3]\n"
    b'{"_id": "bad-bytes", "text": "\xff\xfe"}\n'
    b'{"text": "a record without any id field"}\n',
}

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
}

PEAK_RSS_LIMIT_MB = 4096


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


@pytest.fixture(scope="module")
def poison_corpus(tmp_path_factory: pytest.TempPathFactory):
    return write_corpus(tmp_path_factory.mktemp("poison"), {**GOOD, **HOSTILE, **ODD_BUT_VALID})


@pytest.mark.slow
def test_poison_corpus_builds_and_every_hostile_input_is_a_dead_letter(poison_corpus, tmp_path):
    result = run(
        [
            *("--input", str(poison_corpus), "--root", str(tmp_path)),
            *("--knowledge=false", "--max_bad_ratio", "0.5"),
        ],
        bundle_id="poison",
    )
    peak = _peak_rss_mb()
    dead = pq.read_table(os.path.join(result.path, "failures", "ingest.parquet")).to_pylist()
    got = {d["record_id"]: d["error_type"] for d in dead}
    assert got == EXPECTED_DEAD
    assert all(d["message"] and d["stage"] == "ingest" for d in dead)
    for stage in ("chunk", "embed"):
        assert (
            pq.ParquetFile(
                os.path.join(result.path, "failures", f"{stage}.parquet")
            ).metadata.num_rows
            == 0
        )

    docs = {
        d["doc_id"]: d
        for d in pq.read_table(os.path.join(result.path, "documents.parquet")).to_pylist()
    }
    assert set(docs) == set(GOOD) | set(ODD_BUT_VALID) | {"ok-line"}
    assert "\x00" in docs["nul.txt"]["text"] and "\u202e" in docs["bidi.txt"]["text"]
    assert (
        docs["nested.html"]["text"]
        .strip()
        .endswith("Deep nesting still has one readable sentence.")
    )
    chunks = pq.read_table(os.path.join(result.path, "chunks.parquet")).to_pylist()
    assert {c["doc_id"] for c in chunks} == set(docs)
    for c in chunks:
        assert docs[c["doc_id"]]["text"][c["start"] : c["end"]] == c["text"]
    assert result.manifest.dead_letter_counts["ingest"] == len(EXPECTED_DEAD)
    print(f"peak RSS {peak:.0f} MB")  # recorded in docs/reliability.md
    assert peak < PEAK_RSS_LIMIT_MB


@pytest.mark.slow
def test_above_the_bad_ratio_the_build_fails_and_the_active_bundle_is_untouched(
    poison_corpus, validated_root, tmp_path
):
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    active_bytes = (root / "ACTIVE").read_bytes()
    before = (read_active(str(root)), list_bundles(str(root)))
    with pytest.raises(
        BuildFailedError, match=r"dead-letter ratio \d+\.\d% exceeds the limit 5\.0%"
    ):
        run(
            ["--input", str(poison_corpus), "--root", str(root), "--knowledge=false"],
            bundle_id="too-bad",
        )
    assert (read_active(str(root)), list_bundles(str(root))) == before
    assert (root / "ACTIVE").read_bytes() == active_bytes
    history = [json.loads(h) for h in (root / "history.jsonl").read_text().splitlines()]
    assert [h["bundle_id"] for h in history] == ["b1"]
    assert not (root / "bundles" / "too-bad").exists()
