import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query.fusion import CONFIRMED, KEPT, RRF_K, ArmHit, fuse

IDS = [f"c{i:03d}" for i in range(200)]


def _arm(rows, score=lambda r: 1.0):
    return [ArmHit(r, rank, score(r)) for rank, r in enumerate(rows, start=1)]


def test_rrf_scores_and_lexical_weight():
    dense, lexical = _arm([1, 2, 3]), _arm([3, 4])
    out = fuse(dense, lexical, chunk_ids=IDS, k=4, n_eligible=100)
    scores = {f.row: f.score for f in out}
    assert scores[3] == round(1 / (RRF_K + 3) + 1 / (RRF_K + 1), 6)
    assert out[0].row == 3
    only_dense = fuse(dense, lexical, chunk_ids=IDS, k=4, n_eligible=100, lexical_weight=0.0)
    assert [f.row for f in only_dense] == [1, 2, 3]


def test_reservation_fills_the_list_with_marked_dense_rows():
    dense = [ArmHit(r, i, 0.9 - i / 100) for i, r in enumerate([5, 6, 7, 8], start=1)]
    lexical = _arm([9])
    out = fuse(dense, lexical, chunk_ids=IDS, k=3, n_eligible=4, min_similarity=0.95)
    assert [(f.row, f.fallback) for f in out] == [(5, True), (6, True), (7, True)]
    partial = fuse(dense, lexical, chunk_ids=IDS, k=3, n_eligible=4, min_similarity=0.885)
    assert [(f.row, f.fallback) for f in partial] == [(5, False), (6, True), (7, True)]


def test_reservation_is_capped_at_ten_rows():
    dense = [ArmHit(r, r + 1, 0.1) for r in range(30)]
    out = fuse(dense, [], chunk_ids=IDS, k=20, n_eligible=30, min_similarity=0.5)
    assert len(out) == 10 and all(f.fallback for f in out)


def test_ties_break_by_dense_similarity_then_chunk_id():
    dense = [ArmHit(10, 1, 0.5)]
    lexical = [ArmHit(11, 1, 3.0), ArmHit(12, 2, 3.0)]
    out = fuse(dense, lexical, chunk_ids=IDS, k=3, n_eligible=50)
    assert [f.row for f in out] == [10, 11, 12]  # equal RRF score: dense-backed row first


@settings(max_examples=60, deadline=None)
@given(
    st.permutations(list(range(40))),
    st.permutations(list(range(40))),
    st.integers(1, 15),
    st.sets(st.integers(0, 39), max_size=20),
)
def test_scores_do_not_depend_on_the_other_candidates(d_order, l_order, k, dropped):
    dense, lexical = _arm(d_order[:20]), _arm(l_order[:20])
    full = {f.row: f.score for f in fuse(dense, lexical, chunk_ids=IDS, k=40, n_eligible=40)}
    fewer_dense = [h for h in dense if h.row not in dropped]
    fewer_lexical = [h for h in lexical if h.row not in dropped]
    part = fuse(fewer_dense, fewer_lexical, chunk_ids=IDS, k=40, n_eligible=40)
    for f in part:
        assert f.score == full[f.row]
    assert len(fuse(dense, lexical, chunk_ids=IDS, k=k, n_eligible=40)) == k


