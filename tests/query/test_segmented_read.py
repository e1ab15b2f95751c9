"""Several segments searched as one: the small segments' rows searched exactly in one
matrix product beside the large segments' HNSW files, and access-class partitions that
cover every segment."""

import numpy as np

from query.segments import SegmentedIndex, _exact_parts, _ExactPart, _Part
from store.config import AnnConfig
from transforms.ann import build_index


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 16)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_an_hnsw_part_and_the_exact_part_merge_into_the_exact_nearest_live_rows():
    rng = np.random.default_rng(3)
    large, small = _vectors(rng, 400), _vectors(rng, 30)
    large_keys = np.arange(1, 401, dtype=np.uint64)
    small_keys = np.arange(1001, 1031, dtype=np.uint64)
    deleted = large_keys[::7]
    index = SegmentedIndex(
        [_Part(build_index(large_keys, large, config=AnnConfig()), deleted)],
        _ExactPart(small_keys, small),
    )
    assert len(index) == 400 - len(deleted) + 30
    everything = np.concatenate([large, small])
    keys = np.concatenate([large_keys, small_keys])
    alive = ~np.isin(keys, deleted)
    for query in _vectors(rng, 20):
        found = index.search(query, 10)
        exact = keys[alive][np.argsort(-(everything[alive] @ query), kind="stable")[:10]]
        assert not np.isin(found.keys, deleted).any()
        assert len(set(found.keys.tolist()) & set(exact.tolist())) >= 9  # HNSW recall
        assert np.all(np.diff(found.distances) >= 0)
        np.testing.assert_allclose(
            found.distances, 1 - np.sort(everything[alive] @ query)[::-1][:10], atol=1e-3
        )


def test_exact_parts_cover_small_segments_for_all_and_leftover_classes_for_their_class():
    rng = np.random.default_rng(5)
    small_vectors = _vectors(rng, 4)
    small = [
        (
            np.array([1, 2, 3, 4], dtype=np.uint64),
            small_vectors,
            np.array(["public", "internal", "public", "internal"], dtype=object),
        )
    ]
    leftover = [(np.array([9], dtype=np.uint64), _vectors(rng, 1), "confidential")]
    parts = _exact_parts(small, leftover)
    assert sorted(parts[None].keys.tolist()) == [1, 2, 3, 4]
    assert sorted(parts["public"].keys.tolist()) == [1, 3]
    assert sorted(parts["internal"].keys.tolist()) == [2, 4]
    assert parts["confidential"].keys.tolist() == [9]  # never under None: the HNSW has it
    assert parts["internal"].search(small_vectors[1], 1).keys.tolist() == [2]


def test_a_part_with_most_rows_deleted_still_gives_count_live_neighbours():
    rng = np.random.default_rng(11)
    vectors = _vectors(rng, 300)
    keys = np.arange(1, 301, dtype=np.uint64)
    deleted = keys[np.arange(300) % 10 != 0]  # nine rows in ten deleted
    index = SegmentedIndex([_Part(build_index(keys, vectors, config=AnnConfig()), deleted)])
    alive = ~np.isin(keys, deleted)
    assert len(index) == 30
    for query in _vectors(rng, 10):
        found = index.search(query, 10)
        assert len(found.keys) == 10 and not np.isin(found.keys, deleted).any()
        exact = keys[alive][np.argsort(-(vectors[alive] @ query), kind="stable")[:10]]
        assert len(set(found.keys.tolist()) & set(exact.tolist())) >= 9
    assert len(index.search(_vectors(rng, 1)[0], 50).keys) == 30  # all there is
