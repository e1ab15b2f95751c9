"""The build pipeline: input -> documents -> chunks -> embeddings -> a staged bundle.

Run it as ``evidex build`` or ``python -m pipelines.build_index`` with any Beam
runner flag, e.g.::

    python -m pipelines.build_index --input docs/ --runner DirectRunner \\
        --direct_running_mode multi_processing --direct_num_workers 2
"""

import argparse
import difflib
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    _BeamArgumentParser,
)

from algorithms.normalize import normalize_surface
from pipelines.encoder_artifact import reuse_encoder, write_encoder
from pipelines.knowledge import KNOWLEDGE_COUNTER, IncrementalParent, assemble_knowledge
from pipelines.options import add_build_arguments
from pipelines.segment import write_segments
from schemas import DEAD_LETTER_SCHEMA, register_coders
from schemas.manifest import KnowledgeState, Manifest, ModelFingerprint
from store import bundles, knowledge_layers, knowledge_maps, manifests, storage
from store.activation import read_active
from store.config import (
    STDLIB_CORPUS,
    AnnConfig,
    BuildConfig,
    ChunkConfig,
    EmbedConfig,
    IngestConfig,
    KnowledgeConfig,
    LexicalConfig,
)
from store.memory import choose_memory_pool
from store.models import (
    DEFAULT_MODEL,
    fingerprint,
    force_offline,
    load_sentence_transformer,
    resolve_model,
)
from store.segments import (
    EXTRACTED_MENTIONS,
    LiveDocument,
    Segment,
    live_revisions,
    open_segments,
    own_parts,
    segment_ids,
)
from store.staging import discard, heartbeat
from transforms.chunk import ChunkDocuments
from transforms.delta import (
    CHANGED,
    DUPLICATE,
    MOVED,
    UNCHANGED,
    ReadEditedVectors,
    ReadKnownVectors,
    SplitByDelta,
    reusable_parent,
)
from transforms.embed import EmbedChunks
from transforms.gather import batched_rows
from transforms.ingest import (
    DELETES,
    ReadDocuments,
    count_matches,
    deleting_files,
    input_bytes,
    pattern_and_root,
)
from transforms.knowledge_update import KNOWLEDGE_STATE
from transforms.offload import available_cores
from transforms.segments import ReadExtraction
from transforms.sidecar import SidecarError, read_sidecar
from transforms.stdlib_corpus import ReadStdlibCorpus
from transforms.tags import BAD, GOOD
from transforms.write import WriteTable, WriteTables, records_table

logger = logging.getLogger(__name__)

STAGES = ("ingest", "chunk", "embed")


class BuildFailedError(RuntimeError):
    """The build produced no bundle; the active bundle is untouched."""


