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
    b1_chunks = pq.ParquetFile(os.path.join(bundle_path(str(root), "b1"), "chunks.parquet"))
    assert delta["unchanged"] == 7 and delta["chunks_reused"] == b1_chunks.metadata.num_rows
    # Nothing changed: the new generation reads b1's segment, deletes nothing from it, and
    # its own segment is empty; its knowledge tables are b1's, byte for byte.
    kept, own = same.manifest.segments
    assert (kept.bundle_id, kept.deleted_documents, kept.deleted_chunks) == ("b1", [], [])
    assert (own.bundle_id, own.documents, own.chunks) == ("same", 0, 0)
    knowledge = [f"{t}.parquet" for t in ("mentions", "entities", "relations", "communities")]
    for name in knowledge:
        assert sha256_file(os.path.join(bundle_path(str(root), "b1"), name)) == sha256_file(
            os.path.join(same.path, name)
        )

    edited = dict(TINY_CORPUS)
    edited["tea.md"] = "# Tea\n\nOolong tea is partly oxidised before it is rolled and dried."
    del edited["bread.txt"]
    # Moved to another folder with the same ids: the moved documents stay in b1's segment
    # (tests/pipelines/test_moved.py), only the edit is written and embedded.
    moved = run(
        ["--input", str(write_corpus(tmp_path / "moved", edited)), "--root", str(root)],
        bundle_id="moved",
    )
    d = moved.manifest.delta
    assert (d["new"], d["changed"], d["moved"], d["unchanged"], d["deleted"]) == (0, 1, 5, 0, 1)
    assert [s.bundle_id for s in moved.manifest.segments] == ["b1", "moved"]
    before = pq.read_table(os.path.join(bundle_path(str(root), "b1"), "chunks.parquet"))
    vectors = dict(zip(before["text"].to_pylist(), before["embedding"].to_pylist(), strict=True))
    after = pq.read_table(os.path.join(moved.path, "chunks.parquet")).to_pylist()
    assert {c["doc_id"] for c in after} == {"tea.md"}
    fresh = {c["text"] for c in after if c["text"] not in vectors}
    assert fresh and all("Oolong" in text for text in fresh)
    assert d["texts_embedded"] == len(fresh)
    # Edited where they are: only the edit is rewritten.
    in_place = tmp_path / "in_place"
    shutil.copytree(validated_root, in_place)
    (tiny_corpus / "bread.txt").rename(tmp_path / "bread.txt")
    original_tea = (tiny_corpus / "tea.md").read_text(encoding="utf-8")
    try:
        (tiny_corpus / "tea.md").write_text(edited["tea.md"], encoding="utf-8")
        changed = run(["--input", str(tiny_corpus), "--root", str(in_place)], bundle_id="c")
    finally:
        (tiny_corpus / "tea.md").write_text(original_tea, encoding="utf-8")
        (tmp_path / "bread.txt").rename(tiny_corpus / "bread.txt")
    d = changed.manifest.delta
    assert (d["new"], d["changed"], d["unchanged"], d["deleted"]) == (0, 1, 5, 1)
    chunks = pq.read_table(os.path.join(changed.path, "chunks.parquet")).to_pylist()
    assert {c["doc_id"] for c in chunks} == {"tea.md"}  # the new segment: the edit only
    assert d["texts_embedded"] == len(chunks) and "Oolong" in chunks[0]["text"]
    kept = changed.manifest.segments[0]
    assert kept.deleted_documents == ["bread.txt", "tea.md"]


@pytest.mark.slow
def test_delta_can_be_turned_off(validated_root, tiny_corpus, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    full = run(
        ["--input", str(tiny_corpus), "--root", str(root), "--delta=false"], bundle_id="full"
    )
    assert full.manifest.delta["parent"] is None
    assert full.manifest.delta["texts_embedded"] == full.manifest.row_counts["chunks"]


@pytest.mark.slow
def test_a_refresh_with_the_knowledge_layer_over_segments_without_it_builds_in_full(
    tiny_corpus, tmp_path
):
    """Kept segments must carry their extraction: without it the knowledge layer could
    only be computed by parsing them again, which is a full build's work anyway."""
    from store.activation import activate
    from validation import validate_bundle

    root = str(tmp_path / "root")
    plain = run(["--input", str(tiny_corpus), "--root", root, "--knowledge=false"], bundle_id="p")
    assert validate_bundle(plain.path).passed
    activate(root, "p")
    again = run(["--input", str(tiny_corpus), "--root", root, "--knowledge=false"], bundle_id="q")
    assert again.manifest.delta["parent"] == "p"  # the same layer: a refresh
    rich = run(["--input", str(tiny_corpus), "--root", root], bundle_id="k")
    assert rich.manifest.delta["parent"] is None
    assert [s.bundle_id for s in rich.manifest.segments] == ["k"]
    assert rich.manifest.row_counts["entities"] > 0
