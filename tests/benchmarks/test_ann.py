"""benchmarks.ann on a small seeded set: the plumbing and the sanity of its figures."""

import json

import numpy as np

from benchmarks import ann


def _seed_vectors(count: int = 300, dimension: int = 384) -> np.ndarray:
    # Anisotropic like sentence embeddings: a shared direction and a decaying spectrum.
    rng = np.random.default_rng(7)
    scale = 1 / np.sqrt(np.arange(1, dimension + 1))
    vectors = rng.standard_normal((count, dimension)) * scale + 0.3 * np.ones(dimension) / 20
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_expand_is_seeded_unit_norm_and_new():
    real = _seed_vectors(50)
    first = ann.expand(real, 400, seed=3)
    assert first.shape == (400, 384) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1, atol=1e-5)
    np.testing.assert_array_equal(first, ann.expand(real, 400, seed=3))
    assert (first @ real.T).max() < 0.999  # no real vector is copied through


def test_make_dataset_holds_queries_out_of_the_index():
    real = _seed_vectors(100)
    vectors, queries, _ = ann.make_dataset(real, 80, 20, seed=0)
    rows = {v.tobytes() for v in vectors}
    assert len(vectors) == 80 and len(queries) == 20
    assert not rows & {q.tobytes() for q in queries}


def test_benchmark_on_5000_vectors(tmp_path):
    source, out = tmp_path / "seed.npy", tmp_path / "report.json"
    np.save(source, _seed_vectors())
    argv = ["--vectors", str(source), "--n", "5000", "--queries", "200", "--repeats", "1"]
    assert ann.main([*argv, "--ef", "64", "128", "--json", str(out)]) == 0
    report = json.loads(out.read_text())

    assert report["n"] == 5000 and report["queries"] == 200 and report["k"] == 48
    assert report["build_s"] > 0 and report["file_bytes"] > 5000 * 384 * 4
    assert report["exact_ms"]["p50"] > 0 and report["exact_ms"]["p95"] > 0
    assert [row["expansion_search"] for row in report["hnsw"]] == [64, 128]
    for row in report["hnsw"]:
        assert 0 <= row["min_recall"] <= row["mean_recall"] <= 1
        assert row["ms"]["p50"] > 0 and row["ms"]["p95"] >= row["ms"]["p50"]
        assert row["p95_ratio"] > 0
        assert row["mean_recall"] >= 0.95
