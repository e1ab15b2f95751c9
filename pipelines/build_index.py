"""The build pipeline: input -> documents -> chunks -> embeddings -> a staged bundle.

Run it as ``evidex build`` or ``python -m pipelines.build_index`` with any Beam
runner flag, e.g.::

    python -m pipelines.build_index --input docs/ --runner DirectRunner \\
        --direct_running_mode multi_processing --direct_num_workers 2
"""

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
)

from pipelines.knowledge import KNOWLEDGE_COUNTER, assemble_knowledge
from schemas import DEAD_LETTER_SCHEMA, DOCUMENT_SCHEMA, register_coders
from schemas.manifest import Manifest, ModelFingerprint
from store import bundles, storage
from store.activation import read_active
from store.config import (
    DEFAULT_MAX_BAD_RATIO,
    DEFAULT_SPACY_PIPELINE,
    DEFAULT_TARGET_TOKENS,
    STDLIB_CORPUS,
    AnnConfig,
    BuildConfig,
    ChunkConfig,
    EmbedConfig,
    IngestConfig,
    KnowledgeConfig,
    LexicalConfig,
)
from store.models import (
    DEFAULT_MODEL,
    fingerprint,
    force_offline,
    load_sentence_transformer,
    resolve_model,
)
from transforms.ann import BuildAnnIndex, BuildAnnPartitions
from transforms.chunk import ChunkDocuments
from transforms.delta import CHANGED, SplitByDelta, reusable_parent
from transforms.embed import EmbedChunks
from transforms.gather import CollectAll
from transforms.ingest import ReadDocuments, count_matches, pattern_and_root
from transforms.lexical import BuildLexicalIndex
from transforms.offload import available_cores
from transforms.sidecar import SidecarError, read_sidecar
from transforms.stdlib_corpus import ReadStdlibCorpus
from transforms.tags import BAD, GOOD
from transforms.write import WriteTable, WriteTables, chunk_rows_table, records_table

logger = logging.getLogger(__name__)

STAGES = ("ingest", "chunk", "embed")


class BuildFailedError(RuntimeError):
    """The build produced no bundle; the active bundle is untouched."""


def _on_unless_false(value: str) -> bool:
    """A boolean option that is on unless given as 0, false or no (``--delta=false``)."""
    return value.lower() not in ("0", "false", "no")


