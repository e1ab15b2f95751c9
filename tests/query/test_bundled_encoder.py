"""Issue 30: the bundle carries its query encoder (ONNX graph + tokenizers JSON), checked
against PyTorch at build time, verified like every artifact, and the read path answers
with it without importing PyTorch, transformers or sentence-transformers."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pipelines import encoder_artifact
from query.bundle import ModelMismatchError, load_bundle, open_encoder
from query.encoder import BundledEncoder
from store.bundles import (
    ENCODER_GRAPH,
    ENCODER_TOKENIZER,
    BundleIntegrityError,
    UnsafeArtifactError,
    bundle_path,
    read_manifest,
    verify_artifacts,
)

TEXTS = [
    "0-dimensional biomaterials show inductive properties.",
    "what causes tides?",
    "  Which river reaches the Black Sea, and who first mapped it?\n",
    "x",
    "résumé naïve café — «quoted» ünïcode 東京",
    " ".join(["grounded retrieval needs exact evidence spans"] * 120),
]
HEAVY = ("torch", "transformers", "sentence_transformers")


def test_the_build_writes_a_checked_encoder_listed_in_the_manifest(built_root):
    manifest = read_manifest(bundle_path(str(built_root), "b1"))
    info = manifest.query_encoder
    assert info is not None
    assert (info.graph, info.tokenizer) == (ENCODER_GRAPH, ENCODER_TOKENIZER)
    assert info.graph in manifest.files and info.tokenizer in manifest.files
    assert 0 <= info.max_deviation <= encoder_artifact.MAX_DEVIATION
    assert info.inputs[:2] == ["input_ids", "attention_mask"]


def test_bundled_vectors_match_pytorch_one_by_one_and_batched(validated_root, st_model):
    path = bundle_path(str(validated_root), "b1")
    encoder = open_encoder(path, read_manifest(path))
    expected = st_model.encode(TEXTS, normalize_embeddings=True)
    one_by_one = np.vstack([encoder.encode(t) for t in TEXTS])
    assert one_by_one.dtype == np.float32 and one_by_one.shape == expected.shape
    assert np.abs(one_by_one - expected).max() <= 1e-5
    assert np.abs(encoder.encode_batch(TEXTS) - expected).max() <= 1e-5
    assert encoder.encode_batch([]).shape == (0, expected.shape[1])


def test_bundled_and_pytorch_paths_return_the_same_evidence(validated_root, query_encoder):
    bundled = load_bundle(str(validated_root))
    assert bundled.encoder.backend == "onnx (bundled)"
    with pytest.raises(AttributeError, match="encoder='torch'"):
        _ = bundled.model
    torch_path = load_bundle(str(validated_root), model=query_encoder)
    for query in ("How is green tea made?", "Which river reaches the Black Sea?", "owls"):
        assert [e.chunk_id for e in _top(bundled, query)] == [
            e.chunk_id for e in _top(torch_path, query)
        ]


def _top(bundle, query):
    from query import retrieve

    return retrieve(bundle, query, k=10)


def test_answering_a_query_imports_no_pytorch(validated_root):
    code = (
        "import sys, query\n"
        f"b = query.load_bundle({str(validated_root)!r})\n"
        "a = query.answer(b, 'what did the danube do in romania?', k=3)\n"
        "assert a.evidence, a\n"
        "assert any(r.startswith('spaCy named entity') for r in a.route.reasons), a.route\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_a_changed_encoder_file_fails_its_checksum(fresh_root):
    path = bundle_path(str(fresh_root), "b1")
    with open(os.path.join(path, ENCODER_TOKENIZER), "a", encoding="utf-8") as handle:
        handle.write(" ")
    with pytest.raises(BundleIntegrityError, match=r"encoder/tokenizer\.json"):
        load_bundle(str(fresh_root), bundle_id="b1")


def test_a_pickle_in_place_of_the_graph_is_refused(fresh_root):
    path = bundle_path(str(fresh_root), "b1")
    with open(os.path.join(path, ENCODER_GRAPH), "wb") as handle:
        handle.write(b"\x80\x04\x95 not a protobuf")
    with pytest.raises(UnsafeArtifactError, match="pickle"):
        verify_artifacts(path)
    with open(os.path.join(path, ENCODER_GRAPH), "wb") as handle:
        handle.write(b"PK\x03\x04 a zip, not ONNX")
    with pytest.raises(UnsafeArtifactError, match="ONNX"):
        verify_artifacts(path)


def test_a_tokenizer_other_than_the_models_is_refused(validated_root):
    path = bundle_path(str(validated_root), "b1")
    manifest = read_manifest(path)
    other = manifest.model_copy(
        update={"model": manifest.model.model_copy(update={"tokenizer_sha256": "0" * 64})}
    )
    with pytest.raises(ModelMismatchError, match="not the tokenizer"):
        open_encoder(path, other)


def test_an_export_that_deviates_is_not_bundled(st_model, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(encoder_artifact, "MAX_DEVIATION", -1.0)
    with caplog.at_level("WARNING", logger="pipelines.encoder_artifact"):
        assert encoder_artifact.write_encoder(str(tmp_path), st_model) is None
    assert "deviates from PyTorch" in caplog.text
    assert not os.path.exists(tmp_path / ENCODER_GRAPH)


@pytest.mark.slow
def test_a_bundle_without_its_encoder_answers_through_pytorch(tiny_corpus, tmp_path):
    from pipelines.build_index import run

    root = tmp_path / "root"
    run(
        [
            "--input",
            str(tiny_corpus),
            "--root",
            str(root),
            "--knowledge=false",
            "--query_encoder_artifact=false",
        ],
        bundle_id="old",
    )
    path = bundle_path(str(root), "old")
    assert read_manifest(path).query_encoder is None
    assert not os.path.exists(os.path.join(path, "encoder"))
    bundle = load_bundle(str(root), bundle_id="old", encoder="bundled")
    assert bundle.encoder.backend == "torch"
    assert _top(bundle, "How is green tea made?")


def test_a_forked_process_reopens_the_session(validated_root):
    path = bundle_path(str(validated_root), "b1")
    encoder = open_encoder(path, read_manifest(path), threads=2)
    expected = encoder.encode("what causes tides?")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            vector = encoder.encode("what causes tides?")  # reopens: the pid changed
            os.write(write, json.dumps(vector.tolist()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        payload = handle.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    np.testing.assert_array_equal(np.asarray(json.loads(payload), dtype=np.float32), expected)


def test_from_bytes_needs_no_files(validated_root):
    path = bundle_path(str(validated_root), "b1")
    manifest = read_manifest(path)
    with open(os.path.join(path, ENCODER_GRAPH), "rb") as graph:
        data = graph.read()
    with open(os.path.join(path, ENCODER_TOKENIZER), encoding="utf-8") as tokenizer:
        text = tokenizer.read()
    encoder = BundledEncoder.from_bytes(data, text, tuple(manifest.query_encoder.inputs))
    assert encoder.vocab()["the"] >= 0
    assert encoder.dimension == manifest.model.dimension


def test_a_build_over_an_active_bundle_reuses_its_encoder_files(two_bundle_root):
    # b2 was built while b1 was active, with the same model: no second export.
    first, second = (bundle_path(str(two_bundle_root), b) for b in ("b1", "b2"))
    assert read_manifest(second).query_encoder == read_manifest(first).query_encoder
    for rel in (ENCODER_GRAPH, ENCODER_TOKENIZER):
        assert os.stat(os.path.join(first, rel)).st_ino == os.stat(os.path.join(second, rel)).st_ino
    assert load_bundle(str(two_bundle_root), bundle_id="b2").encoder.backend == "onnx (bundled)"


def test_a_version_1_manifest_written_before_encoders_still_opens(fresh_root, query_encoder):
    path = bundle_path(str(fresh_root), "b1")
    manifest_file = os.path.join(path, "manifest.json")
    with open(manifest_file, encoding="utf-8") as handle:
        raw = json.load(handle)
    raw["schema_version"] = 1
    del raw["query_encoder"]
    for rel in (ENCODER_GRAPH, ENCODER_TOKENIZER):
        del raw["files"][rel]
        os.remove(os.path.join(path, rel))
    with open(manifest_file, "w", encoding="utf-8") as handle:
        json.dump(raw, handle)
    bundle = load_bundle(str(fresh_root), bundle_id="b1", model=query_encoder)
    assert bundle.manifest.query_encoder is None
    assert bundle.encoder.backend == "onnx"  # the model passed in, exported at load
