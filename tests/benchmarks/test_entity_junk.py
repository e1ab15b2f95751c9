"""The entity junk benchmark's census and labelled sampling."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.entity_junk import census, read_labels, sample


def _bundle(root) -> None:
    bundle = root / "bundles" / "20260101T000000.000000Z"
    bundle.mkdir(parents=True)
    table = pa.table(
        {
            "entity_id": ["e1", "e2", "e3"],
            "name": ["Valgrind", "API", "Nitzan"],
            "label": ["ORG", "ORG", "PERSON"],
            "mention_count": [9, 44, 1],
        }
    )
    pq.write_table(table, bundle / "entities.parquet")


def _labels(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_census_scores_every_entity_and_lists_the_unlabelled(tmp_path):
    _bundle(tmp_path)
    first = _labels(
        tmp_path / "a.jsonl",
        [
            {"name": "Valgrind", "label": "junk", "category": "generic"},
            {"name": "API", "label": "junk", "category": "generic"},
            {"name": "Unknown", "label": "", "category": ""},
        ],
    )
    later = _labels(tmp_path / "b.jsonl", [{"name": "Valgrind", "label": "thing"}])
    found = census(str(tmp_path), [first, later])  # a later file's label wins
    assert found == {
        "entities": 3,
        "labelled": 2,
        "junk": 1,
        "junk_share": 0.5,
        "categories": {"generic": 1},
        "unlabelled": ["Nitzan"],
    }


def test_a_sample_comes_labelled_where_a_name_was_labelled_before(tmp_path):
    _bundle(tmp_path)
    known = read_labels(
        [_labels(tmp_path / "a.jsonl", [{"name": "API", "label": "junk", "category": "generic"}])]
    )
    out = tmp_path / "sample.jsonl"
    assert sample(str(tmp_path), str(out), size=3, seed=58, known=known) == 3
    rows = {r["name"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert (rows["API"]["label"], rows["API"]["category"]) == ("junk", "generic")
    assert rows["Nitzan"]["label"] == "" and rows["Nitzan"]["type"] == "PERSON"
