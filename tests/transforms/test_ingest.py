import io

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import register_coders, revision_of
from store.config import IngestConfig
from tests.conftest import write_corpus
from transforms.ingest import (
    DELETES,
    IngestError,
    ReadDocuments,
    bounded_lines,
    parse_jsonl_line,
    pattern_and_root,
    relative_id,
)
from transforms.tags import BAD, GOOD


def test_relative_ids_use_forward_slashes_under_the_root():
    assert relative_id("/data/in/a/b.md", "/data/in") == "a/b.md"
    assert relative_id("gs://bucket/x/y.txt", "gs://bucket/x/") == "y.txt"


def test_jsonl_line_errors_name_their_type():
    config = IngestConfig()
    cases = {
        b"{not json": "malformed_json",
        b"[1, 2]": "malformed_json",
        b'{"text": "no id"}': "missing_field",
        b'{"_id": "x", "text": 5}': "missing_field",
        b'{"_id": "x", "text": "   "}': "empty",
        b'{"_id": "x", "text": "\xff"}': "undecodable",
    }
    for line, error_type in cases.items():
        with pytest.raises(IngestError) as info:
            parse_jsonl_line(line, source_uri="f", config=config)
        assert info.value.error_type == error_type, line


def test_jsonl_line_keeps_extra_fields_as_metadata():
    doc = parse_jsonl_line(
        b'{"_id": "7", "title": "T", "text": "Body", "year": 2020}',
        source_uri="f",
        config=IngestConfig(),
    )
    assert (doc.doc_id, doc.title, doc.text, doc.metadata_json) == (
        "7",
        "T",
        "Body",
        '{"year": 2020}',
    )


def test_pattern_and_root_for_directory_file_and_glob(tmp_path):
    (tmp_path / "a.md").write_text("x")
    assert pattern_and_root(str(tmp_path)) == (f"{tmp_path}/**", str(tmp_path))
    assert pattern_and_root(str(tmp_path / "a.md")) == (str(tmp_path / "a.md"), str(tmp_path))
    assert pattern_and_root(f"{tmp_path}/*.md") == (f"{tmp_path}/*.md", str(tmp_path))


def test_read_documents_sends_every_bad_input_to_dead_letters(tmp_path):
    register_coders()
    corpus = write_corpus(
        tmp_path,
        {
            "good.md": "# Title here\r\n\r\nBody text.",
            "sub/other.txt": "Second document.",
            "empty.txt": "  \n ",
            "binary.txt": b"\xff\xfe\x00bad",
            "image.png": b"\x89PNG",
            "big.txt": "x" * 2000,
            "rows.jsonl": '{"_id": "r1", "text": "Row one."}\n{broken\n\n'
            '{"_id": "r1", "text": "Duplicate id."}\n',
        },
    )
    config = IngestConfig(max_document_bytes=1000)
    pattern, root = pattern_and_root(str(corpus))
    with TestPipeline() as p:
        out = p | ReadDocuments(pattern, root=root, config=config)
        assert_that(
            out[GOOD] | beam.Map(lambda d: (d.doc_id, d.title, d.text, d.revision)),
            equal_to(
                [
                    (
                        "good.md",
                        "Title here",
                        "# Title here\n\nBody text.",
                        revision_of("# Title here\n\nBody text."),
                    ),
                    (
                        "sub/other.txt",
                        "sub/other.txt",  # no heading in it: the file name
                        "Second document.",
                        revision_of("Second document."),
                    ),
                    ("r1", "r1", "Row one.", revision_of("Row one.")),
                ]
            ),
            label="documents",
        )
        assert_that(
            out[BAD] | beam.Map(lambda d: (d.stage, d.record_id, d.error_type)),
            equal_to(
                [
                    ("ingest", "empty.txt", "empty"),
                    ("ingest", "binary.txt", "undecodable"),
                    ("ingest", "image.png", "unsupported"),
                    ("ingest", "big.txt", "oversized"),
                    ("ingest", "rows.jsonl#L2", "malformed_json"),
                    ("ingest", "r1", "duplicate_id"),
                ]
            ),
            label="dead_letters",
        )


