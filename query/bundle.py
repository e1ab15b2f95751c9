"""Loading a bundle for reading: resolve ``ACTIVE`` once, verify, memory-map.

Loading checks the manifest's schema version, every file's sha256 and the
embedding model's fingerprint before the vector file is memory-mapped.
"""

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from query.encoder import BACKENDS, Backend, BundledEncoder, QueryEncoder
from query.knowledge import load_knowledge
from query.lexical import LexicalIndex
from query.segments import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    apply_moved_sources,
    merge_segments,
    restore_index,
)
from schemas.manifest import Manifest
from store.activation import read_active
from store.bundles import (
    CHUNK_INDEX,
    CHUNKS,
    DOCUMENTS,
    LEXICAL_DIR,
    BundleError,
    embedding_matrix,
    local_bundle,
    numbers,
    partition_index,
    read_manifest,
    read_parquet,
    resolve_root,
    verify_artifacts,
    verify_files,
    verify_index_headers,
)
from store.config import ACCESS_CLASSES, LexicalConfig
from store.models import (
    fingerprint,
    load_sentence_transformer,
    resolve_model,
    tokenizer_json_digest,
)
from store.segments import Locate, open_segments

logger = logging.getLogger(__name__)


class NoActiveBundleError(BundleError):
    """No bundle is active under the root (build, validate and activate one first)."""


class ModelMismatchError(BundleError):
    """The query model is not the model the bundle's vectors were made with."""


