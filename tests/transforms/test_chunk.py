import itertools
import re

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import chunk_id, register_coders
from store.config import ChunkConfig, IngestConfig
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
    chunks = chunk_document(
        doc, count_tokens=token_counter, config=ChunkConfig(target_tokens=60), max_tokens=80
    )
    assert len(chunks) > 3
    for i, c in enumerate(chunks):
        assert doc.text[c.start : c.end] == c.text
        assert c.chunk_index == i
        assert c.chunk_id == chunk_id("long", i, c.text)
        assert 0 < c.n_tokens <= 80
        assert c.n_tokens == token_counter(c.text)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)


def test_an_encoded_blob_longer_than_the_window_still_fits_it(token_counter):
    blob = "https://example.org/" + "/".join(f"seg{i}=x{i}" for i in range(400))
    doc = _doc("blob", f"The archive lives at {blob} today.")
    assert token_counter(blob) > 254
    chunks = chunk_document(doc, count_tokens=token_counter, config=ChunkConfig(), max_tokens=254)
    assert len(chunks) > 1
    assert all(0 < c.n_tokens <= 254 for c in chunks)
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    squeeze = re.compile(r"\s+")  # every character outside whitespace is in some chunk
    assert "".join(squeeze.sub("", c.text) for c in chunks) == squeeze.sub("", doc.text)


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
        for c in chunk_document(
            d, count_tokens=token_counter, config=ChunkConfig(target_tokens=60), max_tokens=254
        )
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


# Markdown-ish documents: headings, paragraphs, lists, tables, fenced code, odd spacing.
_SENTENCE = st.from_regex(r"[A-Z][a-z]{1,10}( [a-z0-9]{1,12}){0,20}[.!?]", fullmatch=True)
_BLOCK = st.one_of(
    st.lists(_SENTENCE, min_size=1, max_size=8).map(" ".join),
    st.from_regex(r"#{1,3} [A-Z][a-z]{1,10}( [a-z]{1,8}){0,3}", fullmatch=True),
    st.lists(_SENTENCE, min_size=1, max_size=5).map(lambda xs: "\n".join(f"- {x}" for x in xs)),
    st.lists(st.from_regex(r"[a-z]{1,6} [0-9]{1,4}", fullmatch=True), min_size=1, max_size=6).map(
        lambda rows: "\n".join(f"| {r} |" for r in rows)
    ),
    st.lists(_SENTENCE, min_size=1, max_size=6).map(lambda xs: "```\n" + "\n\n".join(xs) + "\n```"),
    st.from_regex(r"[a-z]{40,400}", fullmatch=True),  # one very long "word"
)
_DOCUMENT = st.lists(
    st.tuples(_BLOCK, st.sampled_from(["\n\n", "\n", "\n\n\n", " \n\n", "\n \t\n"])),
    min_size=1,
    max_size=14,
).map(lambda parts: "".join(b + sep for b, sep in parts))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_DOCUMENT, target=st.integers(16, 200))
def test_chunk_properties_hold_with_the_models_tokenizer(token_counter, text, target):
    """Exact spans, coverage of every non-whitespace character, token bounds, determinism."""
    doc = _doc("prop.md", text)
    config = ChunkConfig(target_tokens=target)
    chunks = chunk_document(doc, count_tokens=token_counter, config=config, max_tokens=254)
    covered = bytearray(len(doc.text))
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
        assert c.text == c.text.strip() and c.text
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
        if c.n_tokens > 254:  # only a single over-long word may exceed the window
            assert len(c.text.split()) == 1
        # a heading may open a chunk, never sit inside one (generated code has no "#" lines)
        assert not [line for line in c.text.split("\n")[1:] if line.startswith("#")]
    for i, ch in enumerate(doc.text):
        assert covered[i] or ch.isspace(), f"character {i} ({ch!r}) is in no chunk"
    for a, b in itertools.pairwise(chunks):
        assert a.end <= b.start
    again = chunk_document(doc, count_tokens=token_counter, config=config, max_tokens=254)
    assert again == chunks


