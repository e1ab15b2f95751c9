"""benchmarks.experiments.lexical_variants: RM3 term weights and weighted BM25 scoring."""

import numpy as np
import pytest

from benchmarks.experiments.lexical_variants import Rm3, TermScorer, rm3_weights
from store.config import LexicalConfig
from transforms.lexical import build_bm25


def test_rm3_mixes_the_query_with_the_heaviest_feedback_terms():
    # Relevance model: a = 2 * 1/2 = 1.0; c = 2 * 1/2 + 1 * 2/4 = 1.5; d = 1 * 2/4 = 0.5.
    # The two heaviest (c, a) scaled to sum 1: c 0.6, a 0.4; d is dropped.
    feedback = [(2.0, ["a", "c"]), (1.0, ["c", "c", "d", "d"])]
    weights = rm3_weights(["a", "b"], feedback, Rm3(texts=2, terms=2, original=0.5))
    assert weights == pytest.approx({"a": 0.25 + 0.2, "b": 0.25, "c": 0.3})
    assert sum(weights.values()) == pytest.approx(1.0)


def test_rm3_breaks_equal_weights_by_term():
    weights = rm3_weights(["q"], [(1.0, ["z", "y", "x"])], Rm3(texts=1, terms=2, original=0.0))
    assert weights == pytest.approx({"q": 0.0, "x": 0.5, "y": 0.5})


def test_weighted_scores_are_the_weighted_sum_of_single_term_scores():
    config = LexicalConfig(stemmer=None, stopwords=None, context_chunks=0)
    index = build_bm25(["rivers flow north", "rivers freeze", "mountains"], config=config)
    score = TermScorer(index, rows=3)
    river, flow = score({"rivers": 1.0}), score({"flow": 1.0})
    assert river[2] == 0 and flow[1] == 0 and river[0] > 0 and flow[0] > 0
    np.testing.assert_allclose(score({"rivers": 0.5, "flow": 2.0}), 0.5 * river + 2.0 * flow)
    assert score.known(["rivers", "lakes"]) == ["rivers"]
    assert not score({"lakes": 1.0}).any()