@dataclass
class LoadedBundle:
    """An immutable bundle opened for reading.

    Example:
        >>> bundle = load_bundle()            # the active bundle under $EVIDEX_HOME
        >>> retrieve(bundle, "how do I read a gzip file?", k=3)
    """

    path: str
    manifest: Manifest
    documents: dict[str, dict[str, Any]]
    chunk_ids: list[str]
    chunk_doc_ids: list[str]
    starts: np.ndarray
    ends: np.ndarray
    access_classes: np.ndarray
    keys: np.ndarray
    index: Any
    encoder: QueryEncoder | BundledEncoder
    lexical: Any = None
    heading_paths: list[str] = field(default_factory=list)
    pages: list[tuple[int | None, int | None]] = field(default_factory=list)
    """Each chunk row's first and last PDF page (empty when no chunk has pages)."""
    knowledge: Any = None
    partitions: dict[str, Any] = field(default_factory=dict)
    """Per-access-class HNSW indexes (``chunks.<class>.usearch``) for restricted callers."""
    segments: list[Any] = field(default_factory=list)
    """The generation's segments (:class:`store.segments.Segment`), oldest first."""
    _vector_source: Any = field(default=None, repr=False)
    _row_of_chunk: dict[str, int] = field(default_factory=dict, repr=False)
    _row_of_key: dict[int, int] = field(default_factory=dict, repr=False)
    _vectors: np.ndarray | None = field(default=None, repr=False)
    _rows_of_class: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _rows_of_role: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _recognizer: Any = field(default=None, repr=False)
    _recognizer_loaded: bool = field(default=False, repr=False)
    _vocabulary: Any = field(default=None, repr=False)

    @property
    def bundle_id(self) -> str:
        return self.manifest.bundle_id

    @property
    def model(self) -> Any:
        """The sentence-transformers model the bundle's vectors were made with (only when
        the bundle was opened with it: ``encoder="torch"``, a bundle without its own
        encoder, or a model passed in).

        Raises:
            AttributeError: the bundle answers with its bundled ONNX encoder.
        """
        if isinstance(self.encoder, BundledEncoder):
            raise AttributeError(
                "this bundle answers with its bundled ONNX encoder and has no PyTorch model "
                "loaded; open it with encoder='torch' for one"
            )
        return self.encoder.model

    @property
    def row_of_chunk(self) -> dict[str, int]:
        """Row in the chunk arrays of each chunk id."""
        if not self._row_of_chunk:
            self._row_of_chunk = {c: i for i, c in enumerate(self.chunk_ids)}
        return self._row_of_chunk

    def row_of_key(self, key: int) -> int:
        """Row in the chunk arrays for a USearch key."""
        if not self._row_of_key:
            self._row_of_key = {int(k): i for i, k in enumerate(self.keys.tolist())}
        return self._row_of_key[int(key)]

    def rows_of_class(self) -> dict[str, np.ndarray]:
        """Ascending chunk rows of each access class present (computed once)."""
        if not self._rows_of_class:
            classes = np.asarray(self.access_classes, dtype=object)
            self._rows_of_class = {
                str(c): np.flatnonzero(classes == c) for c in sorted(set(classes.tolist()))
            }
        return self._rows_of_class

    def rows_of_role(self) -> dict[str, np.ndarray]:
        """Ascending chunk rows of each source role present (computed once)."""
        if not self._rows_of_role:
            roles = np.asarray(
                [self.documents[d]["source_role"] for d in self.chunk_doc_ids], dtype=object
            )
            self._rows_of_role = {
                str(r): np.flatnonzero(roles == r) for r in sorted(set(roles.tolist()))
            }
        return self._rows_of_role

    def vectors(self) -> np.ndarray:
        """All chunk vectors (n x d float32), read on first use for filtered search."""
        if self._vectors is None and self._vector_source is not None:
            self._vectors = self._vector_source()
        elif self._vectors is None:
            table = read_parquet(os.path.join(self.path, CHUNKS), columns=["embedding"])
            self._vectors = embedding_matrix(table.column("embedding"))
        return self._vectors

    def recognizer(self) -> Any:
        """Query NER from the spaCy pipeline the bundle was built with (loaded on first
        use), or ``None`` when the bundle used none or it is not installed here."""
        if not self._recognizer_loaded:
            pipeline = self.manifest.model.spacy_pipeline
            if pipeline:
                from query.ner import QueryEntities

                try:
                    self._recognizer = QueryEntities.load(pipeline)
                except (OSError, ImportError) as exc:
                    logger.warning("query NER off: cannot load spaCy %s: %s", pipeline, exc)
            self._recognizer_loaded = True
        return self._recognizer

    def use_recognizer(self, recognizer: Any) -> None:
        """Route with ``recognizer`` (query text -> ``(text, label)`` entities) instead of
        loading the bundle's spaCy pipeline, e.g. a
        :class:`query.ner.PrefetchedEntities` started before the bundle was opened."""
        self._recognizer, self._recognizer_loaded = recognizer, True

    def vocabulary(self) -> Any:
        """The corpus vocabulary over the BM25 index (:class:`query.vocabulary.CorpusVocabulary`),
        built on first use; ``None`` when the bundle has no lexical index."""
        if self._vocabulary is None and self.lexical is not None:
            from query.vocabulary import CorpusVocabulary, common_words

            vocab = self.encoder.vocab()
            self._vocabulary = CorpusVocabulary(self.lexical, common=common_words(vocab))
        return self._vocabulary

    def chunk_text(self, row: int) -> str:
        """The exact text of chunk row ``row``."""
        doc = self.documents[self.chunk_doc_ids[row]]
        return str(doc["text"][int(self.starts[row]) : int(self.ends[row])])

    def embed(self, text: str) -> np.ndarray:
        """Unit-norm query vector from the bundle's own model."""
        return self.encoder.encode(text)


def _read_documents(path: str, moved: dict[str, str]) -> dict[str, dict[str, Any]]:
    table = read_parquet(os.path.join(path, DOCUMENTS), columns=DOCUMENT_COLUMNS)
    documents = {row["doc_id"]: row for row in table.to_pylist()}
    apply_moved_sources(documents, moved)
    return documents