TWO_TOPICS = (
    "Green tea is made from leaves that are steamed soon after picking. "
    "Black tea leaves are rolled and left to oxidise before drying. "
    "Oolong tea is partly oxidised, between green and black tea. "
    "The Danube flows from the Black Forest to the Black Sea. "
    "The Rhine rises in the Swiss Alps and reaches the North Sea. "
    "The Volga is the longest river in Europe."
)


def test_semantic_chunking_breaks_where_the_topic_changes(token_counter, st_model):
    from transforms.chunk import SentenceVectors

    doc = _doc("topics.md", TWO_TOPICS)
    total = token_counter(TWO_TOPICS)
    target = total - 5  # too big for one chunk; greedy packing cuts after the fifth sentence
    plain = chunk_document(
        doc, count_tokens=token_counter, config=ChunkConfig(target_tokens=target), max_tokens=254
    )
    assert len(plain) == 2 and plain[0].text.endswith("North Sea.")
    semantic = chunk_document(
        doc,
        count_tokens=token_counter,
        config=ChunkConfig(target_tokens=target, semantic=True, min_tokens=10),
        max_tokens=254,
        embed=SentenceVectors(st_model),
    )
    assert semantic[0].text.endswith("between green and black tea.")
    assert semantic[1].text.startswith("The Danube")


def test_pdf_chunks_carry_their_pages(token_counter):
    from tests.transforms.test_formats import make_pdf
    from transforms.formats import pdf_to_text

    pages = [" ".join(f"Page {p} sentence {i} says something." for i in range(30)) for p in (1, 2)]
    title, raw, extracted = pdf_to_text(make_pdf(pages))
    doc = make_document(
        doc_id="paged.pdf",
        title=title,
        raw_text=raw,
        source_uri="paged.pdf",
        config=IngestConfig(),
        metadata=extracted,
    )
    chunks = chunk_document(
        doc, count_tokens=token_counter, config=ChunkConfig(target_tokens=40), max_tokens=254
    )
    assert chunks[0].page_start == 1 and chunks[-1].page_end == 2
    for c in chunks:
        assert c.page_start is not None and c.page_end is not None
        assert c.page_start <= c.page_end
        expected = {int(w) for w in re.findall(r"Page (\d)", c.text)}
        assert set(range(c.page_start, c.page_end + 1)) == expected
    plain = chunk_document(
        _doc("plain.md", "No pages here."),
        count_tokens=token_counter,
        config=ChunkConfig(),
        max_tokens=254,
    )
    assert (plain[0].page_start, plain[0].page_end) == (None, None)


def test_the_chunk_transform_cuts_semantically_when_configured(model_path, token_counter):
    from apache_beam.metrics.metric import MetricsFilter

    doc = _doc("topics.md", TWO_TOPICS)
    target = token_counter(TWO_TOPICS) - 5
    config = ChunkConfig(target_tokens=target, semantic=True, min_tokens=10)
    p = TestPipeline()
    out = p | beam.Create([doc]) | ChunkDocuments(model=model_path, config=config, max_tokens=254)
    assert_that(
        out[GOOD] | beam.Map(lambda c: c.text.split(". ")[-1]),
        equal_to(
            [
                "Oolong tea is partly oxidised, between green and black tea.",
                "The Volga is the longest river in Europe.",
            ]
        ),
    )
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_name("sentences_embedded"))["counters"]
    assert sum(c.committed for c in counters) == 6  # each sentence of the one oversize section


def test_a_text_files_hash_comment_is_no_heading_but_markdowns_hash_line_is(token_counter):
    text = (
        "Configuration\n=============\n\n"
        + "The parser reads one option per line of the file. " * 3
        + "\n\n# sign (unless quoted) and extend to the end of the line\n\n"
        + "Every later paragraph still belongs to the configuration section. " * 3
    )
    config = ChunkConfig(target_tokens=30)
    plain = chunk_document(
        _doc("notes.txt", text), count_tokens=token_counter, config=config, max_tokens=254
    )
    assert len(plain) > 1
    assert {c.heading_path for c in plain} == {"Configuration"}
    md = chunk_document(
        _doc("notes.md", text), count_tokens=token_counter, config=config, max_tokens=254
    )
    # In Markdown the "#" line is a level-1 heading: it replaces the setext one.
    assert md[-1].heading_path == "sign (unless quoted) and extend to the end of the line"
