"""Moved inputs: the same documents read from another location are kept where they are,
nothing of them is chunked, embedded or parsed again, and their evidence names the new
source (issue 54)."""

import shutil

import pyarrow.parquet as pq
import pytest

from pipelines.build_index import run
from pipelines.compact import run as compact
from query import load_bundle, retrieve
from store.activation import activate
from store.bundles import bundle_path, read_manifest
from store.segments import content_state, document_state, live_revisions, open_segments
from tests.conftest import TINY_CORPUS, write_corpus
from validation import validate_bundle

QUERIES = ("Which river reaches the Black Sea?", "How do disc brakes work in the rain?")


def _activate(root: str, bundle_id: str) -> None:
    report = validate_bundle(bundle_path(root, bundle_id))
    assert report.passed, report.failed()
    activate(root, bundle_id)


def _live(root: str, bundle_id: str):
    path = bundle_path(root, bundle_id)
    return live_revisions(open_segments(path, read_manifest(path)))


def _evidence(root: str, model) -> list[list[tuple[str, int, int, str]]]:
    bundle = load_bundle(root, model=model)
    return [
        [(e.doc_id, e.start, e.end, e.source_uri) for e in retrieve(bundle, q, k=3)]
        for q in QUERIES
    ]


def test_a_move_changes_the_state_but_not_the_content_state():
    row = {
        "doc_id": "a",
        "revision": "r",
        "title": "A",
        "source_uri": "/day1/export.jsonl#L3",
        "source_role": "guide",
        "access_class": "public",
        "language": "en",
        "metadata_json": "{}",
        "valid_from": None,
        "valid_to": None,
    }
    moved = row | {"source_uri": "/dt=2026-12-07/part-0000.jsonl#L9"}
    assert document_state(row) != document_state(moved)
    assert content_state(row) == content_state(moved)
    # What is indexed changed, or the suffix that decides how the text is chunked: not moved.
    for other in (
        moved | {"title": "B"},
        moved | {"access_class": "internal"},
        moved | {"revision": "r2"},
        row | {"source_uri": "/day1/export.txt"},
    ):
        assert content_state(other) != content_state(row)


@pytest.mark.slow
def test_a_moved_input_is_kept_unparsed_and_names_its_new_source(
    validated_root, tmp_path, query_encoder
):
    root = str(tmp_path / "root")
    shutil.copytree(validated_root, root)
    before = _evidence(root, query_encoder)
    # The same files in another folder: their ids (paths relative to the input) are the same.
    elsewhere = write_corpus(tmp_path / "dt=2026-12-07", TINY_CORPUS)
    moved = run(["--input", str(elsewhere), "--root", root], bundle_id="moved")
    d = moved.manifest.delta
    assert (d["new"], d["changed"], d["moved"], d["unchanged"], d["deleted"]) == (0, 0, 7, 0, 0)
    # Nothing was chunked, embedded or parsed: the new segment is empty, and no knowledge
    # text was embedded; the kept segment records where each document comes from now.
    assert d["texts_embedded"] == 0 and d["knowledge_texts_embedded"] == 0
    kept, own = moved.manifest.segments
    assert (own.documents, own.chunks) == (0, 0)
    for table in ("mentions", "statements"):  # spaCy parsed nothing
        assert pq.ParquetFile(f"{moved.path}/extraction/{table}.parquet").metadata.num_rows == 0
    assert (kept.bundle_id, kept.deleted_documents) == ("b1", [])
    assert set(kept.sources) == set(_live(root, "b1"))
    assert all(source.startswith(str(elsewhere)) for source in kept.sources.values())
    _activate(root, "moved")
    after = _evidence(root, query_encoder)
    # The same passages, each now citing the new location.
    assert [[e[:3] for e in q] for q in after] == [[e[:3] for e in q] for q in before]
    assert all(e[3].startswith(str(elsewhere)) for q in after for e in q)

    # Read again from the new location: nothing moved this time.
    again = run(["--input", str(elsewhere), "--root", root], bundle_id="again")
    d = again.manifest.delta
    assert (d["new"], d["changed"], d["moved"], d["unchanged"], d["deleted"]) == (0, 0, 0, 7, 0)
    assert again.manifest.segments[0].sources == kept.sources
    _activate(root, "again")

    # Compaction folds the record of the move into the documents it writes.
    folded = compact([], root=root, bundle_id="folded")
    assert all(not ref.sources for ref in folded.manifest.segments)
    rows = pq.read_table(f"{folded.path}/documents.parquet").to_pylist()
    assert all(row["source_uri"].startswith(str(elsewhere)) for row in rows)
    _activate(root, "folded")
    assert _evidence(root, query_encoder) == after


@pytest.mark.slow
def test_a_moved_input_with_an_edit_rewrites_the_edit_only(validated_root, tmp_path):
    root = str(tmp_path / "root")
    shutil.copytree(validated_root, root)
    edited = dict(TINY_CORPUS)
    edited["tea.md"] = "# Tea\n\nOolong tea is partly oxidised before it is rolled and dried."
    del edited["bread.txt"]
    elsewhere = write_corpus(tmp_path / "export-2", edited)
    result = run(["--input", str(elsewhere), "--root", root], bundle_id="moved")
    d = result.manifest.delta
    assert (d["new"], d["changed"], d["moved"], d["unchanged"], d["deleted"]) == (0, 1, 5, 0, 1)
    kept, own = result.manifest.segments
    assert kept.deleted_documents == ["bread.txt", "tea.md"]
    assert "tea.md" not in kept.sources and "bread.txt" not in kept.sources
    chunks = pq.read_table(f"{result.path}/chunks.parquet").to_pylist()
    assert {c["doc_id"] for c in chunks} == {"tea.md"} and own.documents == 1
    assert d["texts_embedded"] == len(chunks)
    _activate(root, "moved")
    bundle = load_bundle(root)
    top = retrieve(bundle, "How is oolong tea made?", k=1)[0]
    assert top.doc_id == "tea.md" and top.source_uri == str(elsewhere / "tea.md")
    assert bundle.documents["tea.md"]["text"][top.start : top.end] == top.text


@pytest.mark.slow
def test_a_renamed_file_keeps_its_id_only_when_an_id_field_names_it(tmp_path):
    notes = {
        "owls.md": "---\nnote_id: n-owls\n---\n# Owls\n\nBarn owls hunt at night by sound.",
        "glass.md": "# Glass\n\nGlass is sand melted with soda ash and lime.",
    }
    corpus = write_corpus(tmp_path / "notes", notes)
    root = str(tmp_path / "root")
    first = run(["--input", str(corpus), "--root", root, "--id_field", "note_id"], bundle_id="a")
    _activate(root, "a")
    assert set(_live(root, "a")) == {"n-owls", "glass.md"}
    (corpus / "owls.md").rename(corpus / "birds-of-prey.md")
    (corpus / "glass.md").rename(corpus / "glassmaking.md")
    renamed = run(["--input", str(corpus), "--root", root, "--id_field", "note_id"], bundle_id="b")
    d = renamed.manifest.delta
    # The note with its own id moved; the file known by its path is a new document.
    assert (d["new"], d["changed"], d["moved"], d["deleted"]) == (1, 0, 1, 1)
    assert first.manifest.segments[0].bundle_id == renamed.manifest.segments[0].bundle_id
    assert renamed.manifest.segments[0].sources == {"n-owls": str(corpus / "birds-of-prey.md")}
    _activate(root, "b")
    assert set(_live(root, "b")) == {"n-owls", "glassmaking.md"}
