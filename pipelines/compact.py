"""Compaction: a generation's live rows rewritten as one segment, with fresh knowledge.

Nothing is chunked, embedded or parsed again: the live documents, chunk rows (vectors
included) and extraction of every segment are read back, the segment's HNSW files and
BM25 index are built over them, and the knowledge layer (canonicalization, relations,
communities) is computed from scratch over the kept extraction, reusing the vector of
every relation summary and community report whose text is unchanged. The result holds
what a from-scratch build of the same input state holds.

Run it as ``evidex compact`` (which validates and activates the result) or
``python -m pipelines.compact --root R``, with any Beam runner flag.
"""

import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions

from algorithms.normalize import normalize_surface
from pipelines.build_index import (
    BuildFailedError,
    BuildResult,
    _counter,
    local_staging,
    spacy_processes,
)
from pipelines.encoder_artifact import reuse_encoder
from pipelines.knowledge import KNOWLEDGE_COUNTER, assemble_knowledge
from pipelines.segment import write_segments
from schemas import Chunk, register_coders
from schemas.manifest import KnowledgeState, Manifest
from store import bundles, knowledge_layers, knowledge_maps, manifests, storage
from store.activation import read_active
from store.config import BuildConfig
from store.models import force_offline, resolve_model
from store.segments import Segment, live_revisions, open_segments
from store.staging import discard, heartbeat
from transforms.segments import DOCUMENTS, ReadExtraction, ReadLiveRows, WriteExtraction
from transforms.tags import typed
from transforms.write import write_parquet

logger = logging.getLogger(__name__)

DEFAULT_MAX_SEGMENTS = 10
DEFAULT_MAX_DELETED_SHARE = 0.25
DEFAULT_SMALL_SHARE = 0.5
KNOWLEDGE_FILES = (
    bundles.MENTIONS,
    bundles.ENTITIES,
    bundles.RELATIONS,
    bundles.COMMUNITIES,
    bundles.RELATION_INDEX,
    bundles.COMMUNITY_INDEX,
)


def _keep_knowledge(path: str, staging: str) -> None:
    """The parent's knowledge tables and HNSW files in ``staging``: each as it is (a
    hard link on a local root), a table held as a base and a delta written whole
    (:mod:`store.knowledge_layers`): compaction folds what windows layered."""
    for name in KNOWLEDGE_FILES:
        if knowledge_layers.is_layered(path, name):
            write_parquet(knowledge_layers.read_table(path, name), storage.join(staging, name))
        elif storage.exists(storage.join(path, name)):
            storage.reuse_file(storage.join(path, name), storage.join(staging, name))


def _sizes(manifest: Manifest) -> tuple[dict[str, int], set[str]]:
    """Each segment's live chunk rows (by :attr:`SegmentRef.key`), and the *large* ones:
    the largest, with the other segments of its bundle when a batch build wrote it as
    several (``--segments``)."""
    refs = manifest.segments
    live = {r.key: r.chunks - len(r.deleted_chunks) for r in refs}
    largest = max(refs, key=lambda r: (live[r.key], r.key))
    large = {r.key for r in refs if largest.part and r.part and r.bundle_id == largest.bundle_id}
    return live, large | {largest.key}


def _build_parts(manifest: Manifest) -> int:
    """How many segments the batch build holding the generation's largest segment wrote
    (``--segments``; one when it wrote one, or the generation lists none): they count as
    one against the segment limit, and a whole merge writes as many."""
    return len(_sizes(manifest)[1]) if manifest.segments else 1


def _deleted_share(manifest: Manifest) -> float:
    """The share of the generation's chunk rows its deletion sets name (0 when empty)."""
    rows = sum(r.chunks for r in manifest.segments)
    deleted = sum(len(r.deleted_chunks) for r in manifest.segments)
    return deleted / rows if rows else 0.0


