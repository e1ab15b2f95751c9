"""Access control inside each arm, on a 3,000-row bundle where the caller sees 0.1%."""

import numpy as np
import pytest

from query.bundle import LoadedBundle
from query.fusion import fuse
from query.lexical import LexicalIndex
from query.retrieval import dense_arm, lexical_arm, visible_rows
from store.config import AnnConfig, LexicalConfig
from transforms.ann import build_index
from transforms.lexical import build_bm25

N = 3000
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


@pytest.fixture(scope="module")
def big_bundle(tmp_path_factory) -> LoadedBundle:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((N, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keys = np.arange(1, N + 1, dtype=np.uint64)
    texts = [" ".join(rng.choice(WORDS, size=6)) + f" row{i}" for i in range(N)]
    access = np.array(["restricted"] * N, dtype=object)
    access[rng.choice(N, size=3, replace=False)] = "public"  # 0.1% visible
    directory = tmp_path_factory.mktemp("bm25")
    build_bm25(texts, config=LexicalConfig()).save(str(directory))
    bundle = LoadedBundle(
        path="",
        manifest=None,
        documents={},
        chunk_ids=[f"c{i:05d}" for i in range(N)],
        chunk_doc_ids=[f"d{i}" for i in range(N)],
        starts=np.zeros(N),
        ends=np.ones(N),
        access_classes=access,
        keys=keys,
        index=build_index(keys, vectors, config=AnnConfig()),
        encoder=None,  # type: ignore[arg-type]  # queries here come as vectors
        lexical=LexicalIndex.open(str(directory), LexicalConfig(), rows=N),
    )
    bundle._vectors = vectors
    return bundle


@pytest.mark.parametrize("k", [1, 10, 1000])
def test_no_arm_returns_an_invisible_row_and_results_fill_k(big_bundle, k):
    rows = visible_rows(big_bundle, ["public"])
    visible = set(rows.tolist())
    assert len(visible) == 3
    query_vector = big_bundle.vectors()[0]
    dense = dense_arm(big_bundle, query_vector, max(k, 100), rows)
    lexical = lexical_arm(big_bundle, "alpha beta gamma", max(k, 100), rows)
    assert {h.row for h in dense} <= visible and {h.row for h in lexical} <= visible
    fused = fuse(dense, lexical, chunk_ids=big_bundle.chunk_ids, k=k, n_eligible=3)
    assert {f.row for f in fused} <= visible
    assert len(fused) == min(k, 3)


def test_unrestricted_callers_use_the_hnsw_index(big_bundle):
    assert visible_rows(big_bundle, None) is None
    assert visible_rows(big_bundle, ["public", "restricted"]) is None
    hits = dense_arm(big_bundle, big_bundle.vectors()[42], 10, None)
    assert hits[0].row == 42 and [h.rank for h in hits] == list(range(1, 11))


def test_lexical_arm_only_ranks_rows_with_a_positive_score(big_bundle):
    hits = lexical_arm(big_bundle, "row17", 50, None)
    assert [h.row for h in hits] == [17]
    assert lexical_arm(big_bundle, "unknownword", 50, None) == []


def test_a_large_visible_class_is_searched_in_its_own_hnsw_partition(big_bundle):
    restricted = np.flatnonzero(big_bundle.access_classes == "restricted")
    vectors = big_bundle.vectors()
    partition = build_index(big_bundle.keys[restricted], vectors[restricted], config=AnnConfig())
    big_bundle.partitions["restricted"] = partition
    try:
        rows = visible_rows(big_bundle, ["restricted"])
        assert len(rows) == N - 3
        for probe in (0, 7, 42, 2999):
            query_vector = vectors[probe]
            via_partition = dense_arm(big_bundle, query_vector, 50, rows, exact_max_rows=100)
            exact = dense_arm(big_bundle, query_vector, 50, rows, exact_max_rows=10**9)
            assert {h.row for h in via_partition} <= set(rows.tolist())
            overlap = {h.row for h in via_partition[:10]} & {h.row for h in exact[:10]}
            assert len(overlap) >= 9
            assert len(via_partition) == 50
        # a class too small for its partition (or without one) is searched exactly
        public = visible_rows(big_bundle, ["public"])
        hits = dense_arm(big_bundle, vectors[0], 10, public, exact_max_rows=100)
        assert {h.row for h in hits} == set(public.tolist())
    finally:
        big_bundle.partitions.clear()
