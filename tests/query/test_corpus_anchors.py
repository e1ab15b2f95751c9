"""Corpus-aware anchors: what the corpus does not hold gets UNKNOWN, never a neighbour.

The question set (``tests/data/admission_questions.json``) was written before the rules:
answerable questions about 30 documents of the demo corpus with their gold document,
and fabricated questions about functions, modules, options, parameters and names that
occur nowhere in it.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from query.admission import Reason, admit, anchor_pattern, mentions_anchor
from query.anchors import find_anchors
from query.lexical import LexicalIndex
from query.vocabulary import CorpusVocabulary, common_words, is_common, one_edit_variants
from store.config import LexicalConfig
from transforms.lexical import build_bm25

QUESTIONS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "admission_questions.json").read_text()
)
RESTRICTED = "python/modules/uuid"  # built as 'internal': invisible to a public caller


class Item:
    """The fields of ``query.Evidence`` that anchor resolution reads."""

    def __init__(self, text: str, *, title: str = "", doc_id: str = "d", heading_path: str = ""):
        self.text, self.title, self.doc_id, self.heading_path = text, title, doc_id, heading_path
        self.chunk_id, self.valid_from, self.valid_to, self.source_role = "c", None, None, "ref"


def test_identifier_shaped_tokens_are_anchors_even_in_lower_case():
    query = (
        "Does json.dumps take sort_keys, what do zorbulate() and --frobnicate-level do, "
        "is getValue in setup.cfg, MAX_PATH, libtasn1 or 500 MB?"
    )
    assert find_anchors(query) == [
        "json.dumps",
        "sort_keys",
        "zorbulate()",
        "--frobnicate-level",
        "getValue",
        "setup.cfg",
        "MAX_PATH",
        "libtasn1",
        "500 MB",
    ]
    for plain in ("How do I read a gzip-compressed file?", "e.g. how do I parse arguments?"):
        assert find_anchors(plain) == []


def test_an_anchor_resolves_only_by_its_own_token():
    assert not mentions_anchor("zipfile2", Item("Work with ZIP archives: the zipfile module."))
    assert mentions_anchor("zipfile", Item("Work with ZIP archives: the zipfile module."))
    assert not mentions_anchor("heapq.mergesortify", Item("heapq.heappush(heap, item) pushes."))
    assert not mentions_anchor("--all", Item("use --all-files to check everything"))
    assert mentions_anchor("--all", Item("use --all to check everything"))
    assert mentions_anchor("500 MB", Item("files up to 500MB are read"))
    assert mentions_anchor("json.dumps()", Item("json.dumps(obj, sort_keys=True)"))
    # A dotted name is also closed by its last part in its module's own page.
    page = Item(
        "heappush(heap, item): push the value item onto the heap.", title="The heapq module"
    )
    assert mentions_anchor("heapq.heappush", page)
    assert not mentions_anchor("bisect.heappush", page)
    assert anchor_pattern("Black Sea").search("the black  sea's delta")


def test_admission_names_absent_anchors_with_a_suggestion():
    evidence = [Item("heappush(heap, item) pushes.", title="The heapq module")]
    verdict = admit(
        "What does heapq.heappushh do?",
        evidence,
        anchors=["heapq.heappushh"],
        operation="entity",
        absent={"heapq.heappushh": "heapq.heappush"},
    )
    assert verdict.status == "UNKNOWN"
    assert verdict.reasons[0] == (
        Reason(
            "anchor_absent",
            "'heapq.heappushh' occurs in no document this caller may see; "
            "did you mean 'heapq.heappush'?",
        )
    )


def test_absent_and_invisible_terms_look_the_same(tmp_path):
    texts = ["alpha beta zorblax", "alpha gamma", "beta gamma heappush"]
    build_bm25(texts, config=LexicalConfig()).save(str(tmp_path))
    lexical = LexicalIndex.open(str(tmp_path), LexicalConfig(), rows=3)
    vocab = CorpusVocabulary(lexical, common=common_words(["alpha", "beta", "gamma", "##x"]))
    public = np.array([False, True, True])  # row 0 (with "zorblax") is not the caller's
    assert vocab.absent("zorblax", visible=None) is False
    assert vocab.absent("zorblax", visible=public) is True
    assert vocab.absent("quuxly", visible=public) is True
    assert vocab.absent_words("alpha zorblax quuxly", visible=public) == ["zorblax", "quuxly"]
    assert vocab.absent_words("alpha zorblax quuxly", visible=None) == ["quuxly"]

    def text_of_row(row: int) -> str:
        return texts[row]

    assert vocab.suggest("heappushh", visible=public, text_of_row=text_of_row) == "heappush"
    assert vocab.suggest("zorblaxx", visible=public, text_of_row=text_of_row) is None
    assert vocab.suggest("zorblaxx", visible=None, text_of_row=text_of_row) == "zorblax"
    assert "heappush" in one_edit_variants("heappushh")


def test_words_built_from_common_words_are_common_and_invented_ones_are_not():
    common = common_words(
        ["material", "compress", "file", "system", "sort", "merge", "##ify", "mor", "vane"]
    )
    for word in ("biomaterials", "compressed", "filesystem", "material"):
        assert is_common(word, common), word
    for word in ("zorbulate", "mergesortify", "frobnicate", "quorvex", "morvane"):
        assert not is_common(word, common), word


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory):
    """30 documents of the demo corpus (the stdlib corpus' own texts), one of them internal."""
    from benchmarks.admission import demo_corpus
    from pipelines.build_index import run
    from query import open_bundle

    folder = tmp_path_factory.mktemp("demo30")
    demo_corpus(str(folder / "demo.jsonl"))
    (folder / "meta.jsonl").write_text(
        json.dumps({"source_id": RESTRICTED, "access_class": "internal"}) + "\n"
    )
    root = str(tmp_path_factory.mktemp("root"))
    argv = ["--input", str(folder / "demo.jsonl"), "--root", root]
    result = run([*argv, "--metadata", str(folder / "meta.jsonl")])
    return open_bundle(result.path)


@pytest.mark.slow
def test_fabricated_questions_get_unknown_and_answerable_ones_pass(demo_bundle):
    from query import answer

    assert len(QUESTIONS["fabricated"]) >= 40 and len(QUESTIONS["answerable"]) >= 40
    passed = [
        q["question"]
        for q in QUESTIONS["fabricated"]
        if answer(demo_bundle, q["question"], k=5).status == "PASS"
    ]
    assert len(passed) <= 1, passed
    missed = []
    for q in QUESTIONS["answerable"]:
        result = answer(demo_bundle, q["question"], k=5)
        if result.status != "PASS" or q["gold"] not in {e.doc_id for e in result.evidence}:
            missed.append((q["question"], result.status, result.admission.reasons))
    assert len(QUESTIONS["answerable"]) - len(missed) >= 36, missed


@pytest.mark.slow
def test_misspellings_get_did_you_mean_and_reasons_reach_the_json(demo_bundle):
    from query import answer

    result = answer(demo_bundle, "What does shutil.cpytree copy?", k=3)
    assert result.status == "UNKNOWN"
    (reason,) = [r for r in result.to_json()["reasons"] if r["code"] == "anchor_absent"]
    assert reason["detail"].endswith("did you mean 'shutil.copytree'?")


@pytest.mark.slow
def test_a_term_only_in_invisible_documents_looks_absent(demo_bundle):
    from query import answer

    question = "What does uuid.uuid4 return?"
    assert answer(demo_bundle, question, k=3, access=["public", "internal"]).status == "PASS"
    hidden = answer(demo_bundle, question, k=3, access=["public"])
    fabricated = answer(demo_bundle, "What does uuid.quorvex return?", k=3, access=["public"])
    assert hidden.status == fabricated.status == "UNKNOWN"
    assert RESTRICTED not in {e.doc_id for e in hidden.evidence}

    def shape(result, anchor):
        return [(r.code, r.detail.replace(anchor, "ANCHOR")) for r in result.admission.reasons]

    assert shape(hidden, "uuid.uuid4") == shape(fabricated, "uuid.quorvex")