class EvidexBuildOptions(PipelineOptions):
    """Pipeline options of ``evidex build``, mapped onto :class:`BuildConfig`."""

    @classmethod
    def _add_argparse_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--input",
            default=STDLIB_CORPUS,
            help="file, directory or glob of .txt/.md/.jsonl files (any Beam filesystem); "
            "'stdlib:' (the default) builds the embedded Python-documentation corpus",
        )
        parser.add_argument(
            "--root", default=None, help="bundle root (default $EVIDEX_HOME or ./.evidex)"
        )
        parser.add_argument(
            "--model",
            default=None,
            help="sentence-transformers model name or local path "
            "(default: the bundled all-MiniLM-L6-v2)",
        )
        parser.add_argument(
            "--target_tokens",
            type=int,
            default=DEFAULT_TARGET_TOKENS,
            help="preferred chunk size in model tokens",
        )
        parser.add_argument(
            "--semantic_chunking",
            action="store_true",
            help="also end chunks where adjacent sentences' embeddings grow apart "
            "(embeds the sentences of sections larger than --target_tokens: slower builds)",
        )
        parser.add_argument(
            "--lexical_context",
            type=int,
            default=LexicalConfig().context_chunks,
            help="BM25 scores each chunk together with this many neighbouring chunks of its "
            "document on each side; hits still quote the chunk alone (default %(default)s; "
            "0: the chunk alone)",
        )
        parser.add_argument(
            "--ann_partition_min_rows",
            type=int,
            default=AnnConfig().partition_min_rows,
            help="give each access class with more chunks than this its own HNSW file, "
            "searched for callers restricted to some classes (default %(default)s; smaller "
            "classes are searched exactly)",
        )
        parser.add_argument(
            "--max_bad_ratio",
            type=float,
            default=DEFAULT_MAX_BAD_RATIO,
            help="fail the build when dead letters exceed this share of inputs",
        )
        parser.add_argument(
            "--max_document_bytes",
            type=int,
            default=IngestConfig().max_document_bytes,
            help="files (and JSONL records) larger than this go to the dead letters, "
            "unread (default %(default)s)",
        )
        parser.add_argument(
            "--access_class",
            default=IngestConfig().access_class,
            help="access class given to every document",
        )
        parser.add_argument(
            "--source_role",
            default=IngestConfig().source_role,
            help="source role given to every document",
        )
        parser.add_argument(
            "--metadata",
            default=None,
            help="sidecar JSONL or CSV keyed by source_id: access_class, source_role, "
            "language, valid_from, valid_to, title (overrides front matter and defaults)",
        )
        parser.add_argument(
            "--delta",
            default=True,
            type=_on_unless_false,
            help="reuse the active bundle's rows and vectors for unchanged documents "
            "(default true; --delta=false forces a full build)",
        )
        parser.add_argument(
            "--title_in_text",
            action="store_true",
            help="JSONL: make each record's title the first paragraph of its text",
        )
        parser.add_argument(
            "--knowledge",
            default=True,
            type=_on_unless_false,
            help="build the knowledge layer: spaCy mentions and relations, canonical "
            "entities, Louvain communities, relation/community vectors (default true)",
        )
        parser.add_argument(
            "--spacy_pipeline",
            default=DEFAULT_SPACY_PIPELINE,
            help="installed spaCy pipeline (name or path) for the knowledge layer",
        )
        parser.add_argument(
            "--spacy_processes",
            default="auto",
            help="spaCy parsers per worker, the worker included: 1 parses in the worker "
            "alone; 'auto' (default) uses every core when the pipeline runs in one "
            "in-process DirectRunner worker and 1 otherwise (other runners already run "
            "a worker per core). Speed only: the bundle is the same",
        )
        parser.add_argument(
            "--limit",
            type=int,
            default=None,
            help="embedded corpus only: keep the first N documents",
        )


@dataclass(frozen=True)
class BuildResult:
    """What a finished build produced."""

    bundle_id: str
    path: str
    manifest: Manifest
    seconds: float


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
        ),
        chunk=ChunkConfig(target_tokens=opts.target_tokens, semantic=opts.semantic_chunking),
        embed=EmbedConfig(model=opts.model or DEFAULT_MODEL),
        knowledge=KnowledgeConfig(enabled=opts.knowledge),
        ann=AnnConfig(partition_min_rows=opts.ann_partition_min_rows),
        lexical=LexicalConfig(context_chunks=opts.lexical_context),
        spacy_pipeline=opts.spacy_pipeline,
        max_bad_ratio=opts.max_bad_ratio,
    )


@dataclass(frozen=True)
class ParentBundle:
    """The active bundle a delta build reuses rows and vectors from."""

    bundle_id: str
    path: str
    revisions: list[tuple[str, str]]