def _query_encoder(
    path: str, manifest: Manifest, model: Any, backend: Backend, threads: int = 0
) -> QueryEncoder | BundledEncoder:
    """The encoder that embeds this bundle's queries: the bundle's own ONNX encoder unless
    ``backend`` is ``"torch"`` or the bundle has none; else the sentence-transformers model
    (``model``, or loaded from the manifest's name) through :class:`QueryEncoder`."""
    if backend not in BACKENDS:
        raise ValueError(f"query encoder must be one of {', '.join(BACKENDS)}, not {backend!r}")
    bundled = manifest.query_encoder is not None and backend != "torch"
    if isinstance(model, BundledEncoder):
        if bundled and model.digest == _encoder_digest(manifest):
            return model  # the same files: keep the session
        model = None
    if model is None and bundled:
        return open_encoder(path, manifest, threads=threads)
    if model is None:
        model = load_sentence_transformer(resolve_model(manifest.config["embed"]["model"]))
    _check_model(model.model if isinstance(model, QueryEncoder) else model, manifest)
    return model if isinstance(model, QueryEncoder) else QueryEncoder.load(model, backend)


def _encoder_digest(manifest: Manifest) -> str:
    info = manifest.query_encoder
    if info is None:
        return ""
    return "/".join(manifest.files[rel].sha256 for rel in (info.graph, info.tokenizer))


def open_encoder(path: str, manifest: Manifest, *, threads: int = 0) -> BundledEncoder:
    """The bundle's own query encoder (no PyTorch): its ONNX graph and tokenizer file.

    Raises:
        BundleError: the bundle carries no encoder, or its files are not listed in the
            manifest.
        ModelMismatchError: the tokenizer file is not the tokenizer the bundle's vectors
            were made with.
    """
    info = manifest.query_encoder
    if info is None:
        raise BundleError(f"bundle {manifest.bundle_id} carries no query encoder")
    for rel in (info.graph, info.tokenizer):
        if rel not in manifest.files:
            raise BundleError(f"bundle {manifest.bundle_id}: encoder file {rel} is not listed")
    tokenizer = _read(path, info.tokenizer).decode("utf-8")
    if tokenizer_json_digest(tokenizer) != manifest.model.tokenizer_sha256:
        raise ModelMismatchError(
            f"bundle {manifest.bundle_id}: {info.tokenizer} is not the tokenizer of "
            f"{manifest.model.name}, which embedded its chunks"
        )
    graph = _read(path, info.graph)
    return BundledEncoder.from_bytes(
        graph, tokenizer, tuple(info.inputs), digest=_encoder_digest(manifest), threads=threads
    )


def _read(path: str, rel: str) -> bytes:
    with open(os.path.join(path, rel), "rb") as handle:
        return handle.read()


def _check_model(model: Any, manifest: Manifest) -> None:
    actual = fingerprint(model, manifest.model.name)
    expected = manifest.model
    if (actual.dimension, actual.tokenizer_sha256) != (
        expected.dimension,
        expected.tokenizer_sha256,
    ):
        raise ModelMismatchError(
            f"bundle {manifest.bundle_id} was embedded with {expected.name} "
            f"(dim {expected.dimension}); the loaded model has dim {actual.dimension} "
            "and a different tokenizer"
        )


