"""benchmarks.experiments.attribute_rules: differing annotations are counted per document and
token."""

import spacy
from spacy.tokens import Doc

from benchmarks.experiments.attribute_rules import differing


def test_differing_counts_documents_and_tokens_whose_annotations_differ():
    vocab = spacy.blank("en").vocab

    def doc(words, tags):
        return Doc(vocab, words=words, tags=tags)

    ours = [doc(["a", "b"], ["DT", "NN"]), doc(["c", "d"], ["NN", "NN"]), doc(["e"], ["NN"])]
    theirs = [
        doc(["a", "b"], ["DT", "NN"]),
        doc(["c", "d"], ["VB", "VB"]),
        doc(["e", "f"], ["NN", "NN"]),
    ]
    assert differing(ours, theirs) == (2, 4)  # two tags differ; a token count differs
    assert differing(ours[:1], theirs[:1]) == (0, 0)
