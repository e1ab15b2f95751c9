import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from evidex.config import ChunkConfig, IngestConfig
from schemas import chunk_id, register_coders
from transforms.chunk import ChunkDocuments, chunk_document
from transforms.ingest import make_document
from transforms.tags import BAD, GOOD


def _doc(doc_id: str, text: str):
    return make_document(
        doc_id=doc_id, title=doc_id, raw_text=text, source_uri=doc_id, config=IngestConfig()
    )


LONG = "\n\n".join(
    f"Paragraph {i} explains how the scheduler assigns work to idle workers. " * 3
    for i in range(12)
)


def test_chunks_quote_their_document_exactly_and_respect_the_window(token_counter):
    doc = _doc("long", LONG)
    chunks = chunk_document(doc, count_tokens=token_counter, target_tokens=60, max_tokens=80)
    assert len(chunks) > 3
    for i, c in enumerate(chunks):
        assert doc.text[c.start : c.end] == c.text
        assert c.chunk_index == i
        assert c.chunk_id == chunk_id("long", i, c.text)
        assert 0 < c.n_tokens <= 80
        assert c.n_tokens == token_counter(c.text)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)


def test_token_counter_counts_with_the_models_own_tokenizer(token_counter):
    # WordPiece splits an unusual word into several pieces; whitespace counting would say 1.
    assert token_counter("hello") == 1
    assert token_counter("electroencephalography") > 1
    assert token_counter("word " * 600) == 600  # no truncation at the model window


def test_chunk_documents_transform(model_path, token_counter):
    register_coders()
    docs = [_doc("a", "Alpha beta gamma.\n\nDelta epsilon."), _doc("b", LONG)]
    expected = [
        (c.doc_id, c.chunk_index, c.start, c.end)
        for d in docs
        for c in chunk_document(d, count_tokens=token_counter, target_tokens=60, max_tokens=254)
    ]
    with TestPipeline() as p:
        out = (
            p
            | beam.Create(docs)
            | ChunkDocuments(model=model_path, config=ChunkConfig(target_tokens=60), max_tokens=254)
        )
        assert_that(
            out[GOOD] | beam.Map(lambda c: (c.doc_id, c.chunk_index, c.start, c.end)),
            equal_to(expected),
            label="chunks",
        )
        assert_that(out[BAD], equal_to([]), label="no_dead_letters")