class EvidexBuildOptions(PipelineOptions):
    """Pipeline options of ``evidex build``, mapped onto :class:`BuildConfig`."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        add_build_arguments(parser)


class UnknownOptionError(BuildFailedError):
    """A flag that neither evidex nor any Beam options class defines."""


def known_option_strings() -> list[str]:
    """Every ``--flag`` that evidex's or Beam's pipeline options define."""
    return sorted(o for o in _options_parser()._option_string_actions if o.startswith("--"))


def _options_parser() -> argparse.ArgumentParser:
    # The parser Beam itself builds in PipelineOptions.get_all_options: one of each
    # registered options class (ours included), abbreviations off.
    parser = _BeamArgumentParser(allow_abbrev=False)
    for cls in {str(c): c for c in PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)
    return parser


def unknown_options(argv: Sequence[str]) -> list[str]:
    """The flags in ``argv`` (``--name`` or ``--name=value``) no options class knows.

    Beam itself only logs such flags and drops them ("Discarding unparseable args"),
    so a mistyped ``--knowlege=false`` would build with the knowledge layer on.
    """
    _, rest = _options_parser().parse_known_args(list(argv))
    return [arg.split("=", 1)[0] for arg in rest if arg.startswith("-") and arg != "--"]


def closest_option(flag: str, candidates: Sequence[str]) -> str | None:
    """The candidate spelled most like ``flag`` (dashes and underscores alike), if any."""
    key = flag.replace("_", "-")
    by_key = {c.replace("_", "-"): c for c in sorted(candidates, reverse=True)}
    match = difflib.get_close_matches(key, list(by_key), n=1, cutoff=0.6)
    return by_key[match[0]] if match else None


def check_options(argv: Sequence[str], *, also_known: Sequence[str] = ()) -> None:
    """Refuse unknown flags before any work, naming the closest valid one.

    Raises:
        UnknownOptionError: ``argv`` holds a flag no options class defines.
    """
    unknown = unknown_options(argv)
    if not unknown:
        return
    candidates = [*known_option_strings(), *also_known]
    parts = []
    for flag in unknown:
        near = closest_option(flag, candidates)
        parts.append(f"{flag} (did you mean {near}?)" if near else flag)
    raise UnknownOptionError(f"unknown option{'s' if len(parts) > 1 else ''}: {', '.join(parts)}")


@dataclass(frozen=True)
class BuildResult:
    """What a finished build produced."""

    bundle_id: str
    path: str
    manifest: Manifest
    seconds: float


def id_fields(option: str | None) -> dict[str, tuple[str, ...]]:
    """``--id_field a,b`` -> the ingest config's id fields for JSONL records and files
    (nothing when the option is not given: the defaults hold).

    Example:
        >>> id_fields("uuid, slug")
        {'jsonl_id_fields': ('uuid', 'slug'), 'file_id_fields': ('uuid', 'slug')}
    """
    fields = tuple(f.strip() for f in (option or "").split(",") if f.strip())
    return {"jsonl_id_fields": fields, "file_id_fields": fields} if fields else {}


def config_from_options(opts: EvidexBuildOptions) -> BuildConfig:
    """Resolve pipeline options into the frozen build config."""
    return BuildConfig(
        input=opts.input,
        ingest=IngestConfig(
            max_document_bytes=opts.max_document_bytes,
            access_class=opts.access_class,
            source_role=opts.source_role,
            limit=opts.limit,
            jsonl_title_in_text=opts.title_in_text,
            metadata=opts.metadata,
            **id_fields(opts.id_field),
        ),
        chunk=ChunkConfig(target_tokens=opts.target_tokens, semantic=opts.semantic_chunking),
        embed=EmbedConfig(model=opts.model or DEFAULT_MODEL),
        knowledge=KnowledgeConfig(
            enabled=opts.knowledge,
            recluster_share=opts.recluster_share,
            fold_share=opts.fold_share,
            surface_vectors=opts.surface_vectors,
            community_engine=opts.community_engine,
        ),
        ann=AnnConfig(partition_min_rows=opts.ann_partition_min_rows),
        lexical=LexicalConfig(context_chunks=opts.lexical_context),
        spacy_pipeline=opts.spacy_pipeline,
        max_bad_ratio=opts.max_bad_ratio,
    )


@dataclass(frozen=True)
class ParentBundle:
    """The active generation a refresh builds on: its segments and live documents."""

    bundle_id: str
    path: str
    segments: list[Segment]
    live: dict[str, LiveDocument]
    """Each live document's revision, state and the position of the segment holding it."""
    knowledge: KnowledgeState | None = None
    """Set when a refresh may update the parent's knowledge layer instead of recomputing
    it: the parent has one, built with this build's knowledge settings."""
    untouched: dict[str, str] = field(default_factory=dict)
    """Live documents (id -> source file) read from files that have not changed since the
    parent was built (see ``run``'s ``untouched_files``): kept without being read."""
    read_files: tuple[str, ...] | None = None
    """The input files to read (``None``: every match of the input), when some are
    untouched."""
    vector_sources: tuple[str, ...] = ()
    """Bundle directories whose chunk vectors are reused for chunks of the same text."""
    deleting_files: tuple[str, ...] = ()
    """Input files that held explicit deletes when the parent was built."""

    def reread_tables(self) -> dict[str, str]:
        """Each live document the refresh reads again (not kept unread) -> the chunk
        table of the segment holding it: where an edited document's vectors are."""
        return {
            doc_id: storage.join(self.segments[doc.position].path, bundles.CHUNKS)
            for doc_id, doc in self.live.items()
            if doc_id not in self.untouched
        }

    @property
    def states(self) -> list[tuple[str, str]]:
        """``(doc_id, state)`` of every live document (see ``document_state``)."""
        return sorted((doc_id, doc.state) for doc_id, doc in self.live.items())

    @property
    def contents(self) -> list[tuple[str, str]]:
        """``(doc_id, content_state)`` of every live document: what a document read from
        another location must match to be moved, not changed (see ``content_state``)."""
        return sorted((doc_id, doc.content) for doc_id, doc in self.live.items())


UNCHANGED_IDS = ".unchanged.parquet"
"""Staging-only list of the documents a refresh kept where they are (removed before the
manifest is written)."""
MOVED_SOURCES = ".moved.parquet"
"""Staging-only list of the kept documents read from a new location, with that location
(removed before the manifest is written; the manifest's segment refs record it)."""


