"""Delta builds against the active bundle: unchanged input embeds nothing."""

import os
import shutil

import pyarrow.parquet as pq
import pytest

from pipelines.build_index import run
from store.bundles import bundle_path, sha256_file
from tests.conftest import TINY_CORPUS, write_corpus


@pytest.mark.slow
def test_rebuilding_unchanged_input_embeds_nothing_and_changes_are_exact(
    validated_root, tiny_corpus, tmp_path
):
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    same = run(["--input", str(tiny_corpus), "--root", str(root)], bundle_id="same")
    delta = same.manifest.delta
    assert delta["parent"] == "b1" and delta["texts_embedded"] == 0
    assert delta["knowledge_texts_embedded"] == 0  # summaries and reports reused too
    assert (delta["new"], delta["changed"], delta["deleted"]) == (0, 0, 0)
    assert delta["unchanged"] == 7 and delta["chunks_reused"] == same.manifest.row_counts["chunks"]
    knowledge = [f"{t}.parquet" for t in ("mentions", "entities", "relations", "communities")]
    for name in ["documents.parquet", "chunks.parquet", "chunks.usearch", *knowledge]:
        assert sha256_file(os.path.join(bundle_path(str(root), "b1"), name)) == sha256_file(
            os.path.join(same.path, name)
        )

    edited = dict(TINY_CORPUS)
    edited["tea.md"] = "# Tea\n\nOolong tea is partly oxidised before it is rolled and dried."
    del edited["bread.txt"]
    corpus = write_corpus(tmp_path / "edited", edited)
    changed = run(["--input", str(corpus), "--root", str(root)], bundle_id="changed")
    d = changed.manifest.delta
    assert (d["new"], d["changed"], d["unchanged"], d["deleted"]) == (0, 1, 5, 1)
    chunks = pq.read_table(os.path.join(changed.path, "chunks.parquet")).to_pylist()
    tea = [c for c in chunks if c["doc_id"] == "tea.md"]
    assert d["texts_embedded"] == len(tea) and "Oolong" in tea[0]["text"]
    assert not [c for c in chunks if c["doc_id"] == "bread.txt"]
    docs = pq.read_table(os.path.join(changed.path, "documents.parquet"))["doc_id"].to_pylist()
    assert "bread.txt" not in docs


@pytest.mark.slow
def test_delta_can_be_turned_off(validated_root, tiny_corpus, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    full = run(
        ["--input", str(tiny_corpus), "--root", str(root), "--delta=false"], bundle_id="full"
    )
    assert full.manifest.delta["parent"] is None
    assert full.manifest.delta["texts_embedded"] == full.manifest.row_counts["chunks"]