def test_explicit_deletes_remove_documents_from_any_file(tmp_path):
    # A JSONL feed deletes a record (then adds "r3" back after deleting it), a tombstone
    # file deletes a text file's document and one of the feed's; a bad tombstone line is a
    # dead letter; a delete record needs no text.
    register_coders()
    corpus = write_corpus(
        tmp_path,
        {
            "keep.md": "Kept.",
            "gone.md": "Deleted by the tombstone.",
            "feed.jsonl": '{"_id": "r1", "text": "One."}\n'
            '{"_id": "r2", "text": "Two."}\n'
            '{"_id": "r3", "text": "Three."}\n'
            '{"_id": "r1", "deleted": true}\n'
            '{"_id": "r3", "deleted": true}\n'
            '{"_id": "r3", "text": "Three again."}\n',
            "batch.tombstone": "# removed on request\ngone.md\n\nr2\n" + "x" * 300 + "\n",
        },
    )
    pattern, root = pattern_and_root(str(corpus))
    with TestPipeline() as p:
        out = p | ReadDocuments(pattern, root=root, config=IngestConfig(max_document_bytes=100))
        assert_that(
            out[GOOD] | beam.Map(lambda d: (d.doc_id, d.text)),
            equal_to([("keep.md", "Kept."), ("r3", "Three again.")]),
            label="documents",
        )
        assert_that(
            out[DELETES] | beam.Map(lambda t: (t.doc_id, t.source.rpartition("/")[2], t.line)),
            equal_to(
                [
                    ("r1", "feed.jsonl", 4),
                    ("r3", "feed.jsonl", 5),
                    ("gone.md", "batch.tombstone", 0),
                    ("r2", "batch.tombstone", 0),
                ]
            ),
            label="deletes",
        )
        assert_that(
            out[BAD] | beam.Map(lambda d: (d.record_id.rpartition("/")[2], d.error_type)),
            equal_to([("batch.tombstone#L5", "bad_tombstone")]),
            label="dead_letters",
        )


def test_jsonl_records_can_set_access_role_and_validity():
    doc = parse_jsonl_line(
        b'{"_id": "p1", "text": "Limit is 500.", "access_class": "internal", '
        b'"source_role": "policy", "valid_from": "2024-01-01", "valid_to": "2024-12-31"}',
        source_uri="f",
        config=IngestConfig(),
    )
    assert (doc.access_class, doc.source_role, doc.valid_from, doc.valid_to) == (
        "internal",
        "policy",
        "2024-01-01",
        "2024-12-31",
    )
    assert doc.metadata_json == "{}"
    bad = {
        b'{"_id": "x", "text": "t", "access_class": "secret"}': "access_class",
        b'{"_id": "x", "text": "t", "source_role": "rumour"}': "source_role",
        b'{"_id": "x", "text": "t", "valid_from": "2024-02-30"}': "not a real date",
        b'{"_id": "x", "text": "t", "valid_from": "yesterday"}': "YYYY-MM-DD",
        b'{"_id": "x", "text": "t", "valid_from": "2024-05-01", "valid_to": "2024-01-01"}': (
            "before valid_from"
        ),
    }
    for line, reason in bad.items():
        with pytest.raises(IngestError, match=reason) as info:
            parse_jsonl_line(line, source_uri="f", config=IngestConfig())
        assert info.value.error_type == "invalid_field"


def test_bounded_lines_cut_an_over_long_line_and_keep_counting():
    data = b'{"a": 1}\n' + b"z" * 100 + b"\n" + b"last-without-newline"
    got = list(bounded_lines(io.BytesIO(data), 16))
    assert got == [
        (1, b'{"a": 1}\n', True),
        (2, b"z" * 16, False),
        (3, b"last-without-newline"[:16], False),
    ]
    exact = list(bounded_lines(io.BytesIO(b"x" * 16 + b"\n" + b"y\n"), 16))
    assert exact == [(1, b"x" * 16 + b"\n", True), (2, b"y\n", True)]