def load_bundle(
    root: str | None = None,
    *,
    bundle_id: str | None = None,
    verify: bool = True,
    model: Any = None,
    encoder: Backend = "auto",
    encoder_threads: int = 0,
) -> LoadedBundle:
    """Open the active bundle (or ``bundle_id``) under ``root``.

    ``ACTIVE`` is read once; the returned object keeps using that immutable
    directory even if another bundle is activated meanwhile. Under an object-store
    root (``gs://…``) the bundle is read from a local copy made once per bundle
    (see :func:`store.bundles.local_bundle`).

    Args:
        root: bundle root (default ``$EVIDEX_HOME`` or ``./.evidex``).
        bundle_id: a specific bundle instead of the active one.
        verify: check every file's sha256 against the manifest (on by default).
        model: an already loaded sentence-transformers model, or the
            encoder of another bundle, to reuse; a model's fingerprint must match the
            bundle's, a bundled encoder is kept only when this bundle carries the same
            files.
        encoder: how queries are embedded: ``"auto"`` or ``"onnx"`` (the bundle's own
            ONNX encoder, without PyTorch; for an older bundle, its model exported to
            ONNX at load, which ``"auto"`` only uses when its vectors match PyTorch's)
            or ``"torch"`` (the sentence-transformers model).
        encoder_threads: ONNX Runtime intra-op threads of a bundled encoder (0: one per
            core; a server with several workers shares the cores out).

    Raises:
        NoActiveBundleError: nothing is active and no ``bundle_id`` was given.
        BundleVersionError: the bundle's schema version is unknown.
        BundleIntegrityError: a file does not match its checksum or index header.
        ModelMismatchError: the model differs from the one the bundle was built with.
    """
    resolved_root = resolve_root(root)
    chosen = bundle_id or read_active(resolved_root)
    if chosen is None:
        raise NoActiveBundleError(
            f"no active bundle under {resolved_root}: run `evidex build`, `evidex validate` "
            "and `evidex activate` first"
        )
    return open_bundle(
        local_bundle(resolved_root, chosen),
        verify=verify,
        model=model,
        encoder=encoder,
        encoder_threads=encoder_threads,
        locate=lambda segment_bundle: local_bundle(resolved_root, segment_bundle),
    )


def open_bundle(
    path: str,
    *,
    verify: bool = True,
    model: Any = None,
    encoder: Backend = "auto",
    encoder_threads: int = 0,
    locate: Locate | None = None,
) -> LoadedBundle:
    """Open the bundle directory at ``path`` (see :func:`load_bundle`); the segments it
    lists from other bundles are found beside it, or through ``locate`` (bundle id ->
    local directory)."""
    manifest = read_manifest(path)
    if verify:
        verify_files(path, manifest)
    verify_artifacts(path)  # always: refusing pickles and escapes costs only file headers
    verify_index_headers(path, manifest)
    segments = open_segments(path, manifest, verify=verify, locate=locate)
    for segment in segments:
        if segment.path != path:
            verify_artifacts(segment.path)
            verify_index_headers(segment.path, segment.manifest)
    query_encoder = _query_encoder(path, manifest, model, encoder, encoder_threads)
    segments = [s for s in segments if s.ref.chunks or s.ref.documents] or segments[-1:]
    chunk_path = segments[0].path
    if len(segments) > 1 or segments[0].ref.deleted_chunks or segments[0].ref.deleted_documents:
        merged = merge_segments(
            segments, LexicalConfig.model_validate(manifest.config.get("lexical", {}))
        )
        bundle = LoadedBundle(
            path=path,
            manifest=manifest,
            documents=merged.documents,
            chunk_ids=merged.chunk_ids,
            chunk_doc_ids=merged.chunk_doc_ids,
            starts=merged.starts,
            ends=merged.ends,
            access_classes=merged.access_classes,
            keys=merged.keys,
            index=merged.index,
            encoder=query_encoder,
            lexical=merged.lexical,
            heading_paths=merged.heading_paths,
            pages=merged.pages,
            knowledge=load_knowledge(path),
            partitions=merged.partitions,
            segments=segments,
        )
        bundle._vector_source = merged.vectors
        return bundle
    present = set(pq.read_schema(os.path.join(chunk_path, CHUNKS)).names)
    paged = {"page_start", "page_end"} <= present  # bundles before page numbers lack them
    chunks = read_parquet(
        os.path.join(chunk_path, CHUNKS),
        columns=CHUNK_COLUMNS + (["page_start", "page_end"] if paged else []),
    )
    index = restore_index(chunk_path, CHUNK_INDEX)
    partitions = {
        access_class: restore_index(chunk_path, partition_index(access_class))
        for access_class in ACCESS_CLASSES
        if partition_index(access_class) in segments[0].manifest.indexes
    }
    lexical = None
    if os.path.isdir(os.path.join(chunk_path, LEXICAL_DIR)):
        lexical = LexicalIndex.open(
            os.path.join(chunk_path, LEXICAL_DIR),
            LexicalConfig.model_validate(manifest.config.get("lexical", {})),
            rows=chunks.num_rows,
        )
    bundle = LoadedBundle(
        path=path,
        manifest=manifest,
        documents=_read_documents(chunk_path, segments[0].ref.sources),
        chunk_ids=chunks.column("chunk_id").to_pylist(),
        chunk_doc_ids=chunks.column("doc_id").to_pylist(),
        starts=numbers(chunks.column("start")),
        ends=numbers(chunks.column("end")),
        access_classes=np.asarray(chunks.column("access_class").to_pylist(), dtype=object),
        keys=numbers(chunks.column("ann_key")).astype(np.uint64),
        index=index,
        encoder=query_encoder,
        lexical=lexical,
        heading_paths=chunks.column("heading_path").to_pylist(),
        pages=_pages(chunks) if paged else [],
        knowledge=load_knowledge(path),
        partitions=partitions,
        segments=segments,
    )
    if chunk_path != path:  # a generation reading another bundle's segment, nothing deleted
        bundle._vector_source = lambda: embedding_matrix(
            read_parquet(os.path.join(chunk_path, CHUNKS), columns=["embedding"]).column(
                "embedding"
            )
        )
    return bundle


