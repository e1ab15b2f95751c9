"""Per-access-class HNSW partitions: built, listed, validated, loaded and searched.

The tiny corpus is split into public and internal documents by a sidecar, and the
partition threshold is lowered to one chunk so that both classes get a partition
(the default, 20,000 chunks, leaves small classes to exact search).
"""

import numpy as np
import pytest

from pipelines.build_index import run
from query import open_bundle
from query.retrieval import dense_arm, visible_rows
from store.bundles import partition_index, read_manifest
from validation import validate_bundle

INTERNAL = ("river.md", "bread.txt", "bike-1")


@pytest.fixture(scope="module")
def partitioned(tiny_corpus, tmp_path_factory):
    sidecar = tmp_path_factory.mktemp("meta") / "meta.csv"
    sidecar.write_text(
        "source_id,access_class\n" + "".join(f"{d},internal\n" for d in INTERNAL),
        encoding="utf-8",
    )
    root = tmp_path_factory.mktemp("partitioned")
    result = run(
        [
            *("--input", str(tiny_corpus), "--root", str(root), "--metadata", str(sidecar)),
            *("--knowledge=false", "--ann_partition_min_rows", "1"),
        ],
        bundle_id="p1",
    )
    return result.path


@pytest.mark.slow
def test_each_access_class_gets_a_listed_validated_partition(partitioned, query_encoder):
    manifest = read_manifest(partitioned)
    for access_class in ("public", "internal"):
        rel = partition_index(access_class)
        assert rel in manifest.files and rel in manifest.indexes
    assert partition_index("restricted") not in manifest.files  # no such chunks
    report = validate_bundle(partitioned)
    assert report.passed, report.failed()
    names = {c.name for c in report.checks}
    assert "ann.chunks.internal.vector_count_equals_rows" in names
    assert any(n.startswith("ann.chunks.public.mean_recall@") for n in names)

    bundle = open_bundle(partitioned, model=query_encoder)
    assert set(bundle.partitions) == {"public", "internal"}
    assert len(bundle.partitions["internal"]) == int((bundle.access_classes == "internal").sum())
    rows = visible_rows(bundle, ["internal"])
    vector = bundle.embed("Which river reaches the Black Sea?")
    via_partition = dense_arm(bundle, vector, 10, rows, exact_max_rows=0)
    exact = dense_arm(bundle, vector, 10, rows, exact_max_rows=10**9)
    assert [h.row for h in via_partition] == [h.row for h in exact]
    assert set(np.asarray(bundle.access_classes)[[h.row for h in via_partition]]) == {"internal"}
    assert bundle.chunk_doc_ids[via_partition[0].row] == "river.md"
