import json
import os
import subprocess
import sys

import numpy as np
import pytest

from query import ModelMismatchError, NoActiveBundleError, load_bundle, retrieve
from store.bundles import MANIFEST, BundleIntegrityError, BundleVersionError, bundle_path


@pytest.fixture(scope="module")
def bundle(validated_root, query_encoder):
    return load_bundle(str(validated_root), model=query_encoder)


@pytest.mark.parametrize(
    ("question", "doc_id"),
    [
        ("Which river reaches the Black Sea?", "river.md"),
        ("Do disc brakes work when it rains?", "bike-2"),
        ("How does sourdough rise?", "bread.txt"),
        ("Which volcano is on Sicily?", "volcano.txt"),
    ],
)
def test_top_evidence_is_the_right_document_quoted_exactly(bundle, question, doc_id):
    evidence = retrieve(bundle, question, k=3)
    assert evidence[0].doc_id == doc_id
    for e in evidence:
        doc = bundle.documents[e.doc_id]
        assert doc["text"][e.start : e.end] == e.text
        assert e.revision == doc["revision"]
    assert [e.rank for e in evidence] == [1, 2, 3]
    assert [e.score for e in evidence] == sorted((e.score for e in evidence), reverse=True)


def test_results_are_deterministic(bundle):
    assert retrieve(bundle, "chess opening", k=5) == retrieve(bundle, "chess opening", k=5)


def test_access_filter_applies_before_top_k(bundle):
    original = bundle.access_classes.copy()
    try:
        restricted = np.array([d == "chess.md" for d in bundle.chunk_doc_ids])
        bundle.access_classes[restricted] = "restricted"
        visible = retrieve(bundle, "Sicilian Defence chess opening", k=4, access=["public"])
        assert len(visible) == min(4, int((~restricted).sum()))
        assert all(e.doc_id != "chess.md" for e in visible)
        assert all(e.access_class == "public" for e in visible)
        everything = retrieve(
            bundle, "Sicilian Defence chess opening", k=4, access=["public", "restricted"]
        )
        assert everything[0].doc_id == "chess.md"
        assert retrieve(bundle, "anything", k=3, access=["internal"]) == []
    finally:
        bundle.access_classes[:] = original


def test_bad_arguments_are_rejected(bundle):
    with pytest.raises(ValueError, match="empty"):
        retrieve(bundle, "  ")
    with pytest.raises(ValueError, match="positive"):
        retrieve(bundle, "x", k=0)


def test_no_active_bundle_is_a_clear_error(tmp_path, query_encoder):
    with pytest.raises(NoActiveBundleError, match="evidex build"):
        load_bundle(str(tmp_path), model=query_encoder)


def _edit_manifest(root, change) -> None:
    path = os.path.join(bundle_path(str(root), "b1"), MANIFEST)
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    change(data)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def test_loading_checks_checksums_version_and_model(fresh_root, query_encoder):
    root = str(fresh_root)
    load_bundle(root, bundle_id="b1", model=query_encoder)
    with open(os.path.join(bundle_path(root, "b1"), "chunks.usearch"), "r+b") as handle:
        handle.seek(-4, os.SEEK_END)
        handle.write(b"\x00\x01\x02\x03")
    with pytest.raises(BundleIntegrityError, match=r"chunks\.usearch"):
        load_bundle(root, bundle_id="b1", model=query_encoder)

    _edit_manifest(fresh_root, lambda m: m["model"].update(tokenizer_sha256="0" * 64))
    with pytest.raises(ModelMismatchError):
        load_bundle(root, bundle_id="b1", model=query_encoder, verify=False)

    _edit_manifest(fresh_root, lambda m: m.update(schema_version=99))
    with pytest.raises(BundleVersionError, match="schema version 99"):
        load_bundle(root, bundle_id="b1", model=query_encoder, verify=False)


def test_the_query_module_never_imports_beam(validated_root):
    code = (
        "import sys, query\n"
        f"b = query.load_bundle({str(validated_root)!r})\n"
        "print(query.retrieve(b, 'tea oxidation', k=1)[0].doc_id)\n"
        "assert 'apache_beam' not in sys.modules, 'apache_beam was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "tea.md"