def assemble(
    pipeline: beam.Pipeline,
    *,
    config: BuildConfig,
    model: ModelFingerprint,
    staging: str,
    parent: ParentBundle | None = None,
    sidecar: dict[str, dict[str, Any]] | None = None,
    spacy_processes: int = 1,
    segments: int = 1,
) -> None:
    """Wire every stage of the build into ``pipeline``, writing into ``staging``: the
    ``segments`` segments holding every input document (one, or ``parts/<k>`` each), or
    (with ``parent``) one segment with the new and changed documents only, the rest kept
    in the parent's segments."""
    parts = 1 if parent is not None else max(1, segments)
    model_path = resolve_model(config.embed.model)
    if config.input == STDLIB_CORPUS:
        read = pipeline | "ReadStdlibCorpus" >> ReadStdlibCorpus(
            config=config.ingest, limit=config.ingest.limit
        )
    else:
        pattern, root = pattern_and_root(config.input)
        read = pipeline | "ReadDocuments" >> ReadDocuments(
            pattern,
            root=root,
            config=config.ingest,
            sidecar=sidecar,
            files=parent.read_files if parent is not None else None,
        )
    documents, read_bad = read[GOOD], read[BAD]
    deletes = read.get(DELETES)
    kept, update = None, None
    if parent is not None:
        delta = documents | "Delta" >> SplitByDelta(
            parent.states,
            parent_contents=parent.contents,
            untouched=parent.untouched,
            deletes=deletes,
        )
        documents = delta[CHANGED]
        read_bad = (read_bad, delta[DUPLICATE]) | "IngestDeadLetters" >> beam.Flatten()
        _ = delta[UNCHANGED] | "WriteUnchangedIds" >> WriteTable(
            storage.join(staging, UNCHANGED_IDS),
            to_table=lambda batches: pa.table(
                {"doc_id": pa.array(sorted(batched_rows(batches)), type=pa.string())}
            ),
            sort_key=lambda batch: batch,
        )
        _ = delta[MOVED] | "WriteMovedSources" >> WriteTable(
            storage.join(staging, MOVED_SOURCES),
            to_table=lambda pairs: pa.table(
                {
                    "doc_id": pa.array([d for d, _ in pairs], type=pa.string()),
                    "source_uri": pa.array([s for _, s in pairs], type=pa.string()),
                }
            ),
            sort_key=lambda pair: pair,
        )
        if config.knowledge.enabled and parent.knowledge is not None:
            update = IncrementalParent(
                path=parent.path,
                segments=[s.path for s in parent.segments],
                changed_since=parent.knowledge.entities_changed,
                unchanged=delta[UNCHANGED],
            )
        elif config.knowledge.enabled:
            kept = pipeline | "KeptExtraction" >> ReadExtraction(
                [(s.path, s.ref.deleted_chunks) for s in parent.segments],
                keep=delta[UNCHANGED] | "UnchangedIds" >> beam.FlatMap(lambda batch: batch),
            )
    chunked = documents | "ChunkDocuments" >> ChunkDocuments(
        model=model_path, config=config.chunk, max_tokens=model.max_seq_length - 2
    )
    known = None
    if parent is not None:
        sources = [
            pipeline
            | f"KnownChunkVectors{i}"
            >> ReadKnownVectors(storage.join(path, bundles.CHUNKS), text_column="text")
            for i, path in enumerate(parent.vector_sources)
        ]
        reread = parent.reread_tables()
        if reread:  # an edited document's unchanged passages keep their vectors
            sources.append(documents | "EditedVectors" >> ReadEditedVectors(reread))
        if sources:
            known = sources | "KnownChunkVectors" >> beam.Flatten()
    embedded = chunked[GOOD] | "EmbedChunks" >> EmbedChunks(
        model=model_path,
        batch_size=config.embed.batch_size,
        batch_chars=config.embed.batch_chars,
        known=known,
    )
    all_embedded = embedded[GOOD]
    if config.knowledge.enabled:
        assemble_knowledge(
            all_embedded | "ChunksForKnowledge" >> beam.Map(lambda e: e.chunk),
            config=config,
            model_path=model_path,
            dimension=model.dimension,
            staging=staging,
            parent_path=parent.path if parent else None,
            spacy_processes=spacy_processes,
            kept=kept,
            update=update,
            parts=parts,
        )
    write_segments(
        documents, all_embedded, staging=staging, config=config, model=model, parts=parts
    )
    join = storage.join
    dead_letters = dict(zip(STAGES, (read_bad, chunked[BAD], embedded[BAD]), strict=True))
    _ = dead_letters | "WriteFailures" >> WriteTables(
        {stage: join(staging, bundles.FAILURES_DIR, f"{stage}.parquet") for stage in STAGES},
        to_table=lambda rows: records_table(rows, DEAD_LETTER_SCHEMA),
        sort_key=lambda d: (d.record_id, d.error_type, d.message),
    )


