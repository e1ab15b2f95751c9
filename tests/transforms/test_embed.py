import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import Chunk, DeadLetter, register_coders
from transforms.embed import (
    EmbedChunks,
    EmbedTexts,
    SentenceTransformerHandler,
    _failed_inference,
    _join,
    length_batches,
)
from transforms.tags import BAD, GOOD


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(f"c{i}", "d", "r", i, 0, len(text), text, 3, "public")


def test_handler_returns_unit_vectors_in_input_order(model_path, st_model):
    handler = SentenceTransformerHandler(model=model_path, batch_size=4)
    texts = ["a much longer sentence about rivers and the sea", "short", "medium text here"]
    results = list(handler.run_inference([(f"k{i}", t) for i, t in enumerate(texts)], st_model))
    assert [r.example for r in results] == ["k0", "k1", "k2"]
    vectors = np.stack([r.inference for r in results])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    direct = st_model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, direct, atol=1e-5)


def test_embed_chunks_embeds_each_distinct_text_once(model_path):
    register_coders()
    chunks = [_chunk(0, "The cat sat."), _chunk(1, "The cat sat."), _chunk(2, "Dogs bark.")]
    p = TestPipeline()
    out = p | beam.Create(chunks) | EmbedChunks(model=model_path, batch_size=8)
    assert_that(
        out[GOOD]
        | beam.Map(
            lambda e: (
                e.chunk.chunk_id,
                len(e.embedding),
                round(float(np.linalg.norm(e.embedding)), 4),
            )
        ),
        equal_to([("c0", 384, 1.0), ("c1", 384, 1.0), ("c2", 384, 1.0)]),
        label="embedded",
    )
    assert_that(out[BAD], equal_to([]), label="no_dead_letters")
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_name("num_inferences"))["counters"]
    assert sum(c.committed for c in counters) == 2


def test_failed_inference_is_reported_on_every_chunk_of_the_text():
    failure = (
        [("k1", "text one"), ("k2", "text two")],
        (RuntimeError, "RuntimeError('out of memory')", ["tb"]),
    )
    errors = list(_failed_inference(failure))
    assert errors == [
        ("k1", ("RuntimeError", "RuntimeError('out of memory')")),
        ("k2", ("RuntimeError", "RuntimeError('out of memory')")),
    ]
    grouped = {
        "chunks": [_chunk(0, "text one"), _chunk(1, "text one")],
        "vectors": [],
        "errors": [errors[0][1]],
    }
    out = [o.value for o in _join(("k1", grouped))]
    assert out == [
        DeadLetter("embed", "c0", "RuntimeError", "RuntimeError('out of memory')"),
        DeadLetter("embed", "c1", "RuntimeError", "RuntimeError('out of memory')"),
    ]


def test_a_model_that_cannot_load_fails_with_a_clear_error(tmp_path):
    register_coders()
    bogus = tmp_path / "not-a-model"
    bogus.mkdir()
    (bogus / "config.json").write_text("{}")
    with pytest.raises(Exception, match="cannot load embedding model"), TestPipeline() as p:
        _ = p | beam.Create([_chunk(0, "text")]) | EmbedChunks(model=str(bogus))


def _pairs(*lengths: int) -> list[tuple[str, str]]:
    return [(f"k{i}", "x" * n) for i, n in enumerate(lengths)]


def test_batches_are_cut_by_count_and_by_padded_length():
    pairs = _pairs(10, 10, 10, 10, 10, 30, 40, 100)
    batches = list(length_batches((0, pairs), batch_size=3, batch_chars=100))
    lengths = [[len(text) for _, text in batch] for batch in batches]
    # three texts at most (3 x 30 fits 100 characters); 2 x 100 does not, so 100 is alone
    assert lengths == [[10, 10, 10], [10, 10, 30], [40], [100]]
    long = list(length_batches((0, _pairs(250, 300)), batch_size=64, batch_chars=100))
    assert [[len(t) for _, t in b] for b in long] == [[250], [300]]


def test_batches_depend_only_on_content():
    pairs = _pairs(5, 7, 7, 9, 12, 12, 12, 20)
    first = list(length_batches((0, pairs), batch_size=4, batch_chars=40))
    again = list(length_batches((0, list(reversed(pairs))), batch_size=4, batch_chars=40))
    assert first == again
    assert [pair for batch in first for pair in batch] == sorted(
        pairs, key=lambda kv: (len(kv[1]), kv[0])
    )


@pytest.mark.parametrize("size, chars", [(0, 100), (8, 0)])
def test_batching_limits_must_be_positive(size, chars):
    with pytest.raises(ValueError, match="must be positive"):
        EmbedTexts(model="unused", batch_size=size, batch_chars=chars)
