"""benchmarks.experiments.sentence_vectors: the sentence split, encoding order and per-chunk
scoring."""

import numpy as np

from benchmarks.experiments import sentence_vectors as sv


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


def test_sentence_spans_quote_each_sentence_exactly():
    texts = ["Aspirin lowers fever. It also thins blood.", "A.\n\nB two."]
    spans = sv.sentence_spans(texts)
    assert [[t[a:b] for a, b in s] for t, s in zip(texts, spans, strict=True)] == [
        ["Aspirin lowers fever.", "It also thins blood."],
        ["A.", "B two."],
    ]


def test_late_pooling_averages_the_tokens_inside_each_span_and_skips_special_tokens():
    # rows: [CLS], "ab", "cd", "ef", [SEP]; the special tokens have empty offsets
    tokens = np.array([[9, 9], [3, 0], [1, 0], [0, 2], [9, 9]], dtype=np.float32)
    offsets = [(0, 0), (0, 2), (3, 5), (6, 8), (0, 0)]
    pooled = sv.pool_spans(tokens, offsets, [(0, 5), (4, 8), (20, 30)])
    np.testing.assert_allclose(pooled[0], [1.0, 0.0])  # mean (2, 0), normalized
    np.testing.assert_allclose(pooled[1], [np.sqrt(0.2), np.sqrt(0.8)], rtol=1e-6)  # (0.5, 1)
    np.testing.assert_array_equal(pooled[2], [0.0, 0.0])  # no token inside: a zero vector


def test_paired_interval_brackets_the_mean_gain_and_is_exact_for_a_constant_gain():
    np.testing.assert_allclose(sv.paired_interval(np.full(50, 0.25)), (0.25, 0.25))
    gains = np.array([0.0, 0.0, 0.0, 1.0] * 25)  # mean 0.25, half the mass far from it
    low, high = sv.paired_interval(gains, samples=2000)
    assert 0.1 < low < 0.25 < high < 0.4
    assert sv.paired_interval(gains, samples=2000) == (low, high)  # seeded


def test_per_query_ndcg_comes_from_trec_eval():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    run = {"q1": {"d1": 2.0, "x": 1.0}, "q2": {"x": 2.0, "d2": 1.0}}
    scores = sv.per_query_ndcg(qrels, run)
    assert set(scores) == {"q1", "q2"}  # unjudged-by-run queries are not scored here
    assert scores["q1"] == 1.0
    assert abs(scores["q2"] - 1 / np.log2(3)) < 1e-9  # the relevant doc at rank 2
