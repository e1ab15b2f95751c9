import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import register_coders
from store.config import IngestConfig
from tests.conftest import write_corpus
from transforms.ingest import ReadDocuments, pattern_and_root
from transforms.sidecar import SidecarError, parse_sidecar, split_front_matter
from transforms.tags import BAD, GOOD


def test_jsonl_and_csv_sidecars():
    jsonl = '{"source_id": "a.md", "access_class": "internal", "owner": "ops"}\n\n'
    assert parse_sidecar(jsonl, name="m.jsonl") == {
        "a.md": {"access_class": "internal", "owner": "ops"}
    }
    csv_text = "source_id,source_role,valid_to\nb.md,policy,2025-12-31\nc.md,,\n"
    assert parse_sidecar(csv_text, name="m.csv") == {
        "b.md": {"source_role": "policy", "valid_to": "2025-12-31"},
        "c.md": {},
    }


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{broken", "m.jsonl:1: invalid JSON"),
        ('{"access_class": "internal"}', "m.jsonl:1: no 'source_id'"),
        ('{"source_id": "a"}\n{"source_id": "a"}', "m.jsonl:2: duplicate"),
        ("[1]", "not a JSON object"),
    ],
)
def test_bad_sidecars_name_file_and_line(text, reason):
    with pytest.raises(SidecarError, match=reason):
        parse_sidecar(text, name="m.jsonl")


def test_front_matter_is_split_from_the_text():
    values, body = split_front_matter(
        "---\ntitle: Limits\nvalid_from: 2024-01-01\nsource_role: policy\n---\n# Body\n"
    )
    assert values == {"title": "Limits", "valid_from": "2024-01-01", "source_role": "policy"}
    assert body == "# Body\n"
    assert split_front_matter("no front matter") == ({}, "no front matter")
    assert split_front_matter("---\n- a list\n---\nx")[0] == {}


def test_sidecar_overrides_front_matter_and_bad_values_are_dead_letters(tmp_path):
    register_coders()
    corpus = write_corpus(
        tmp_path / "in",
        {
            "limits.md": "---\nsource_role: guide\nvalid_from: 2024-01-01\n---\n# UPI limits\n\n"
            "The UPI Lite limit is Rs 500 per transaction.",
            "faq.md": "# FAQ\n\nAsk us anything.",
            "secret.md": "Internal only.",
            "rows.jsonl": '{"_id": "r1", "text": "Row text."}\n',
        },
    )
    sidecar = {
        "limits.md": {"source_role": "policy", "valid_to": "2024-12-31"},
        "secret.md": {"access_class": "top-secret"},
        "r1": {"access_class": "internal", "title": "Row one", "team": "payments"},
    }
    pattern, root = pattern_and_root(str(corpus))
    with TestPipeline() as p:
        out = p | ReadDocuments(pattern, root=root, config=IngestConfig(), sidecar=sidecar)
        assert_that(
            out[GOOD]
            | beam.Map(
                lambda d: (
                    d.doc_id,
                    d.title,
                    d.source_role,
                    d.access_class,
                    d.valid_from,
                    d.valid_to,
                    d.text[:12],
                    d.metadata_json,
                )
            ),
            equal_to(
                [
                    (
                        "limits.md",
                        "UPI limits",
                        "policy",
                        "public",
                        "2024-01-01",
                        "2024-12-31",
                        "# UPI limits",
                        "{}",
                    ),
                    ("faq.md", "FAQ", "reference", "public", None, None, "# FAQ\n\nAsk u", "{}"),
                    (
                        "r1",
                        "Row one",
                        "reference",
                        "internal",
                        None,
                        None,
                        "Row text.",
                        '{"team": "payments"}',
                    ),
                ]
            ),
            label="documents",
        )
        assert_that(
            out[BAD] | beam.Map(lambda d: (d.record_id, d.error_type)),
            equal_to([("secret.md", "invalid_field")]),
            label="dead",
        )
