"""Ingest: text/Markdown files and JSONL records -> ``Document``, bad input -> dead letters.

Reading goes through Beam ``fileio``/``FileSystems``, so any filesystem Beam
knows (local, ``gs://``, ``s3://`` with its extra) works unchanged.
"""

import datetime as dt
import json
import logging
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, NamedTuple

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.pvalue import PBegin, TaggedOutput

from algorithms.chunk import headings, markup_of
from schemas import DeadLetter, Document, normalize_text, revision_of
from store.config import ACCESS_CLASSES, SOURCE_ROLES, IngestConfig
from transforms.formats import HTML_SUFFIXES, PDF_SUFFIXES, html_to_text, pdf_to_text
from transforms.ingest_errors import IngestError
from transforms.sidecar import split_front_matter
from transforms.tags import BAD, GOOD, typed

logger = logging.getLogger(__name__)

STAGE = "ingest"
_OVERRIDE_FIELDS = ("access_class", "source_role", "language", "valid_from", "valid_to")
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
TOMBSTONE_SUFFIX = ".tombstone"
"""A file whose lines are ids of documents to delete (blank lines and ``#`` comments
skipped)."""
DELETED_FIELD = "deleted"
"""A JSONL record with this field ``true`` deletes the document of its id (no text needed)."""
DELETES = "deletes"
"""Output tag of :class:`ReadDocuments`: the :class:`Tombstone` records it read."""
DELETING_FILES = "evidex.deleting_files"
"""Metrics namespace of the deletes read, one counter per file that held them."""


class Tombstone(NamedTuple):
    """An explicit delete: the document ``doc_id`` is not part of the input, wherever it is,
    unless a record of it follows the delete in the same file (``line``; 0 for a
    tombstone file, whose deletes hold for the whole file)."""

    doc_id: str
    source: str  # the file that holds the delete
    line: int


def relative_id(path: str, root: str) -> str:
    """Stable source id: ``path`` relative to ``root`` with ``/`` separators."""
    norm_path = path.replace("\\", "/")
    norm_root = root.replace("\\", "/").rstrip("/")
    if norm_root and norm_path.startswith(norm_root + "/"):
        return norm_path[len(norm_root) + 1 :]
    return posixpath.basename(norm_path)


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _checked_date(value: Any, field: str) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        raise IngestError("invalid_field", f"{field} must be a YYYY-MM-DD date, got {value!r}")
    try:
        dt.date.fromisoformat(value)
    except ValueError as exc:
        raise IngestError("invalid_field", f"{field} is not a real date: {value}") from exc
    return value


