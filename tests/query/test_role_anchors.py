"""A word presented as an argument, constant, method, attribute or flag of a named module
is an anchor, even a common word: asked about one the corpus lacks, the answer is UNKNOWN."""

import json

import pytest

from query.anchors import find_anchors

NAMED_CODE_OBJECTS = {
    "What does the dance=True argument of subprocess.run do?": "dance",
    "What is the fortnight constant in datetime used for?": "fortnight",
}


def test_keyword_arguments_and_roles_of_a_named_module_are_anchors():
    for question, word in NAMED_CODE_OBJECTS.items():
        assert word in find_anchors(question), question
    assert "delete" in find_anchors("What does the delete argument of NamedTemporaryFile do?")
    assert "indent" in find_anchors("What does json.dumps(obj, indent=4) print?")
    assert "utcnow" in find_anchors("Is the utcnow method of datetime deprecated?")


def test_descriptive_words_and_comparisons_are_no_anchors():
    assert find_anchors("What is the first argument of print for?") == []
    assert find_anchors("How do I read more than one line from a file?") == []
    assert "==" not in " ".join(find_anchors("Does a == b compare values?"))


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory):
    """The 30 documents of the admission question set, built by the real pipeline."""
    from benchmarks.admission import demo_corpus
    from pipelines.build_index import run
    from query import open_bundle

    folder = tmp_path_factory.mktemp("demo30")
    demo_corpus(str(folder / "demo.jsonl"))
    root = str(tmp_path_factory.mktemp("root"))
    return open_bundle(run(["--input", str(folder / "demo.jsonl"), "--root", root]).path)


@pytest.mark.slow
def test_named_code_objects_the_corpus_lacks_are_unknown(demo_bundle):
    from query import answer

    for question, word in NAMED_CODE_OBJECTS.items():
        result = answer(demo_bundle, question, k=5)
        assert result.status == "UNKNOWN", (question, result.admission.reasons)
        codes = [r["code"] for r in result.to_json()["reasons"]]
        details = " ".join(r["detail"] for r in result.to_json()["reasons"])
        assert "anchor_absent" in codes and repr(word) in details, result.to_json()["reasons"]


@pytest.mark.slow
def test_answerable_questions_naming_roles_still_pass_with_gold(demo_bundle):
    from pathlib import Path

    from query import answer

    questions = json.loads(
        (Path(__file__).resolve().parents[1] / "data" / "admission_questions.json").read_text()
    )["answerable"]
    missed = []
    for q in questions:
        result = answer(demo_bundle, q["question"], k=5)
        if result.status != "PASS" or q["gold"] not in {e.doc_id for e in result.evidence}:
            missed.append((q["question"], result.status, result.admission.reasons))
    assert not missed, missed
