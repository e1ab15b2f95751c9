from benchmarks.build_cost import build_batches
from transforms.embed import length_bucket


def test_build_batches_are_the_builds_batches():
    texts = ["a" * 50] * 3 + ["b" * 50, "c" * 60, "d" * 250, "e" * 260, "f" * 900]
    batches = build_batches(texts, batch_size=2, batch_chars=600)
    # distinct texts once each; no batch crosses a length bucket or a limit
    assert sorted(t for batch in batches for t in batch) == sorted(set(texts))
    for batch in batches:
        assert len(batch) <= 2
        assert len({length_bucket(t) for t in batch}) == 1
        assert len(batch) * max(map(len, batch)) <= 600 or len(batch) == 1
    assert [[len(t) for t in batch] for batch in batches] == [[50, 50], [60], [250, 260], [900]]