def make_document(
    *,
    doc_id: str,
    title: str,
    raw_text: str,
    source_uri: str,
    config: IngestConfig,
    metadata: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Document:
    """Normalize text and build a ``Document``.

    Args:
        overrides: per-record ``access_class``, ``source_role``, ``language``,
            ``valid_from`` and ``valid_to``, checked against the declared sets.

    Raises:
        IngestError: the text is empty, or an override is invalid.
    """
    text = normalize_text(raw_text)
    if not text.strip():
        raise IngestError("empty", "document has no text")
    extra = overrides or {}
    access_class = extra.get("access_class") or config.access_class
    if access_class not in ACCESS_CLASSES:
        raise IngestError("invalid_field", f"access_class {access_class!r} not in {ACCESS_CLASSES}")
    source_role = extra.get("source_role") or config.source_role
    if source_role not in SOURCE_ROLES:
        raise IngestError("invalid_field", f"source_role {source_role!r} not in {SOURCE_ROLES}")
    valid_from = _checked_date(extra.get("valid_from"), "valid_from")
    valid_to = _checked_date(extra.get("valid_to"), "valid_to")
    if valid_from and valid_to and valid_to < valid_from:
        raise IngestError("invalid_field", f"valid_to {valid_to} is before valid_from {valid_from}")
    return Document(
        doc_id=doc_id,
        revision=revision_of(text),
        title=title.strip() or doc_id,
        text=text,
        source_uri=source_uri,
        source_role=source_role,
        access_class=access_class,
        language=str(extra.get("language") or config.language),
        metadata_json=json.dumps(metadata or {}, sort_keys=True, ensure_ascii=False),
        valid_from=valid_from,
        valid_to=valid_to,
    )


def _title_of(text: str, fallback: str, *, markup: str) -> str:
    """The first real heading of ``text`` (never a line inside code), else ``fallback``."""
    found = headings(text, markup=markup)
    return next((title[:200] for _, _, title in found if title), fallback)


def _merged(
    own: dict[str, Any], declared: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(overrides, extra metadata) from a document's own fields then the sidecar's."""
    combined = {**own, **(declared or {})}
    overrides = {k: combined[k] for k in _OVERRIDE_FIELDS if k in combined}
    extra = {k: v for k, v in combined.items() if k not in _OVERRIDE_FIELDS and k != "title"}
    return overrides, extra


def _jsonl_record(line: bytes) -> dict[str, Any]:
    """A JSONL line's object.

    Raises:
        IngestError: undecodable or malformed.
    """
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise IngestError("undecodable", f"line is not UTF-8: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(
            "malformed_json", f"invalid JSON: {exc.msg} at column {exc.colno}"
        ) from exc
    if not isinstance(record, dict):
        raise IngestError("malformed_json", "JSON line is not an object")
    return record


def _record_id(record: dict[str, Any], config: IngestConfig) -> str:
    doc_id = next((str(record[f]) for f in config.jsonl_id_fields if record.get(f)), None)
    if doc_id is None:
        raise IngestError("missing_field", f"none of the id fields {config.jsonl_id_fields} set")
    return doc_id


def parse_jsonl_line(
    line: bytes,
    *,
    source_uri: str,
    config: IngestConfig,
    sidecar: dict[str, dict[str, Any]] | None = None,
) -> Document:
    """One JSONL record -> ``Document`` (sidecar values, keyed by its id, take precedence).

    Raises:
        IngestError: undecodable, malformed, or missing its id or text field.
    """
    return _record_document(
        _jsonl_record(line), source_uri=source_uri, config=config, sidecar=sidecar
    )


def _record_document(
    record: dict[str, Any],
    *,
    source_uri: str,
    config: IngestConfig,
    sidecar: dict[str, dict[str, Any]] | None = None,
) -> Document:
    doc_id = _record_id(record, config)
    text = record.get(config.jsonl_text_field)
    if not isinstance(text, str):
        raise IngestError("missing_field", f"field {config.jsonl_text_field!r} is not a string")
    if len(text.encode("utf-8")) > config.max_document_bytes:
        raise IngestError("oversized", f"text exceeds {config.max_document_bytes} bytes")
    title = record.get(config.jsonl_title_field) or ""
    if config.jsonl_title_in_text and str(title).strip():
        text = f"{str(title).strip()}\n\n{text}"
    used = {
        config.jsonl_text_field,
        config.jsonl_title_field,
        *config.jsonl_id_fields,
        *_OVERRIDE_FIELDS,
    }
    metadata = {k: v for k, v in record.items() if k not in used}
    declared = (sidecar or {}).get(doc_id)
    overrides, extra = _merged({k: record[k] for k in _OVERRIDE_FIELDS if k in record}, declared)
    return make_document(
        doc_id=doc_id,
        title=str((declared or {}).get("title") or title),
        raw_text=text,
        source_uri=source_uri,
        config=config,
        metadata={**metadata, **extra},
        overrides=overrides,
    )


def bounded_lines(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, line, complete)`` for each line, holding at most ``limit`` bytes.

    A longer line yields its first ``limit`` bytes with ``complete=False``; the rest of
    it is read through and discarded, so one 50 MB line costs ``limit`` bytes of memory.
    """
    number = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) <= limit or line.endswith(b"\n"):
            yield number, line, True
            continue
        while True:  # skip the remainder of an over-long line
            rest = handle.readline(limit)
            if not rest or rest.endswith(b"\n"):
                break
        yield number, line[:limit], False


class _ParseFileFn(beam.DoFn):
    """ReadableFile -> Document (main), DeadLetter (tagged ``bad``) or Tombstone (tagged
    ``deletes``)."""

    def __init__(
        self, *, root: str, config: IngestConfig, sidecar: dict[str, dict[str, Any]]
    ) -> None:
        self._root = root
        self._config = config
        self._sidecar = sidecar
        self._good = Metrics.counter(STAGE, "documents")
        self._bad = Metrics.counter(STAGE, "dead_letters")

    def process(self, readable: fileio.ReadableFile) -> Iterator[Any]:
        path = readable.metadata.path
        source_id = relative_id(path, self._root)
        lower = path.lower()
        if lower.endswith(JSONL_SUFFIXES):
            yield from self._jsonl(readable, source_id)
            return
        if lower.endswith(TOMBSTONE_SUFFIX):
            yield from self._tombstones(readable)
            return
        try:
            yield self._text_file(readable, source_id, lower)
            self._good.inc()
        except IngestError as exc:
            self._bad.inc()
            yield TaggedOutput(BAD, DeadLetter(STAGE, source_id, exc.error_type, str(exc)))

    def _text_file(self, readable: fileio.ReadableFile, source_id: str, lower: str) -> Document:
        supported = TEXT_SUFFIXES + HTML_SUFFIXES + PDF_SUFFIXES + JSONL_SUFFIXES
        if not lower.endswith(supported):
            raise IngestError("unsupported", f"unsupported file type (supported: {supported})")
        size = readable.metadata.size_in_bytes
        if size > self._config.max_document_bytes:
            raise IngestError(
                "oversized", f"{size} bytes exceeds limit of {self._config.max_document_bytes}"
            )
        data = readable.read()
        extracted: dict[str, Any] = {}
        found_title = ""
        if lower.endswith(HTML_SUFFIXES):
            found_title, raw = html_to_text(data)
        elif lower.endswith(PDF_SUFFIXES):
            found_title, raw, extracted = pdf_to_text(data)
        else:
            try:
                raw = data.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise IngestError("undecodable", f"not UTF-8 text: {exc}") from exc
        front, body = split_front_matter(normalize_text(raw))
        declared = self._sidecar.get(source_id)
        overrides, extra = _merged(front, declared)
        own = {**front, **(declared or {})}
        doc_id = next(
            (
                str(own[f]).strip()
                for f in self._config.file_id_fields
                if str(own.get(f, "")).strip()
            ),
            source_id,
        )
        title = (
            (declared or {}).get("title")
            or front.get("title")
            or found_title
            or _title_of(body, source_id, markup=markup_of(lower))
        )
        return make_document(
            doc_id=doc_id,
            title=str(title),
            raw_text=body,
            source_uri=readable.metadata.path,
            config=self._config,
            metadata={**extracted, **extra},
            overrides=overrides,
        )

    def _jsonl(self, readable: fileio.ReadableFile, source_id: str) -> Iterator[Any]:
        # A record's line may hold its text plus JSON escapes and other fields: allow 2x
        # the document limit per line, and never hold more than that in memory.
        line_limit = 2 * self._config.max_document_bytes
        with readable.open() as handle:
            for number, line, complete in bounded_lines(handle, line_limit):
                if not line.strip():
                    continue
                try:
                    if not complete:
                        raise IngestError(
                            "oversized", f"JSON line exceeds {line_limit} bytes; not parsed"
                        )
                    record = _jsonl_record(line)
                    if record.get(DELETED_FIELD) is True:
                        doc_id = _record_id(record, self._config)
                        yield TaggedOutput(
                            DELETES, Tombstone(doc_id, readable.metadata.path, number)
                        )
                        self._deleting(readable.metadata.path)
                        continue
                    yield _record_document(
                        record,
                        source_uri=f"{readable.metadata.path}#L{number}",
                        config=self._config,
                        sidecar=self._sidecar,
                    )
                    self._good.inc()
                except IngestError as exc:
                    self._bad.inc()
                    record_id = f"{source_id}#L{number}"
                    yield TaggedOutput(BAD, DeadLetter(STAGE, record_id, exc.error_type, str(exc)))

    @staticmethod
    def _deleting(path: str) -> None:
        """Count a delete under its file's name: the build reads the names back after the
        run (:func:`deleting_files`) to list the files that held deletes."""
        Metrics.counter(DELETING_FILES, path).inc()

    def _tombstones(self, readable: fileio.ReadableFile) -> Iterator[Any]:
        path = readable.metadata.path
        limit = self._config.max_document_bytes
        with readable.open() as handle:
            for number, line, complete in bounded_lines(handle, limit):
                doc_id = line.decode("utf-8", errors="replace").strip()
                if not complete or "\ufffd" in doc_id:
                    self._bad.inc()
                    why = "line is not UTF-8" if complete else f"line exceeds {limit} bytes"
                    yield TaggedOutput(
                        BAD, DeadLetter(STAGE, f"{path}#L{number}", "bad_tombstone", why)
                    )
                elif doc_id and not doc_id.startswith("#"):
                    yield TaggedOutput(DELETES, Tombstone(doc_id, path, 0))
                    self._deleting(path)


def deleting_files(result: Any) -> list[str]:
    """The input files that held explicit deletes, read from a finished pipeline's
    metrics (see ``_ParseFileFn._deleting``)."""
    counters = result.metrics().query(MetricsFilter().with_namespace(DELETING_FILES))["counters"]
    return sorted({c.key.metric.name for c in counters if c.committed})


def duplicate_letter(doc_id: str, kept: str, dropped: str) -> DeadLetter:
    """The dead letter of a document dropped because ``kept`` already holds its id."""
    return DeadLetter(
        STAGE, doc_id, "duplicate_id", f"duplicate id; kept {kept}, dropped {dropped}"
    )


def _deleted_by(doc: Document, mark: Tombstone) -> bool:
    """Whether ``mark`` removes ``doc``: always, unless ``doc`` comes after it in the same
    file (a feed that deletes a document, then adds it again)."""
    path, marker, line = doc.source_uri.rpartition("#L")  # a JSONL record: path#L<line>
    after = bool(marker) and path == mark.source and line.isdigit() and int(line) > mark.line
    return not after


def surviving(docs: Iterable[Document], deletes: Iterable[Tombstone]) -> list[Document]:
    """The documents of one id that no delete removes."""
    marks = list(deletes)
    return [d for d in docs if not any(_deleted_by(d, m) for m in marks)]


def _resolve_duplicates(item: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[Any]:
    """Keep one document per id that no delete removes (the smallest source URI);
    dead-letter the other survivors."""
    doc_id, grouped = item
    kept = surviving(grouped["docs"], grouped["deletes"])
    ordered = sorted(kept, key=lambda d: (d.source_uri, d.revision))
    if not ordered:
        return
    yield ordered[0]
    for dup in ordered[1:]:
        yield TaggedOutput(BAD, duplicate_letter(doc_id, ordered[0].source_uri, dup.source_uri))


class DedupeDocuments(beam.PTransform):
    """``PCollection[Document]`` -> one document per id, duplicates as dead letters; with
    ``deletes`` (``PCollection[Tombstone]``), the documents they remove are left out first."""

    def __init__(self, deletes: beam.PCollection | None = None) -> None:
        super().__init__()
        self._deletes = deletes

    def expand(self, docs: beam.PCollection) -> Any:
        deletes = self._deletes
        if deletes is None:
            deletes = docs.pipeline | "NoDeletes" >> beam.Create([], reshuffle=False)
        return (
            {
                "docs": docs | "KeyById" >> beam.Map(lambda d: (d.doc_id, d)),
                "deletes": deletes | "KeyDeletes" >> beam.Map(lambda t: (t.doc_id, t)),
            }
            | "GroupById" >> beam.CoGroupByKey()
            | "KeepOne" >> beam.FlatMap(_resolve_duplicates).with_outputs(BAD, main=GOOD)
        )


class ReadDocuments(beam.PTransform):
    """Read files matching a pattern into documents, with a dead-letter output.

    Example:
        >>> results = p | ReadDocuments("docs/**", root="docs", config=IngestConfig())
        >>> documents, dead = results[GOOD], results[BAD]

    Args:
        pattern: file path or glob understood by Beam ``FileSystems``.
        root: directory that source ids are relative to.
        config: ingest options.
        sidecar: per-document metadata keyed by source id (see :mod:`transforms.sidecar`).
        files: read only these files (paths as the pattern's listing names them) instead
            of every match of ``pattern``; a refresh passes the files that changed.
    """

    def __init__(
        self,
        pattern: str,
        *,
        root: str,
        config: IngestConfig,
        sidecar: dict[str, dict[str, Any]] | None = None,
        files: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if not pattern:
            raise ValueError("ReadDocuments needs a non-empty file pattern")
        self._pattern = pattern
        self._root = root
        self._config = config
        self._sidecar = dict(sidecar or {})
        self._files = None if files is None else sorted(files)

    def expand(self, pbegin: PBegin) -> Any:
        if self._files is None:
            matched = pbegin | "MatchFiles" >> fileio.MatchFiles(
                self._pattern, empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW
            )
        else:
            matched = (
                pbegin
                | "ChangedFiles" >> beam.Create(self._files, reshuffle=False)
                | "MatchChanged"
                >> fileio.MatchAll(empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
            )
        return matched | "Parse" >> ParseMatches(
            root=self._root, config=self._config, sidecar=self._sidecar
        )


class ParseMatches(beam.PTransform):
    """``PCollection[FileMetadata]`` -> ``{good: Document, bad: DeadLetter, deletes:
    Tombstone}``: what :class:`ReadDocuments` does with the files it matched, for a
    stream's windows of arriving files (duplicates resolved within each window)."""

    def __init__(
        self,
        *,
        root: str,
        config: IngestConfig,
        sidecar: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._fn = _ParseFileFn(root=root, config=config, sidecar=dict(sidecar or {}))

    def expand(self, matched: beam.PCollection) -> Any:
        parsed = (
            matched
            | "ReadMatches" >> fileio.ReadMatches()
            | "ParseFiles" >> beam.ParDo(self._fn).with_outputs(BAD, DELETES, main=GOOD)
        )
        deletes = typed(parsed[DELETES], Tombstone)
        unique = typed(parsed[GOOD], Document) | "Dedupe" >> DedupeDocuments(deletes)
        dead = (parsed[BAD], unique[BAD]) | "MergeDeadLetters" >> beam.Flatten()
        return {
            GOOD: typed(unique[GOOD], Document),
            BAD: typed(dead, DeadLetter),
            DELETES: deletes,
        }


def pattern_and_root(input_path: str) -> tuple[str, str]:
    """Turn a user's ``--input`` into a Beam file pattern and the root ids are relative to.

    A directory means every file under it; a glob's root is its non-glob prefix;
    a single file's root is its directory.
    """
    from apache_beam.io.filesystems import FileSystems

    if "://" not in input_path:
        input_path = os.path.abspath(os.path.expanduser(input_path))
    if any(ch in input_path for ch in "*?["):
        prefix = input_path.split("*")[0].split("?")[0].split("[")[0]
        return input_path, prefix.rsplit("/", 1)[0] if "/" in prefix else ""
    trimmed = input_path.rstrip("/")
    if "://" not in trimmed:
        if os.path.isdir(trimmed):
            return FileSystems.join(trimmed, "**"), trimmed
        return trimmed, os.path.dirname(trimmed)
    found = FileSystems.match([trimmed])[0].metadata_list
    if len(found) == 1 and found[0].path == trimmed and found[0].size_in_bytes > 0:
        return trimmed, trimmed.rsplit("/", 1)[0]
    return trimmed + "/**", trimmed


def input_bytes(pattern: str, max_document_bytes: int) -> int:
    """The size of what a build of ``pattern`` reads: every JSONL file, and every other
    file within ``max_document_bytes`` (a larger one is a dead letter, never read); 0 for
    a missing path."""
    from apache_beam.io.filesystems import FileSystems

    try:
        found = FileSystems.match([pattern])[0].metadata_list
    except Exception:
        return 0
    return sum(
        m.size_in_bytes
        for m in found
        if m.path.lower().endswith(JSONL_SUFFIXES) or m.size_in_bytes <= max_document_bytes
    )


def count_matches(pattern: str) -> int:
    """How many files ``pattern`` matches (0 for a missing path)."""
    from apache_beam.io.filesystems import FileSystems

    try:
        return len(FileSystems.match([pattern])[0].metadata_list)
    except Exception:
        return 0
