"""The embedded default corpus: the running interpreter's own documentation.

Documents are generated at build time, never copied into the repository:
every ``pydoc_data`` help topic (the language reference sections behind
``help('with')``) and every public standard-library module's docstrings, read
from source with :mod:`ast` (nothing is imported or executed).
"""

import ast
import logging
import os
import sysconfig
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import PBegin, TaggedOutput

from schemas import DeadLetter, Document
from store.config import IngestConfig
from transforms.ingest import IngestError, make_document
from transforms.tags import BAD, GOOD, typed

logger = logging.getLogger(__name__)

STAGE = "ingest"
TOPIC_PREFIX = "python/topics/"
MODULE_PREFIX = "python/modules/"
_SKIP_MODULES = frozenset({"antigravity", "this", "idlelib", "test", "site-packages"})


def stdlib_dir() -> str:
    """Directory holding the standard library's ``.py`` sources."""
    return sysconfig.get_paths()["stdlib"]


def list_sources(*, stdlib: str | None = None) -> list[str]:
    """Sorted source ids: every help topic, then every documented public top-level module."""
    import pydoc_data.topics

    topics = [TOPIC_PREFIX + key for key in sorted(pydoc_data.topics.topics)]
    root = stdlib or stdlib_dir()
    modules = []
    for name in sorted(os.listdir(root)):
        if name.startswith("_") or name.removesuffix(".py") in _SKIP_MODULES:
            continue
        path = os.path.join(root, name)
        if name.endswith(".py"):
            modules.append(name[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            modules.append(name)
    documented = [m for m in modules if _has_docstrings(_module_source_path(m, root))]
    return topics + [MODULE_PREFIX + m for m in documented]


def _has_docstrings(path: str) -> bool:
    """Whether a module source documents anything (undocumented modules are not documents)."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return True  # let the build report it as a dead letter with the reason
    nodes = [tree] + [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not n.name.startswith("_")
    ]
    return any(ast.get_docstring(n) for n in nodes)


def _module_source_path(module: str, stdlib: str) -> str:
    package_init = os.path.join(stdlib, module, "__init__.py")
    return package_init if os.path.isfile(package_init) else os.path.join(stdlib, module + ".py")


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = [a.arg for a in node.args.posonlyargs + node.args.args]
    if node.args.vararg:
        args.append("*" + node.args.vararg.arg)
    args += [a.arg for a in node.args.kwonlyargs]
    if node.args.kwarg:
        args.append("**" + node.args.kwarg.arg)
    return f"{node.name}({', '.join(a for a in args if a not in ('self', 'cls'))})"


def module_text(module: str, source: str) -> tuple[str, str]:
    """Title and Markdown text for a module: its docstring, then public API docstrings.

    Raises:
        IngestError: the source does not parse or the module documents nothing.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise IngestError("unparsable", f"module {module} does not parse: {exc}") from exc
    parts: list[str] = []
    doc = ast.get_docstring(tree)
    if doc:
        parts.append(doc)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if node.name.startswith("_"):
            continue
        node_doc = ast.get_docstring(node)
        if not node_doc:
            continue
        if isinstance(node, ast.ClassDef):
            heading = f"class {module}.{node.name}"
        else:
            heading = f"{module}.{_signature(node)}"
        first_para = node_doc.split("\n\n", 1)[0]
        parts.append(f"## {heading}\n\n{first_para}")
    if not parts:
        raise IngestError("empty", f"module {module} has no docstrings")
    summary = (doc or "").strip().split("\n", 1)[0].strip().rstrip(".")
    title = f"{module} — {summary}" if summary else f"{module} module"
    return title, f"# The {module} module\n\n" + "\n\n".join(parts)


def topic_text(key: str) -> tuple[str, str]:
    """Title and text of one ``pydoc_data`` help topic."""
    import pydoc_data.topics

    text = pydoc_data.topics.topics[key]
    first = next((line.strip() for line in text.splitlines() if line.strip()), key)
    return f"Python language reference: {first}", text


class _BuildStdlibDocumentFn(beam.DoFn):
    """Source id -> Document, or a dead letter when it cannot be read."""

    def __init__(self, *, config: IngestConfig) -> None:
        self._config = config
        self._good = Metrics.counter(STAGE, "documents")
        self._bad = Metrics.counter(STAGE, "dead_letters")

    def process(self, source_id: str) -> Iterator[Any]:
        try:
            yield self._build(source_id)
            self._good.inc()
        except (IngestError, OSError, KeyError, UnicodeDecodeError) as exc:
            self._bad.inc()
            error_type = getattr(exc, "error_type", type(exc).__name__)
            yield TaggedOutput(BAD, DeadLetter(STAGE, source_id, error_type, str(exc)))

    def _build(self, source_id: str) -> Document:
        metadata: dict[str, str] = {"python_version": sysconfig.get_python_version()}
        if source_id.startswith(TOPIC_PREFIX):
            key = source_id[len(TOPIC_PREFIX) :]
            title, text = topic_text(key)
            uri = f"pydoc_data.topics#{key}"
            metadata["kind"] = "help-topic"
        elif source_id.startswith(MODULE_PREFIX):
            module = source_id[len(MODULE_PREFIX) :]
            path = _module_source_path(module, stdlib_dir())
            with open(path, encoding="utf-8") as handle:
                title, text = module_text(module, handle.read())
            uri = "file://" + path
            metadata["kind"] = "module-docstrings"
        else:
            raise IngestError("unsupported", f"not a stdlib corpus id: {source_id}")
        return make_document(
            doc_id=source_id,
            title=title,
            raw_text=text,
            source_uri=uri,
            config=self._config,
            metadata=metadata,
        )


class ReadStdlibCorpus(beam.PTransform):
    """Generate the embedded default corpus (a few hundred documents).

    Example:
        >>> results = p | ReadStdlibCorpus(config=IngestConfig())
        >>> documents, dead = results[GOOD], results[BAD]

    Args:
        config: ingest options (access class, role, language, size limit).
        limit: keep only the first ``limit`` source ids (for quick runs); ``None`` keeps all.
    """

    def __init__(self, *, config: IngestConfig, limit: int | None = None) -> None:
        super().__init__()
        if limit is not None and limit <= 0:
            raise ValueError(f"limit must be positive, got {limit}")
        self._config = config
        self._sources = list_sources()[:limit] if limit else list_sources()

    def expand(self, pbegin: PBegin) -> Any:
        built = (
            pbegin
            | "ListStdlibSources" >> beam.Create(self._sources, reshuffle=False)
            | "BuildStdlibDocuments"
            >> beam.ParDo(_BuildStdlibDocumentFn(config=self._config)).with_outputs(BAD, main=GOOD)
        )
        return {
            GOOD: typed(built[GOOD], Document),
            BAD: typed(built[BAD], DeadLetter),
        }