def _pages(chunks: Any) -> list[tuple[int | None, int | None]]:
    first = chunks.column("page_start").to_pylist()
    last = chunks.column("page_end").to_pylist()
    if all(p is None for p in first):
        return []
    return list(zip(first, last, strict=True))


class BundleReader:
    """A long-lived handle on the active bundle that can pick up new activations.

    ``current`` is always one complete, immutable bundle; :meth:`reload` opens
    the newly active bundle first and only then swaps the reference, so
    requests in flight finish on the bundle they started with.

    Example:
        >>> reader = BundleReader("/srv/evidex")
        >>> retrieve(reader.current, "query")
        >>> reader.reload()   # after `evidex activate`
    """

    def __init__(
        self,
        root: str | None = None,
        *,
        verify: bool = True,
        model: Any = None,
        encoder: Backend = "auto",
        encoder_threads: int = 0,
    ):
        self._root = resolve_root(root)
        self._verify = verify
        self._encoder = encoder
        self._threads = encoder_threads
        self._current = load_bundle(
            self._root, verify=verify, model=model, encoder=encoder, encoder_threads=encoder_threads
        )
        self._current.recognizer()  # load the query NER now, not on the first request

    @property
    def current(self) -> LoadedBundle:
        return self._current

    @property
    def root(self) -> str:
        """The bundle root whose ``ACTIVE`` this reader follows."""
        return self._root

    def _moved_to(self) -> str | None:
        """The bundle ``ACTIVE`` names if it is not the one being served, else ``None``."""
        active = read_active(self._root)
        return None if active == self._current.bundle_id else active

    def stale(self) -> bool:
        """Whether ``ACTIVE`` names a bundle other than the one being served."""
        return self._moved_to() is not None

    def reload(self) -> bool:
        """Switch to the active bundle if it changed; returns whether it did."""
        active = self._moved_to()
        if active is None:
            return False
        verify, threads = self._verify, self._threads
        try:
            fresh = load_bundle(
                self._root,
                bundle_id=active,
                model=self._current.encoder,
                verify=verify,
                encoder_threads=threads,
            )
        except ModelMismatchError:  # the new bundle was built with another model
            fresh = load_bundle(
                self._root,
                bundle_id=active,
                encoder=self._encoder,
                verify=verify,
                encoder_threads=threads,
            )
        old = self._current
        if fresh.manifest.model.spacy_pipeline == old.manifest.model.spacy_pipeline:
            fresh._recognizer, fresh._recognizer_loaded = old._recognizer, old._recognizer_loaded
        fresh.recognizer()  # before the swap: no request waits for spaCy to load
        self._current = fresh
        return True