def spacy_processes(options: PipelineOptions) -> int:
    """Resolve ``--spacy_processes``: a positive number, or 'auto' (see its help).

    Raises:
        BuildFailedError: neither 'auto' nor a positive integer.
    """
    value = str(options.view_as(EvidexBuildOptions).spacy_processes).strip().lower()
    if value == "auto":
        runner = options.view_as(StandardOptions).runner
        direct = options.view_as(DirectOptions)
        in_process = (
            runner in (None, "DirectRunner", "direct")
            and direct.direct_running_mode == "in_memory"
            and (direct.direct_num_workers or 1) == 1
        )
        return available_cores() if in_process else 1
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise BuildFailedError(f"--spacy_processes must be 'auto' or a positive integer, got {value!r}")


AUTO_SEGMENT_BYTES = 128 * 2**20
"""Input bytes per segment under ``--segments auto``: about 230k SciFact-like chunks, whose
rows and HNSW graph take about 0.8 GB on the worker that writes them."""
MAX_SEGMENTS = 64


def segment_count(options: PipelineOptions, config: BuildConfig) -> int:
    """Resolve ``--segments``: a positive number (at most ``MAX_SEGMENTS``), or 'auto'
    (one per ``AUTO_SEGMENT_BYTES`` of the input the build reads, at least one).

    Raises:
        BuildFailedError: neither 'auto' nor a positive integer, or too many.
    """
    value = str(options.view_as(EvidexBuildOptions).segments).strip().lower()
    if value == "auto":
        if config.input == STDLIB_CORPUS:
            return 1
        pattern, _ = pattern_and_root(config.input)
        size = input_bytes(pattern, config.ingest.max_document_bytes)
        return min(MAX_SEGMENTS, max(1, -(-size // AUTO_SEGMENT_BYTES)))
    if value.isdigit() and 0 < int(value) <= MAX_SEGMENTS:
        return int(value)
    raise BuildFailedError(
        f"--segments must be 'auto' or an integer from 1 to {MAX_SEGMENTS}, got {value!r}"
    )


def staged_rows(staging: str, table: str) -> int:
    """Rows of a segment table (``documents.parquet``, ``chunks.parquet``) that a local
    staging folder holds, over every segment it wrote."""
    return sum(
        pq.ParquetFile(os.path.join(staging, folder, table)).metadata.num_rows
        for folder in own_parts(staging)
    )


def check_bad_ratio(
    staging: str, max_bad_ratio: float, *, shown: str, kept: bool, unchanged: int = 0
) -> None:
    """Fail the build, in one line, when too few documents got through.

    Raises:
        BuildFailedError: no input, no good document, or dead letters above the ratio;
            the message counts the dead letters by error type and says where they are
            (``kept``: the staging folder's failures/ survives the failure).
    """
    docs = staged_rows(staging, bundles.DOCUMENTS) + unchanged
    types: dict[str, Counter[str]] = {}
    for stage in STAGES:
        path = os.path.join(staging, bundles.FAILURES_DIR, f"{stage}.parquet")
        types[stage] = Counter(
            pq.read_table(path, columns=["error_type"])["error_type"].to_pylist()
        )
    bad = {stage: sum(found.values()) for stage, found in types.items()}
    total_in = docs + bad["ingest"]
    if total_in == 0:
        raise BuildFailedError("no input documents were found")
    ratio = sum(bad.values()) / (total_in + bad["chunk"] + bad["embed"])
    if docs and ratio <= max_bad_ratio:
        return
    by_type = sum(types.values(), Counter())
    kinds = ", ".join(
        f"{name} {n}" for name, n in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    where = (
        f"in {storage.join(shown, bundles.FAILURES_DIR)}"
        if kept
        else "(run again with --keep-failed to keep them with their reasons)"
    )
    summary = f"{docs} documents ingested; {sum(bad.values())} dead letters ({kinds}) {where}"
    if docs == 0:
        raise BuildFailedError(summary)
    raise BuildFailedError(
        f"dead-letter ratio {ratio:.1%} exceeds the limit {max_bad_ratio:.1%}: {summary}"
    )


def run(
    argv: Sequence[str] | None = None,
    *,
    bundle_id: str | None = None,
    untouched_files: Collection[str] = (),
    parent_id: str | None = None,
    reuse_vectors_from: Collection[str] = (),
) -> BuildResult:
    """Build and stage a bundle, then publish it under ``bundles/<id>``.

    Args:
        argv: evidex build options plus any Beam pipeline options.
        bundle_id: override the time-based id (tests).
        untouched_files: input files (as the input's listing names them) known to be
            unchanged since the active generation was built: on a refresh, their live
            documents are kept without reading the files (the stream passes the files
            whose path, size and modification time are those of its last listing).
        parent_id: the generation a refresh builds on, instead of the active one (the
            stream rebasing its windows onto a compaction that finished meanwhile).
        reuse_vectors_from: bundle ids of segments whose chunk vectors a refresh reuses
            for chunks with the same text (the windows' segments a rebase leaves out):
            nothing they hold is embedded again.

    Raises:
        BuildFailedError: bad input past the threshold, or a pipeline failure.
            The active bundle is never touched.
    """
    check_options(list(argv or []))
    force_offline()
    register_coders()
    started = time.monotonic()
    options = PipelineOptions(list(argv or []))
    opts = options.view_as(EvidexBuildOptions)
    options.view_as(SetupOptions).save_main_session = False
    storage.configure(options)  # the launcher's own reads/writes use the same clients
    config = config_from_options(opts)
    root = bundles.resolve_root(opts.root)
    # Input problems first: they fail in milliseconds, the model load takes seconds.
    sidecar = None
    if config.ingest.metadata:
        try:
            sidecar = read_sidecar(config.ingest.metadata)
        except SidecarError as exc:
            raise BuildFailedError(str(exc)) from exc
    if config.input != STDLIB_CORPUS:
        pattern, _ = pattern_and_root(config.input)
        if count_matches(pattern) == 0:
            raise BuildFailedError(f"no input documents: nothing matches {config.input!r}")
    segments = segment_count(options, config)
    logger.info("loading embedding model %s", config.embed.model)
    loaded = load_sentence_transformer(resolve_model(config.embed.model))
    model = fingerprint(loaded, config.embed.model, spacy_pipeline=config.spacy_pipeline)
    bundle_id = bundle_id or bundles.new_bundle_id()
    staging = bundles.staging_path(root, bundle_id)
    with heartbeat(root, bundle_id):
        try:
            manifest = _build(
                options,
                config=config,
                model=model,
                root=root,
                staging=staging,
                bundle_id=bundle_id,
                sidecar=sidecar,
                encoder_model=loaded if opts.query_encoder_artifact else None,
                untouched_files=frozenset(untouched_files),
                parent_id=parent_id,
                reuse_vectors_from=tuple(sorted(reuse_vectors_from)),
                segments=segments,
            )
        except BaseException:
            discard(root, bundle_id, keep_failures=opts.keep_failed)
            raise
        path = bundles.publish(root, staging, bundle_id)
    return BuildResult(bundle_id, path, manifest, time.monotonic() - started)


def _build(
    options: PipelineOptions,
    *,
    config: BuildConfig,
    model: ModelFingerprint,
    root: str,
    staging: str,
    bundle_id: str,
    sidecar: dict[str, dict[str, Any]] | None,
    encoder_model: Any = None,
    untouched_files: frozenset[str] = frozenset(),
    parent_id: str | None = None,
    reuse_vectors_from: tuple[str, ...] = (),
    segments: int = 1,
) -> Manifest:
    """Run the pipeline into ``staging``, check its dead letters and write the manifest
    (with the query encoder exported from ``encoder_model``, when given). A full build
    writes ``segments`` segments; a refresh one."""
    opts = options.view_as(EvidexBuildOptions)
    if not storage.is_remote(staging):
        os.makedirs(os.path.join(staging, bundles.FAILURES_DIR), exist_ok=True)
    base = parent_id or read_active(root)
    parent = delta_parent(root, base, config, model) if opts.delta else None
    if parent is not None and untouched_files and not sidecar and config.input != STDLIB_CORPUS:
        parent = _skip_untouched(parent, config.input, untouched_files)
    if parent is not None and reuse_vectors_from:
        parent = replace(
            parent,
            vector_sources=tuple(bundles.bundle_path(root, b) for b in reuse_vectors_from),
        )
    logger.info(
        "building bundle %s from %s into %s%s",
        bundle_id,
        config.input,
        staging,
        f" (delta against {parent.bundle_id})"
        if parent
        else (f" as {segments} segments" if segments > 1 else ""),
    )
    pipeline = beam.Pipeline(options=options)
    assemble(
        pipeline,
        config=config,
        model=model,
        staging=staging,
        parent=parent,
        sidecar=sidecar,
        spacy_processes=spacy_processes(options),
        segments=1 if parent is not None else segments,
    )
    query_encoder = None
    if encoder_model is not None:
        if parent is not None:
            query_encoder = reuse_encoder(parent.path, staging, model)
        if query_encoder is None:
            query_encoder = write_encoder(staging, encoder_model)
    try:
        result = pipeline.run()
        result.wait_until_finish()
    except (RuntimeError, OSError) as exc:  # a DoFn's error, e.g. ENOSPC at a writer
        raise BuildFailedError(f"pipeline failed: {' '.join(str(exc).split())[:2000]}") from exc
    with local_staging(staging) as local:
        unchanged = _unchanged_ids(local, staging) if parent is not None else set()
        moved = _moved_sources(local, staging) if parent is not None else {}
        deleting = deleting_files(result)  # the next refresh reads them again
        return write_generation(
            local,
            staging,
            bundle_id=bundle_id,
            config=config,
            model=model,
            parent=parent,
            parent_id=base,
            unchanged=unchanged,
            moved=moved,
            embedded=(_counter(result, "texts_embedded"), _counter(result, KNOWLEDGE_COUNTER)),
            query_encoder=query_encoder,
            keep_failed=opts.keep_failed,
            deleting=deleting,
        )


def write_generation(
    local: str,
    staging: str,
    *,
    bundle_id: str,
    config: BuildConfig,
    model: ModelFingerprint,
    parent: ParentBundle | None,
    parent_id: str | None,
    unchanged: set[str],
    embedded: tuple[int, int],
    query_encoder: Any,
    keep_failed: bool,
    deleting: Sequence[str] = (),
    moved: Mapping[str, str] | None = None,
) -> Manifest:
    """Check the staged bundle's dead letters and write its manifest: the segments kept
    from ``parent`` (with the deletions of what changed or went, and the new sources of
    ``moved``: kept documents read from another location), the delta counts
    (``embedded``: chunk texts and knowledge texts embedded), the knowledge state. ``local``
    is ``staging`` itself, or its local copy (:func:`local_staging`). Shared by the build
    and the stream's committer (``pipelines.commit``).

    Raises:
        BuildFailedError: too few documents got through (see :func:`check_bad_ratio`).
    """
    check_bad_ratio(
        local,
        config.max_bad_ratio,
        shown=staging,
        kept=keep_failed,
        unchanged=len(unchanged),
    )
    moved = dict(moved or {})
    kept, reused = kept_segments(parent, unchanged, moved)
    delta = delta_counts(local, parent, unchanged, embedded[0], reused, moved=len(moved))
    delta["knowledge_texts_embedded"] = embedded[1]
    if deleting:
        delta["deleting_files"] = list(deleting)
    chunks = staged_rows(local, bundles.CHUNKS) + delta["chunks_reused"]
    logger.info(
        "documents: %(new)d new, %(changed)d changed, %(moved)d moved, %(unchanged)d unchanged, "
        "%(deleted)d deleted",
        delta,
    )
    logger.info("%s", embedding_summary(chunks, delta))
    if config.knowledge.enabled and local == staging:  # readers map files on a local disk
        knowledge_maps.write_maps(local, parent.path if parent else None, normalize_surface)
    manifest = manifests.write_manifest(
        local,
        bundle_id=bundle_id,
        config=config,
        model=model,
        parent_bundle_id=parent_id,
        delta=delta,
        query_encoder=query_encoder,
        segments=kept,
        knowledge_state=staged_knowledge_state(local, staging, bundle_id, parent)
        if config.knowledge.enabled
        else None,
        kept_revisions=[(d, parent.live[d].revision) for d in unchanged] if parent else (),
        linked_from=parent.path if parent else None,
    )
    if local != staging:  # object store: the manifests join the staged files
        manifests.upload_manifests(local, staging)
    return manifest


def delta_parent(
    root: str, active: str | None, config: BuildConfig, model: ModelFingerprint
) -> ParentBundle | None:
    if active is None:
        return None
    path = bundles.bundle_path(root, active)
    try:
        manifest = bundles.read_manifest(path)
    except bundles.BundleError as exc:
        logger.warning("active bundle %s unreadable (%s): full build", active, exc)
        return None
    if not reusable_parent(manifest, config=config, model=model):
        logger.info("active bundle %s used other chunking or model: full build", active)
        return None
    if not manifest.segments:
        logger.info(
            "active bundle %s predates segments (schema %d): full build",
            active,
            manifest.schema_version,
        )
        return None
    try:
        segments = open_segments(
            path, manifest, verify=False, locate=lambda b: bundles.bundle_path(root, b)
        )
        live = live_revisions(segments)
    except bundles.BundleError as exc:
        logger.warning("active bundle %s has a bad segment (%s): full build", active, exc)
        return None
    unparsed = [s.ref.bundle_id for s in segments if EXTRACTED_MENTIONS not in s.manifest.files]
    if config.knowledge.enabled and unparsed:
        logger.info(
            "segments %s of the active bundle %s were built without the knowledge layer: "
            "full build",
            ", ".join(unparsed),
            active,
        )
        return None
    knowledge = _incremental_knowledge(manifest, config)
    if config.knowledge.enabled and knowledge is None:
        logger.info(
            "active bundle %s has no knowledge layer built with these settings: "
            "recomputing it over every live chunk",
            active,
        )
    deleting = tuple((manifest.delta or {}).get("deleting_files") or ())
    return ParentBundle(active, path, segments, live, knowledge, deleting_files=deleting)


def _skip_untouched(
    parent: ParentBundle, input_path: str, untouched_files: frozenset[str]
) -> ParentBundle:
    """``parent`` with the live documents of ``untouched_files`` kept unread, and the
    input's other files as the ones to read.

    Files that held explicit deletes are read every time (their deletes must reach a
    changed file that holds the deleted id again); when one of them changed or is gone,
    every file is read (a delete taken back must bring its document back, from wherever
    it is)."""
    from apache_beam.io.filesystems import FileSystems

    if any(f not in untouched_files for f in parent.deleting_files):
        logger.info("a file with explicit deletes changed or is gone: reading every file")
        return parent
    untouched_files = untouched_files - set(parent.deleting_files)
    untouched = {d: doc.source for d, doc in parent.live.items() if doc.source in untouched_files}
    pattern, _ = pattern_and_root(input_path)
    files = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
    to_read = tuple(sorted(f for f in files if f not in untouched_files))
    logger.info(
        "%d of %d input files unchanged since %s: %d documents kept without reading",
        len(files) - len(to_read),
        len(files),
        parent.bundle_id,
        len(untouched),
    )
    return replace(parent, untouched=untouched, read_files=to_read)


def _unchanged_ids(local: str, staging: str) -> set[str]:
    """The refresh's kept document ids, read from the staging-only file, which is then
    removed (it is not part of the bundle)."""
    path = os.path.join(local, UNCHANGED_IDS)
    ids = set(pq.read_table(path, columns=["doc_id"])["doc_id"].to_pylist())
    _remove_staging_only(local, staging, UNCHANGED_IDS)
    return ids


def _moved_sources(local: str, staging: str) -> dict[str, str]:
    """The refresh's moved documents and their new sources, read from the staging-only
    file, which is then removed."""
    path = os.path.join(local, MOVED_SOURCES)
    table = pq.read_table(path, columns=["doc_id", "source_uri"])
    moved = dict(zip(table["doc_id"].to_pylist(), table["source_uri"].to_pylist(), strict=True))
    _remove_staging_only(local, staging, MOVED_SOURCES)
    return moved


def _remove_staging_only(local: str, staging: str, name: str) -> None:
    """Remove a staging-only file (not part of the bundle) from ``local`` and ``staging``."""
    os.remove(os.path.join(local, name))
    if local != staging:
        storage.delete_file(storage.join(staging, name))


def staged_knowledge_state(
    local: str, staging: str, bundle_id: str, parent: ParentBundle | None
) -> KnowledgeState:
    """Where the new generation's communities were clustered and how much changed since:
    fresh, unless an incremental update kept its parent's (it says so in a staging-only
    file, which is then removed)."""
    path = os.path.join(local, KNOWLEDGE_STATE)
    if parent is None or parent.knowledge is None or not os.path.exists(path):
        return KnowledgeState(communities_from=bundle_id, entities_changed=0.0)
    with open(path, encoding="utf-8") as handle:
        state = json.load(handle)
    _remove_staging_only(local, staging, KNOWLEDGE_STATE)
    if state["reclustered"]:
        return KnowledgeState(communities_from=bundle_id, entities_changed=0.0)
    return KnowledgeState(
        communities_from=parent.knowledge.communities_from,
        entities_changed=round(float(state["share"]), 6),
    )


def _listed(manifest: Manifest, table: str) -> bool:
    """Whether the manifest lists knowledge table ``table``, whole or as a base and a
    delta (:mod:`store.knowledge_layers`)."""
    whole, *layered = knowledge_layers.table_files(table)
    return whole in manifest.files or (bool(layered) and all(n in manifest.files for n in layered))


def _incremental_knowledge(manifest: Manifest, config: BuildConfig) -> KnowledgeState | None:
    """The parent's knowledge state when a refresh may update its knowledge layer: it has
    one (with a state), built with the same spaCy pipeline and knowledge settings (the
    re-clustering threshold and the community engine aside: both act only when communities
    are clustered again)."""
    state = manifest.knowledge_state
    if not config.knowledge.enabled or state is None:
        return None
    needed = [bundles.TABLES[t] for t in bundles.KNOWLEDGE_TABLES]
    if any(not _listed(manifest, name) for name in needed):
        return None
    if any(
        name not in manifest.files for name in (bundles.RELATION_INDEX, bundles.COMMUNITY_INDEX)
    ):
        return None
    ignored = {"recluster_share", "community_engine", "fold_share"}
    settings = config.knowledge.model_dump(mode="json", exclude=ignored)
    theirs = {k: v for k, v in manifest.config.get("knowledge", {}).items() if k not in ignored}
    same_parser = manifest.config.get("spacy_pipeline") == config.spacy_pipeline
    return state if theirs == settings and same_parser else None


def kept_segments(
    parent: ParentBundle | None, unchanged: set[str], moved: Mapping[str, str] | None = None
) -> tuple[list[Any], int]:
    """The parent's segments that still hold a live document, each with its deletion set
    grown by the documents this refresh changed or removed (and their chunks) and its
    record of moved sources updated (``moved``: kept documents read from another location
    now), and the number of live chunks they keep."""
    moved = moved or {}
    if parent is None:
        return [], 0
    kept, reused = [], 0
    for position, segment in enumerate(parent.segments):
        here = {d for d, doc in parent.live.items() if doc.position == position}
        if not here & unchanged:
            continue  # nothing of it stays live: the generation stops listing it
        deleted_docs = set(segment.ref.deleted_documents) | (here - unchanged)
        _, _, chunk_ids, chunk_docs = segment_ids(segment)
        deleted_chunks = set()
        for chunk_id, doc_id in zip(chunk_ids, chunk_docs, strict=True):
            if doc_id in deleted_docs:
                deleted_chunks.add(chunk_id)
            else:
                reused += 1
        sources = {d: s for d, s in segment.ref.sources.items() if d not in deleted_docs}
        sources.update((d, moved[d]) for d in sorted(here & moved.keys()))
        kept.append(
            segment.ref.model_copy(
                update={
                    "deleted_documents": sorted(deleted_docs),
                    "deleted_chunks": sorted(deleted_chunks),
                    "sources": dict(sorted(sources.items())),
                }
            )
        )
    return kept, reused


@contextmanager
def local_staging(staging: str) -> Iterator[str]:
    """``staging`` itself when local; else a temporary local copy of the staged files,
    for the driver's checks and checksums (the launcher reads each file once)."""
    if not storage.is_remote(staging):
        yield staging
        return
    with tempfile.TemporaryDirectory(prefix="evidex-staging-") as local:
        logger.info("reading staged files from %s to checksum them", staging)
        storage.download_tree(staging, local)
        yield local


def embedding_summary(chunks: int, delta: dict[str, Any]) -> str:
    """Why a build embedded fewer texts than it has chunks, in one line.

    Example:
        >>> embedding_summary(10, {"texts_embedded": 6, "chunks_reused": 3})[:68]
        '10 chunks: 6 texts embedded, 3 chunks reused from the active bundle'
    """
    embedded, reused = delta.get("texts_embedded", 0), delta.get("chunks_reused", 0)
    parts = [f"{chunks} chunks: {embedded} texts embedded"]
    if reused:
        parts.append(f"{reused} chunks reused from the active bundle")
    repeats = chunks - embedded - reused
    if repeats > 0:
        plural = "chunks repeat" if repeats > 1 else "chunk repeats"
        parts.append(f"{repeats} {plural} a text embedded once (identical texts share one vector)")
    return ", ".join(parts)


def _counter(result: Any, name: str) -> int:
    counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    return int(sum(c.committed or 0 for c in counters))


def delta_counts(
    staging: str,
    parent: ParentBundle | None,
    unchanged: set[str],
    embedded: int,
    reused: int,
    *,
    moved: int = 0,
) -> dict[str, Any]:
    """What a build did with the parent's documents: ``new``, ``changed``, ``moved`` (kept,
    read from another location), ``unchanged`` (kept as they were) and ``deleted``, and
    what it embedded or reused."""
    written = [
        doc_id
        for folder in own_parts(staging)
        for doc_id in pq.read_table(
            os.path.join(staging, folder, bundles.DOCUMENTS), columns=["doc_id"]
        )["doc_id"].to_pylist()
    ]
    before = parent.live if parent else {}
    changed = sum(d in before for d in written)
    return {
        "parent": parent.bundle_id if parent else None,
        "new": len(written) - changed,
        "changed": changed,
        "moved": moved,
        "unchanged": len(unchanged) - moved,
        "deleted": len(before) - len(unchanged) - changed,
        "texts_embedded": embedded,
        "chunks_reused": reused,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pipelines.build_index``."""
    choose_memory_pool()
    args = sys.argv[1:] if argv is None else list(argv)
    if "-h" in args or "--help" in args:
        parser = argparse.ArgumentParser(
            prog="python -m pipelines.build_index",
            description="Build an evidex bundle. Any Beam pipeline option (--runner, "
            "--direct_running_mode, --project, ...) is accepted as well.",
        )
        EvidexBuildOptions._add_argparse_args(parser)
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", force=True)
    try:
        result = run(args)
    except UnknownOptionError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 2
    except BuildFailedError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    print(result.bundle_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
