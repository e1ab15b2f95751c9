"""Unicode (issue 9, item 5) on the pure functions the pipeline runs, with the real
tokenizer and the real spaCy pipeline (no build needed).

Spans are Python code-point offsets into the NFC-normalized document text.
"""

import itertools
import unicodedata

import pytest

from algorithms.extract import extract_from_doc
from algorithms.normalize import normalize_surface
from schemas import normalize_text, revision_of
from store.config import DEFAULT_SPACY_PIPELINE, ChunkConfig, IngestConfig
from transforms.chunk import chunk_document
from transforms.extract import load_spacy
from transforms.ingest import make_document

HOSTILE_TEXT = (
    "# Zürich and the Danube\n\n"
    "The Danube\u200b river flows past Vienna\u200d and Budapest; the Cafe\u0301 Central "
    "in Vienna opened in 1876. Payment limits are \u202eRs 500\u202c per day for "
    "UPI\u00adLite, and the Ｆｕｌｌｗｉｄｔｈ Bank caps cash at 2,000 EUR.\n\n"
    "Cyrillic lookalikes: Vіenna (with U+0456) is not Vienna. Emoji 👩🏽‍🔬 and math 𝔘𝔫𝔦 "
    "sit between words. Dr. Ada Lovelace worked with Charles Babbage in London.\n\n"
    + "Tail sentence with a combining q\u0303 and a ZWNJ in می\u200cخواهم. "
    * 30
)


def _doc(text: str, doc_id: str = "u.md"):
    return make_document(
        doc_id=doc_id, title="", raw_text=text, source_uri=doc_id, config=IngestConfig()
    )


@pytest.fixture(scope="module")
def nlp():
    return load_spacy(DEFAULT_SPACY_PIPELINE)


def test_nfc_and_nfd_variants_collapse_to_one_revision():
    nfc = unicodedata.normalize("NFC", HOSTILE_TEXT)
    nfd = unicodedata.normalize("NFD", HOSTILE_TEXT)
    assert nfc != nfd
    variants = [nfc, nfd, nfd.replace("\n", "\r\n"), nfc.replace("\n", "\r")]
    docs = [_doc(v) for v in variants]
    assert len({d.revision for d in docs}) == 1
    assert len({d.text for d in docs}) == 1
    assert docs[0].revision == revision_of(normalize_text(nfd))
    assert unicodedata.is_normalized("NFC", docs[0].text)


def test_zero_width_and_bidi_characters_do_not_break_chunk_spans(token_counter):
    doc = _doc(HOSTILE_TEXT)
    chunks = chunk_document(
        doc, count_tokens=token_counter, config=ChunkConfig(target_tokens=40), max_tokens=254
    )
    assert len(chunks) > 3
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
        assert token_counter(c.text) <= 254
    # chunks cover the text in order with only whitespace between them
    for left, right in itertools.pairwise(chunks):
        assert left.end <= right.start and not doc.text[left.end : right.start].strip()
    assert doc.text[: chunks[0].start].strip() == "" and doc.text[chunks[-1].end :].strip() == ""


def test_mentions_and_statements_quote_their_exact_spans(token_counter, nlp):
    doc = _doc(HOSTILE_TEXT)
    chunks = chunk_document(
        doc, count_tokens=token_counter, config=ChunkConfig(target_tokens=60), max_tokens=254
    )
    mentions, statements = [], []
    for chunk in chunks:
        found, said = extract_from_doc(nlp(chunk.text), chunk)
        mentions += found
        statements += said
    assert len(mentions) > 5 and statements
    for m in mentions:
        assert doc.text[m.start : m.end] == m.text, m
    for s in statements:
        assert 0 <= s.sentence_start < s.sentence_end <= len(doc.text)
    texts = {m.text for m in mentions}
    assert any("Danube" in t for t in texts) and any("Lovelace" in t for t in texts)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("Danube\u200d", "Danube"),  # trailing zero-width joiner
        ("\u202eDanube\u202c", "Danube"),  # bidi override around the name
        ("ＤＡＮＵＢＥ", "Danube"),  # fullwidth compatibility forms
        ("Cafe\u0301 Central", "Café Central"),  # NFD vs NFC
    ],
)
def test_invisible_and_compatibility_characters_do_not_split_entities(variant, plain):
    assert normalize_surface(variant) == normalize_surface(plain)


@pytest.mark.parametrize("variant", ["Dan\u200bube", "Dan\u00adube", "Dan\u2060ube"])
def test_a_zero_width_character_inside_a_name_does_not_split_it(variant):
    assert normalize_surface(variant) == normalize_surface("Danube")


@pytest.mark.parametrize(
    "spoof",
    [
        "D\u0430nube",  # Cyrillic small a
        "\u0421zech Republic",  # Cyrillic capital Es
        "Dan\u03bfbe",  # Greek omicron
        "D\u0430n\u0443be",  # two Cyrillic letters
    ],
)
def test_a_mixed_script_lookalike_does_not_split_an_entity(spoof):
    plain = spoof.translate(str.maketrans("\u0430\u0421\u03bf\u0443", "aCoy"))
    assert normalize_surface(spoof) == normalize_surface(plain)


def test_words_wholly_in_another_script_are_not_folded_to_latin():
    assert normalize_surface("\u0414\u0443\u043d\u0430\u0439") == "\u0434\u0443\u043d\u0430\u0439"
    assert normalize_surface("Danube") != normalize_surface("\u0414\u0430\u043d\u0443\u0431\u0435")
    assert normalize_surface("TNF-\u03b1") == "tnf alpha"  # Greek letters keep their spelled names
