"""Query embedding by ONNX Runtime reproduces the bundle model's PyTorch vectors."""

import threading

import numpy as np
import pytest

from query import encoder as encoder_module
from query.encoder import EncoderError, QueryEncoder

TEXTS = [
    "0-dimensional biomaterials show inductive properties.",
    "what causes tides?",
    "Which river reaches the Black Sea, and who first mapped it?",
    "x",
    "résumé naïve café — «quoted» ünïcode",
]


@pytest.fixture(scope="module")
def onnx_encoder(st_model):
    return QueryEncoder.load(st_model, "onnx")


def test_onnx_vectors_match_pytorch(onnx_encoder, st_model):
    assert onnx_encoder.backend == "onnx"
    expected = st_model.encode(TEXTS, normalize_embeddings=True)
    actual = np.vstack([onnx_encoder.encode(t) for t in TEXTS])
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    assert np.abs(actual - expected).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(actual, axis=1), 1.0, atol=1e-5)


def test_onnx_truncates_long_queries_like_the_model(onnx_encoder, st_model):
    long = " ".join(["grounded retrieval needs exact evidence spans"] * 120)
    expected = st_model.encode([long], normalize_embeddings=True)[0]
    assert np.abs(onnx_encoder.encode(long) - expected).max() < 1e-4


def test_concurrent_queries_get_their_own_vectors(onnx_encoder):
    expected = {t: onnx_encoder.encode(t) for t in TEXTS}
    results: list[tuple[str, np.ndarray]] = []
    lock = threading.Lock()

    def worker(offset: int) -> None:
        for i in range(20):
            text = TEXTS[(offset + i) % len(TEXTS)]
            vector = onnx_encoder.encode(text)
            with lock:
                results.append((text, vector))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80
    for text, vector in results:
        np.testing.assert_array_equal(vector, expected[text])


def test_torch_backend_is_the_model_itself(st_model):
    encoder = QueryEncoder.load(st_model, "torch")
    assert encoder.backend == "torch"
    expected = st_model.encode(["what causes tides?"], normalize_embeddings=True)[0]
    np.testing.assert_array_equal(encoder.encode("what causes tides?"), expected)


def test_a_graph_that_deviates_is_refused(st_model, monkeypatch, caplog):
    # No export reproduces PyTorch within a negative tolerance: "onnx" must refuse,
    # "auto" must fall back to PyTorch and say why.
    monkeypatch.setattr(encoder_module, "MAX_DEVIATION", -1.0)
    with pytest.raises(EncoderError, match="deviates from PyTorch"):
        QueryEncoder.load(st_model, "onnx")
    with caplog.at_level("WARNING", logger="query.encoder"):
        fallback = QueryEncoder.load(st_model, "auto")
    assert fallback.backend == "torch"
    assert "deviates from PyTorch" in caplog.text


def test_unknown_backend_is_a_clear_error(st_model):
    with pytest.raises(ValueError, match="auto, bundled, onnx, torch"):
        QueryEncoder.load(st_model, "tensorrt")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_a_padded_batch_gives_each_text_its_own_vector(backend, onnx_encoder, st_model):
    encoder = onnx_encoder if backend == "onnx" else QueryEncoder.load(st_model, "torch")
    batch = encoder.encode_batch(TEXTS)
    assert batch.dtype == np.float32 and batch.shape == (len(TEXTS), 384)
    for text, vector in zip(TEXTS, batch, strict=True):
        assert np.abs(vector - encoder.encode(text)).max() < 1e-5
    assert encoder.encode_batch([]).shape == (0, 384)