def assemble(
    pipeline: beam.Pipeline,
    *,
    config: BuildConfig,
    model: ModelFingerprint,
    staging: str,
    parent: ParentBundle | None = None,
    sidecar: dict[str, dict[str, Any]] | None = None,
    spacy_processes: int = 1,
) -> None:
    """Wire every stage of the build into ``pipeline``, writing into ``staging``."""
    model_path = resolve_model(config.embed.model)
    if config.input == STDLIB_CORPUS:
        read = pipeline | "ReadStdlibCorpus" >> ReadStdlibCorpus(
            config=config.ingest, limit=config.ingest.limit
        )
    else:
        pattern, root = pattern_and_root(config.input)
        read = pipeline | "ReadDocuments" >> ReadDocuments(
            pattern, root=root, config=config.ingest, sidecar=sidecar
        )
    documents = read[GOOD]
    to_chunk, reused = documents, None
    if parent is not None:
        delta = documents | "Delta" >> SplitByDelta(
            parent.revisions, storage.join(parent.path, bundles.CHUNKS)
        )
        to_chunk, reused = delta[CHANGED], delta["reused"]
    chunked = to_chunk | "ChunkDocuments" >> ChunkDocuments(
        model=model_path, config=config.chunk, max_tokens=model.max_seq_length - 2
    )
    embedded = chunked[GOOD] | "EmbedChunks" >> EmbedChunks(
        model=model_path,
        batch_size=config.embed.batch_size,
        batch_chars=config.embed.batch_chars,
    )
    all_embedded = embedded[GOOD]
    if reused is not None:
        all_embedded = (embedded[GOOD], reused) | "MergeReused" >> beam.Flatten()
    if config.knowledge.enabled:
        assemble_knowledge(
            all_embedded | "ChunksForKnowledge" >> beam.Map(lambda e: e.chunk),
            config=config,
            model_path=model_path,
            dimension=model.dimension,
            staging=staging,
            parent_path=parent.path if parent else None,
            spacy_processes=spacy_processes,
        )
    join = storage.join
    _ = documents | "WriteDocuments" >> WriteTable(
        join(staging, bundles.DOCUMENTS),
        to_table=lambda rows: records_table(rows, DOCUMENT_SCHEMA),
        sort_key=lambda d: d.doc_id,
    )
    dimension = model.dimension
    # One gathering of the chunk rows feeds the chunk table, its index and BM25.
    collected = all_embedded | "CollectEmbedded" >> CollectAll()
    _ = collected | "WriteChunks" >> WriteTable(
        join(staging, bundles.CHUNKS),
        to_table=lambda rows: chunk_rows_table(rows, dimension),
        sort_key=lambda e: e.chunk.chunk_id,
        collected=True,
    )
    _ = collected | "BuildChunkIndex" >> BuildAnnIndex(
        join(staging, bundles.CHUNK_INDEX), dimension=dimension, config=config.ann, collected=True
    )
    _ = all_embedded | "BuildChunkPartitions" >> BuildAnnPartitions(
        staging, dimension=dimension, config=config.ann
    )
    _ = (
        collected
        | "ChunksOfEmbedded" >> beam.Map(lambda rows: [e.chunk for e in rows])
        | "BuildLexicalIndex"
        >> BuildLexicalIndex(
            join(staging, bundles.LEXICAL_DIR), config=config.lexical, collected=True
        )
    )
    dead_letters = dict(zip(STAGES, (read[BAD], chunked[BAD], embedded[BAD]), strict=True))
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


def _check_bad_ratio(staging: str, max_bad_ratio: float, *, shown: str) -> None:
    docs = pq.ParquetFile(os.path.join(staging, bundles.DOCUMENTS)).metadata.num_rows
    bad = {
        stage: pq.ParquetFile(
            os.path.join(staging, bundles.FAILURES_DIR, f"{stage}.parquet")
        ).metadata.num_rows
        for stage in STAGES
    }
    total_in = docs + bad["ingest"]
    if total_in == 0:
        raise BuildFailedError("no input documents were found")
    if docs == 0:
        raise BuildFailedError(f"every input was rejected ({bad['ingest']} dead letters)")
    ratio = sum(bad.values()) / (total_in + bad["chunk"] + bad["embed"])
    if ratio > max_bad_ratio:
        raise BuildFailedError(
            f"dead-letter ratio {ratio:.1%} exceeds the limit {max_bad_ratio:.1%} "
            f"(ingest {bad['ingest']}, chunk {bad['chunk']}, embed {bad['embed']}); "
            f"see {storage.join(shown, bundles.FAILURES_DIR)}"
        )


