"""The same build on another runner mode gives identical tables."""

import os

import pytest

from evidex.bundles import bundle_path, sha256_file
from pipelines.build_index import run


@pytest.mark.slow
def test_multiprocess_direct_runner_matches_in_process(built_root, tiny_corpus, tmp_path):
    result = run(
        [
            "--input",
            str(tiny_corpus),
            "--root",
            str(tmp_path),
            "--direct_running_mode",
            "multi_processing",
            "--direct_num_workers",
            "2",
        ],
        bundle_id="mp",
    )
    reference = bundle_path(str(built_root), "b1")
    for name in (
        "documents.parquet",
        "chunks.parquet",
        "chunks.usearch",
        "bm25/vocab.index.json",
        "bm25/data.csc.index.npy",
    ):
        assert sha256_file(os.path.join(result.path, name)) == sha256_file(
            os.path.join(reference, name)
        ), name
