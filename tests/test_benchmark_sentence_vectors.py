"""benchmarks.sentence_vectors: the sentence split, encoding order and per-chunk scoring."""

import numpy as np

from benchmarks import sentence_vectors as sv


def test_every_sentence_is_kept_with_the_chunk_it_came_from():
    texts = ["Aspirin lowers fever. It also thins blood.", "One sentence only", "A.\n\nB two."]
    found, owner = sv.chunk_sentences(texts)
    assert found == [
        "Aspirin lowers fever.",
        "It also thins blood.",
        "One sentence only",
        "A.",
        "B two.",
    ]
    assert owner.tolist() == [0, 0, 1, 2, 2]


def test_encoding_runs_shortest_first_and_returns_input_order():
    seen: list[list[str]] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.append(texts)
        return np.array([[len(t), i] for i, t in enumerate(texts)], dtype=np.float32)

    vectors = sv.encode_sorted(encode, ["ccc", "a", "bb"])
    assert seen == [["a", "bb", "ccc"]]
    assert vectors[:, 0].tolist() == [3, 1, 2]  # row i belongs to input text i


def test_each_chunk_scores_its_best_sentence_and_ranking_breaks_ties_by_row():
    similarity = np.array([0.2, 0.9, 0.4, 0.1])
    best = sv.best_per_chunk(similarity, np.array([0, 0, 2, 2]), 4)
    np.testing.assert_allclose(best, [0.9, -1.0, 0.4, -1.0])
    assert sv.ranked(best) == [0, 2, 1, 3]
    assert sv.ranked(np.array([0.5, 0.7, 0.5]), depth=2) == [1, 0]