def run(argv: Sequence[str] | None = None, *, bundle_id: str | None = None) -> BuildResult:
    """Build and stage a bundle, then publish it under ``bundles/<id>``.

    Args:
        argv: evidex build options plus any Beam pipeline options.
        bundle_id: override the time-based id (tests).

    Raises:
        BuildFailedError: bad input past the threshold, or a pipeline failure.
            The active bundle is never touched.
    """
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
    logger.info("loading embedding model %s", config.embed.model)
    model = fingerprint(
        load_sentence_transformer(resolve_model(config.embed.model)),
        config.embed.model,
        spacy_pipeline=config.spacy_pipeline,
    )
    bundle_id = bundle_id or bundles.new_bundle_id()
    staging = bundles.staging_path(root, bundle_id)
    if not storage.is_remote(staging):
        os.makedirs(os.path.join(staging, bundles.FAILURES_DIR), exist_ok=True)
    active = read_active(root)
    parent = _delta_parent(root, active, config, model) if opts.delta else None
    logger.info(
        "building bundle %s from %s into %s%s",
        bundle_id,
        config.input,
        staging,
        f" (delta against {parent.bundle_id})" if parent else "",
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
    )
    try:
        result = pipeline.run()
        result.wait_until_finish()
    except (RuntimeError, OSError) as exc:  # a DoFn's error, e.g. ENOSPC at a writer
        raise BuildFailedError(f"pipeline failed: {' '.join(str(exc).split())[:2000]}") from exc
    with _local_staging(staging) as local:
        _check_bad_ratio(local, config.max_bad_ratio, shown=staging)
        delta = _delta_counts(
            local, parent, _counter(result, "texts_embedded"), _counter(result, "chunks_reused")
        )
        delta["knowledge_texts_embedded"] = _counter(result, KNOWLEDGE_COUNTER)
        logger.info(
            "documents: %(new)d new, %(changed)d changed, %(unchanged)d unchanged, "
            "%(deleted)d deleted; %(texts_embedded)d texts embedded, "
            "%(chunks_reused)d chunks reused",
            delta,
        )
        manifest = bundles.write_manifest(
            local,
            bundle_id=bundle_id,
            config=config,
            model=model,
            parent_bundle_id=active,
            delta=delta,
        )
        if local != staging:  # object store: the manifest joins the staged files
            storage.write_bytes(
                storage.join(staging, bundles.MANIFEST),
                storage.read_bytes(os.path.join(local, bundles.MANIFEST)),
            )
    path = bundles.publish(root, staging, bundle_id)
    return BuildResult(bundle_id, path, manifest, time.monotonic() - started)


def _delta_parent(
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
    table = bundles.read_columns(storage.join(path, bundles.DOCUMENTS), ["doc_id", "revision"])
    revisions = list(zip(table["doc_id"].to_pylist(), table["revision"].to_pylist(), strict=True))
    return ParentBundle(active, path, revisions)


@contextmanager
def _local_staging(staging: str) -> Iterator[str]:
    """``staging`` itself when local; else a temporary local copy of the staged files,
    for the driver's checks and checksums (the launcher reads each file once)."""
    if not storage.is_remote(staging):
        yield staging
        return
    with tempfile.TemporaryDirectory(prefix="evidex-staging-") as local:
        logger.info("reading staged files from %s to checksum them", staging)
        storage.download_tree(staging, local)
        yield local


def _counter(result: Any, name: str) -> int:
    counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    return int(sum(c.committed or 0 for c in counters))


def _delta_counts(
    staging: str, parent: ParentBundle | None, embedded: int, reused: int
) -> dict[str, Any]:
    table = pq.read_table(os.path.join(staging, bundles.DOCUMENTS), columns=["doc_id", "revision"])
    now = dict(zip(table["doc_id"].to_pylist(), table["revision"].to_pylist(), strict=True))
    before = dict(parent.revisions) if parent else {}
    return {
        "parent": parent.bundle_id if parent else None,
        "new": sum(d not in before for d in now),
        "changed": sum(d in before and before[d] != r for d, r in now.items()),
        "unchanged": sum(before.get(d) == r for d, r in now.items()),
        "deleted": sum(d not in now for d in before),
        "texts_embedded": embedded,
        "chunks_reused": reused,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pipelines.build_index``."""
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
    except BuildFailedError as exc:
        print(f"build failed: {exc}", file=sys.stderr)
        return 1
    print(result.bundle_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