@dataclass(frozen=True)
class MergePolicy:
    """When a generation should be compacted: more than ``max_segments`` segments, or
    more than ``max_deleted_share`` of its chunk rows deleted (dead rows still cost
    search time and disk); and what to merge (:meth:`segments_to_merge`)."""

    max_segments: int = DEFAULT_MAX_SEGMENTS
    max_deleted_share: float = DEFAULT_MAX_DELETED_SHARE
    small_share: float = DEFAULT_SMALL_SHARE
    """A tiered merge takes every segment but the largest while they hold fewer live
    chunk rows than this share of the largest's."""

    def segments_to_merge(self, manifest: Manifest) -> list[str] | None:
        """The segments a due compaction merges: every one but the largest when they are
        small beside it and no deletion share calls for more (a *tiered* merge: a few
        seconds, the knowledge layer kept as it is); ``None`` for all of them (a *whole*
        merge: the knowledge layer computed afresh, deletions reclaimed)."""
        if _deleted_share(manifest) > self.max_deleted_share:
            return None
        live, large = _sizes(manifest)
        small = [key for key in live if key not in large]
        largest = max(live.values())
        if len(small) < 2 or sum(live[k] for k in small) >= self.small_share * largest:
            return None
        return small

    def reason(self, manifest: Manifest) -> str | None:
        """Why ``manifest``'s generation should be compacted, or ``None``."""
        refs = manifest.segments
        # The segments of one batch build count as one against the limit.
        limit = self.max_segments + (_build_parts(manifest) - 1)
        if len(refs) > limit:
            return f"{len(refs)} segments (more than {limit})"
        deleted = _deleted_share(manifest)
        if deleted > self.max_deleted_share:
            return (
                f"{deleted:.0%} of the chunk rows deleted (more than {self.max_deleted_share:.0%})"
            )
        return None


def assemble_compaction(
    pipeline: beam.Pipeline,
    *,
    segments: Sequence[Segment],
    parent_path: str,
    config: BuildConfig,
    model: Any,
    staging: str,
    processes: int = 1,
    tiered: bool = False,
    parts: int = 1,
) -> None:
    """Wire the compaction of ``segments`` into ``pipeline``, writing into ``staging``
    one segment, or ``parts`` (``parts/<k>``, split by document as a batch build splits).

    ``tiered``: ``segments`` are some of the generation's, merged without touching its
    knowledge layer (the launcher copies those tables); only their extraction moves into
    the new segment."""
    live = pipeline | "LiveRows" >> ReadLiveRows(
        [(s.path, s.ref.deleted_documents, s.ref.deleted_chunks, s.ref.sources) for s in segments]
    )
    write_segments(
        live[DOCUMENTS], live["chunks"], staging=staging, config=config, model=model, parts=parts
    )
    if config.knowledge.enabled:
        live_ids = live[DOCUMENTS] | "LiveDocIds" >> beam.Map(lambda d: d.doc_id)
        kept = pipeline | "KeptExtraction" >> ReadExtraction(
            [(s.path, s.ref.deleted_chunks) for s in segments], keep=live_ids
        )
        if tiered:
            _ = kept | "WriteSegmentExtraction" >> WriteExtraction(staging)
            return
        nothing_to_parse = typed(pipeline | "NoNewChunks" >> beam.Create([]), Chunk)
        assemble_knowledge(
            nothing_to_parse,
            config=config,
            model_path=resolve_model(config.embed.model),
            dimension=model.dimension,
            staging=staging,
            parent_path=parent_path,
            spacy_processes=processes,
            kept=kept,
            kept_in_segment=True,
            parts=parts,
        )


def _knowledge_state(manifest: Manifest, bundle_id: str, *, tiered: bool) -> KnowledgeState:
    """A whole merge clusters its communities afresh; a tiered one keeps the source's."""
    if tiered and manifest.knowledge_state is not None:
        return manifest.knowledge_state
    return KnowledgeState(communities_from=bundle_id, entities_changed=0)


