"""benchmarks.experiments.walk_fusion: the fusion rules compared on the walk's routes."""

from benchmarks.experiments.walk_fusion import RRF_K, interleave, reserve, rrf


def test_rrf_sums_weighted_reciprocal_ranks_and_breaks_ties_by_row():
    # Row 7: 1/(k+1) + 2/(k+2); row 3: 1/(k+2) + 2/(k+1); row 3 wins on the heavier arm.
    fused = rrf([([7, 3], 1.0), ([3, 7], 2.0)])
    assert fused == [3, 7]
    assert 1 / (RRF_K + 2) + 2 / (RRF_K + 1) > 1 / (RRF_K + 1) + 2 / (RRF_K + 2)
    # Equal scores: the lower row first.
    assert rrf([([5], 1.0), ([2], 1.0)]) == [2, 5]


def test_interleave_takes_turns_keeps_each_row_once_and_appends_the_longer_tail():
    assert interleave([1, 2, 3, 4], [9, 2, 8]) == [1, 9, 2, 3, 8, 4]
    assert interleave([], [5, 6]) == [5, 6]
    assert interleave([1, 1], []) == [1]


def test_reserve_moves_the_best_row_not_above_a_place_up_to_it():
    assert reserve([1, 2, 3, 4, 5], [5, 9], (3,)) == [1, 2, 5, 3, 4]
    assert reserve([1, 2, 3], [2, 9], (3,)) == [1, 2, 9, 3]  # 2 is already above place 3
    assert reserve([1, 2, 3, 4], [4, 3], (2, 4)) == [1, 4, 2, 3]  # 3 is above place 4 by then
    assert reserve([1, 2], [], (2,)) == [1, 2]