@settings(max_examples=80, deadline=None)
@given(
    st.permutations(list(range(40))),
    st.permutations(list(range(40))),
    st.permutations(list(range(40))),
    st.sampled_from([1.0, 2.0, 4.0]),
    st.sampled_from([0.0, 2.0, 8.0]),
)
def test_the_leading_arm_keeps_its_places_and_fusion_its_share(d, lx, w, ratio, weight):
    """On a walk route the walk leads (issue 57): its top j rows are in the first
    j + j / ratio places and plain fusion's top j in the first j * (ratio + 1), whatever
    the walk's weight, so the list cannot trail either by more than that."""
    dense, lexical, walk = _arm(d[:25]), _arm(lx[:25]), _arm(w[:20])
    led = fuse(dense, lexical, chunk_ids=IDS, k=40, n_eligible=40, extra={"walk": walk},
               weights={"walk": weight}, lead="walk", lead_ratio=ratio)  # fmt: skip
    place = {f.row: i for i, f in enumerate(led, start=1)}
    plain = [f.row for f in fuse(dense, lexical, chunk_ids=IDS, k=40, n_eligible=40)]
    # Plain fusion's top row, where both chunk arms rank it in their top CONFIRMED,
    # keeps the first place (one place more for the walk's rows).
    confirmed = plain[0] in d[:CONFIRMED] and plain[0] in lx[:CONFIRMED]
    if confirmed:
        assert place[plain[0]] == 1
    for j in range(1, 11):
        assert all(place[h.row] <= j + j / ratio + confirmed for h in walk[:j])
        assert all(place[row] <= j * (ratio + 1) for row in plain[:j])
    assert sorted(place) == sorted({*d[:25], *lx[:25], *w[:20]})


def test_a_top_row_both_chunk_arms_confirm_keeps_first_place_where_another_arm_leads():
    dense, walk = _arm([5, 1, 2, 3]), _arm([7, 8, 9])
    led = fuse(dense, _arm([5, 2, 1]), chunk_ids=IDS, k=5, n_eligible=100,
               extra={"walk": walk}, weights={"walk": 8.0}, lead="walk", lead_ratio=4)  # fmt: skip
    assert [f.row for f in led] == [5, 7, 8, 9, 1]
    # Confirmed by one chunk arm only (BM25 ranks it third): the walk's rows go first.
    led = fuse(dense, _arm([2, 1, 5]), chunk_ids=IDS, k=5, n_eligible=100,
               extra={"walk": walk}, weights={"walk": 8.0}, lead="walk", lead_ratio=4)  # fmt: skip
    assert [f.row for f in led][:3] == [7, 8, 9]


@settings(max_examples=80, deadline=None)
@given(
    st.permutations(list(range(40))),
    st.permutations(list(range(40))),
    st.permutations(list(range(40))),
    st.sampled_from([1.0, 2.0, 8.0, 100.0]),
)
def test_a_weighted_arm_that_does_not_lead_keeps_plain_fusions_top_places(d, lx, w, weight):
    """Issue 57: a question wrongly sent to the walk (which weighs in without leading)
    keeps plain fusion's top KEPT rows: the c-th no later than the weighted order's c-th,
    so its top row stays first, whatever the walk's weight."""
    dense, lexical, walk = _arm(d[:25]), _arm(lx[:25]), _arm(w[:20])
    mixed = fuse(dense, lexical, chunk_ids=IDS, k=40, n_eligible=40, extra={"walk": walk},
                 weights={"walk": weight})  # fmt: skip
    place = {f.row: i for i, f in enumerate(mixed, start=1)}
    plain = [f.row for f in fuse(dense, lexical, chunk_ids=IDS, k=40, n_eligible=40)]
    assert place[plain[0]] == 1
    for c in range(1, KEPT + 1):
        assert place[plain[c - 1]] <= 2 * c - 1
    # Below the kept places, the weighted order is the total order by score.
    rest = [f for f in mixed if f.row not in plain[:KEPT]]
    assert rest == sorted(rest, key=lambda f: -f.score)


def test_without_a_leading_arm_ranked_the_order_is_the_total_order():
    dense, lexical = _arm([1, 2, 3]), _arm([3, 4])
    plain = fuse(dense, lexical, chunk_ids=IDS, k=4, n_eligible=100)
    led = fuse(dense, lexical, chunk_ids=IDS, k=4, n_eligible=100, extra={"walk": []},
               lead="walk")  # fmt: skip
    assert led == plain
    with pytest.raises(ValueError, match="lead_ratio"):
        fuse(dense, lexical, chunk_ids=IDS, k=4, n_eligible=100, lead="walk", lead_ratio=0)