def run(
    argv: Sequence[str] | None = None,
    *,
    root: str | None = None,
    source: str | None = None,
    bundle_id: str | None = None,
    merge: Sequence[str] | None = None,
) -> BuildResult:
    """Compact the active generation (or ``source``) under ``root`` into a new bundle.

    Args:
        argv: Beam pipeline options (runner flags).
        root: bundle root (default ``$EVIDEX_HOME`` or ``./.evidex``).
        source: the generation to compact instead of the active one.
        bundle_id: override the time-based id (tests).
        merge: the bundle ids of the segments to merge (a tiered merge: the others are
            kept as they are, with their deletions, and so is the knowledge layer);
            ``None`` merges them all (see :meth:`MergePolicy.segments_to_merge`).

    Raises:
        BuildFailedError: nothing to compact, a bad segment, or a pipeline failure.
            The active bundle is never touched.
    """
    force_offline()
    register_coders()
    started = time.monotonic()
    options = PipelineOptions(list(argv or []))
    options.view_as(SetupOptions).save_main_session = False
    storage.configure(options)
    resolved = bundles.resolve_root(root)
    chosen = source or read_active(resolved)
    if chosen is None:
        raise BuildFailedError(f"nothing to compact: no active bundle under {resolved}")
    path = bundles.bundle_path(resolved, chosen)
    try:
        manifest = bundles.read_manifest(path)
        segments = open_segments(
            path, manifest, verify=False, locate=lambda b: bundles.bundle_path(resolved, b)
        )
        live = live_revisions(segments)
    except bundles.BundleError as exc:
        raise BuildFailedError(f"cannot compact {chosen}: {exc}") from exc
    kept_refs, kept_revisions = [], []
    if merge is not None:
        unknown = sorted(set(merge) - {s.ref.key for s in segments})
        if unknown or not merge:
            raise BuildFailedError(f"{chosen} has no segments {unknown or '(none named)'}")
        kept = {i for i, s in enumerate(segments) if s.ref.key not in merge}
        kept_refs = [s.ref for i, s in enumerate(segments) if i in kept]
        kept_revisions = [(d, doc.revision) for d, doc in live.items() if doc.position in kept]
        segments = [s for s in segments if s.ref.key in merge]
    config = BuildConfig.model_validate(manifest.config)
    bundle_id = bundle_id or bundles.new_bundle_id()
    staging = bundles.staging_path(resolved, bundle_id)
    logger.info(
        "compacting %s (%d segments, %d live documents) into %s",
        chosen,
        len(segments),
        len(live),
        bundle_id,
    )
    with heartbeat(resolved, bundle_id):
        try:
            if not storage.is_remote(staging):
                os.makedirs(os.path.join(staging, bundles.FAILURES_DIR), exist_ok=True)
            pipeline = beam.Pipeline(options=options)
            assemble_compaction(
                pipeline,
                segments=segments,
                parent_path=path,
                config=config,
                model=manifest.model,
                staging=staging,
                processes=spacy_processes(options),
                tiered=bool(kept_refs),
                parts=1 if kept_refs else _build_parts(manifest),
            )
            if kept_refs:  # the generation-level knowledge tables, folded
                _keep_knowledge(path, staging)
            query_encoder = reuse_encoder(path, staging, manifest.model)
            try:
                result = pipeline.run()
                result.wait_until_finish()
            except (RuntimeError, OSError) as exc:
                raise BuildFailedError(
                    f"compaction failed: {' '.join(str(exc).split())[:2000]}"
                ) from exc
            rows = sum(r.chunks - len(r.deleted_chunks) for r in (s.ref for s in segments))
            delta = {
                "parent": chosen,
                "compacted_segments": [s.ref.key for s in segments],
                "kept_segments": [r.key for r in kept_refs],
                "new": 0,
                "changed": 0,
                "unchanged": len(live),
                "deleted": 0,
                "texts_embedded": 0,
                "chunks_reused": rows,
                "knowledge_texts_embedded": _counter(result, KNOWLEDGE_COUNTER),
            }
            deleting = (manifest.delta or {}).get("deleting_files")
            if deleting:  # the input's explicit deletes still hold (see build_index)
                delta["deleting_files"] = deleting
            if config.knowledge.enabled and not storage.is_remote(staging):
                knowledge_maps.write_maps(staging, path, normalize_surface)  # local disk only
            with local_staging(staging) as local:
                written = manifests.write_manifest(
                    local,
                    bundle_id=bundle_id,
                    config=config,
                    model=manifest.model,
                    parent_bundle_id=chosen,
                    delta=delta,
                    query_encoder=query_encoder,
                    segments=kept_refs or None,
                    knowledge_state=_knowledge_state(manifest, bundle_id, tiered=bool(kept_refs))
                    if config.knowledge.enabled
                    else None,
                    kept_revisions=kept_revisions,
                )
                if local != staging:
                    manifests.upload_manifests(local, staging)
        except BaseException:
            discard(resolved, bundle_id, keep_failures=False)
            raise
        target = bundles.publish(resolved, staging, bundle_id)
    return BuildResult(bundle_id, target, written, time.monotonic() - started)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pipelines.compact --root R [Beam options]``."""
    import argparse

    from store.memory import choose_memory_pool

    choose_memory_pool()
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.compact",
        description="Compact the active generation into one segment (not validated or "
        "activated; `evidex compact` does both). Beam pipeline options are passed through.",
    )
    parser.add_argument("--root", help="bundle root (default $EVIDEX_HOME or ./.evidex)")
    parser.add_argument("--source", help="generation to compact (default: the active one)")
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", force=True)
    try:
        result = run(rest, root=args.root, source=args.source)
    except BuildFailedError as exc:
        print(f"compaction failed: {exc}", file=sys.stderr)
        return 1
    print(result.bundle_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
