"""The streaming pipeline of ``evidex stream --engine beam``: each window's arrivals are
processed by the build's own transforms inside the running pipeline, and each window's
rows become one segment, published by a single committer::

    MatchContinuously(input)  or  Pub/Sub object notifications -> MatchAll
      -> FixedWindows(window)                      (and one tick per window)
      -> ParseMatches -> SkipLive (same document, same revision: no work)
      -> ChunkDocuments -> EmbedChunks (an edit's unchanged passages keep their vectors)
      -> ExtractKnowledge (spaCy)
      -> Gather per window -> CommitWindow (pipelines.commit: segment, knowledge update,
                                            validate, compare-and-swap ACTIVE)

A tick per window (``PeriodicImpulse``) makes every window reach the committer, which
lists the input: a file that disappears is a deletion even when nothing arrives.
Models are loaded once per worker (the transforms' ``setup``), not once per window.
The first generation, and the windows the committer cannot extend the active generation
with (see :mod:`pipelines.commit`), are built by a batch refresh of the input.

Exactly once across crashes: a restarted stream lists the input again, and every
document a committed generation holds in the same state is skipped, so nothing is lost,
nothing applied twice, and nothing committed is embedded again.
"""

import fnmatch
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from pipelines.commit import CommitSettings, WindowRows, commit_window, unit_vectors
from pipelines.compact import MergePolicy
from pipelines.refresh import RefreshResult
from store import storage, table_cache
from store.bundles import (
    CHUNKS,
    DOCUMENTS,
    BundleError,
    local_bundle,
    read_manifest,
    resolve_root,
)
from store.segments import EXTRACTED_STATEMENTS, open_segments
from transforms.chunk import ChunkDocuments
from transforms.embed import EmbedChunks
from transforms.extract import ACRONYMS, MENTIONS, STATEMENTS, ExtractKnowledge
from transforms.gather import Gather
from transforms.ingest import DELETES, ParseMatches, pattern_and_root
from transforms.live import SEEN, LiveVectors, SkipLive
from transforms.tags import BAD, GOOD

logger = logging.getLogger(__name__)


def commit_settings(input_pattern: str, root: str, build_args: Sequence[str]) -> CommitSettings:
    """What every window uses, from the stream's build options: the build configuration
    and the embedding model's fingerprint (the model itself is loaded by each worker)."""
    from pipelines.build_index import EvidexBuildOptions, config_from_options
    from store.models import fingerprint, load_sentence_transformer, resolve_model

    options = PipelineOptions(["--input", input_pattern, "--root", root, *build_args])
    opts = options.view_as(EvidexBuildOptions)
    config = config_from_options(opts)
    model_path = resolve_model(config.embed.model)
    loaded = load_sentence_transformer(model_path)
    return CommitSettings(
        config=config,
        model=fingerprint(loaded, config.embed.model, spacy_pipeline=config.spacy_pipeline),
        model_path=model_path,
        keep_failed=bool(opts.keep_failed),
        encoder_artifact=bool(opts.query_encoder_artifact),
    )


def _notified_paths(message: Any) -> Iterator[str]:
    """A Cloud Storage object notification -> the ``gs://`` path of a finalized object
    (deletions need no element: the committer lists the input)."""
    attributes = getattr(message, "attributes", None) or {}
    if attributes.get("eventType", "OBJECT_FINALIZE") != "OBJECT_FINALIZE":
        return
    bucket, name = attributes.get("bucketId"), attributes.get("objectId")
    if not (bucket and name):  # a payload-only notification: read its JSON
        try:
            payload = json.loads(getattr(message, "data", b"") or b"{}")
        except ValueError:
            logger.warning("notification without an object name ignored")
            return
        bucket, name = payload.get("bucket"), payload.get("name")
    if bucket and name:
        yield f"gs://{bucket}/{name}"


def _file_stat(metadata: Any) -> tuple[str, float, float]:
    return (metadata.path, metadata.size_in_bytes, round(metadata.last_updated_in_seconds, 3))


_LOOP_COMPACTORS: dict[str, Any] = {}
"""The local loop's compactor of each bundle root (``run_window``): the committer of
every window's pipeline in this process uses it, so a compaction outlives a window."""


class _CommitWindowFn(beam.DoFn):
    """One window's gathered rows -> the committer, and its progress line."""

    def __init__(
        self,
        *,
        input_pattern: str,
        root: str | None,
        build_args: list[str],
        policy: MergePolicy | None,
        settings: CommitSettings,
        since: float | None = None,
    ) -> None:
        self._input = input_pattern
        self._root = root
        self._build_args = build_args
        self._policy = policy
        self._settings = settings  # resolved when the pipeline was built; the model loads here
        self._since = since

    def setup(self) -> None:
        from pipelines.compactor import BackgroundCompaction
        from store.models import load_sentence_transformer

        root = resolve_root(self._root)
        settings = self._settings
        loaded = load_sentence_transformer(settings.model_path)
        self._settings = replace(settings, loaded=loaded)
        self._embed = unit_vectors(settings.model_path, loaded, settings.config.embed.batch_size)
        loops = _LOOP_COMPACTORS.get(root)
        self._owned = loops is None  # else the local loop's, which outlives this DoFn
        if loops is None:
            table_cache.enable()  # each window reads the tables the window before it wrote
            loops = BackgroundCompaction(root, self._build_args, self._policy)
        self._compactor: Any = loops

    def teardown(self) -> None:
        if self._owned:
            self._compactor.stop()
            table_cache.disable()

    def process(
        self, gathered: dict[str, list[Any]], win: Any = beam.DoFn.WindowParam
    ) -> Iterator[str]:
        root = resolve_root(self._root)
        result = commit_window(
            WindowRows.of(gathered, start=float(win.start)),
            input_pattern=self._input,
            root=root,
            build_args=self._build_args,
            settings=self._settings,
            embed=self._embed,
            compactor=self._compactor,
        )
        retain_active_tables(root)
        if self._since is not None:  # the local loop: the window's whole pipeline
            result = result._replace(seconds=time.time() - self._since)
        line = f"window {win.start.to_utc_datetime():%H:%M:%S}: {result.line()}"
        report(line)
        yield line


def build_windowed_pipeline(
    pipeline: beam.Pipeline,
    *,
    input_pattern: str,
    root: str | None,
    window_seconds: float,
    poll_seconds: float,
    stop_after: float | None,
    build_args: Sequence[str] = (),
    policy: MergePolicy | None = None,
    notifications: str | None = None,
    arrivals: beam.PCollection | None = None,
    ticks: beam.PCollection | None = None,
    since: float | None = None,
) -> beam.PCollection:
    """Wire the windowed stream into ``pipeline``; returns the per-window progress lines.

    ``arrivals`` (timestamped file paths: a ``TestStream``, or one window's changed files
    in the local loop) replaces the watched input, and ``ticks`` (one element per window
    that must reach the committer) the periodic impulse. With ``since`` (when the local
    loop began the window), a progress line counts the seconds from then.
    """
    resolved = resolve_root(root)
    settings = commit_settings(input_pattern, resolved, build_args)
    config = settings.config
    glob, input_root = pattern_and_root(input_pattern)
    allow = fileio.EmptyMatchTreatment.ALLOW  # a file gone before it is read: the listing's
    if arrivals is not None:
        matched = arrivals | "MatchArrivals" >> fileio.MatchAll(empty_match_treatment=allow)
    elif notifications is not None:
        from apache_beam.io.gcp.pubsub import ReadFromPubSub

        matched = (
            pipeline
            | "Notifications" >> ReadFromPubSub(subscription=notifications, with_attributes=True)
            | "NotifiedPaths" >> beam.FlatMap(_notified_paths)
            | "InInput" >> beam.Filter(lambda path: fnmatch.fnmatchcase(path, glob))
            | "MatchNotified" >> fileio.MatchAll(empty_match_treatment=allow)
        )
    else:
        match_kwargs: dict[str, Any] = {
            "interval": poll_seconds,
            "has_deduplication": True,
            "match_updated_files": True,  # a file written again arrives again
        }
        if stop_after:
            match_kwargs["stop_timestamp"] = time.time() + stop_after
        matched = pipeline | "WatchInput" >> fileio.MatchContinuously(glob, **match_kwargs)
    files = matched | "Window" >> beam.WindowInto(window.FixedWindows(window_seconds))
    if arrivals is None:  # every window fires, arrivals or not: files can disappear
        from apache_beam.transforms.periodicsequence import PeriodicImpulse

        # (PeriodicImpulse's default start is the time its module was imported.)
        impulse_kwargs: dict[str, Any] = {
            "start_timestamp": time.time(),
            "fire_interval": window_seconds,
        }
        if stop_after:
            impulse_kwargs["stop_timestamp"] = time.time() + stop_after
        ticks = pipeline | "Ticks" >> PeriodicImpulse(**impulse_kwargs)
    if ticks is not None:
        ticks = (
            ticks
            | "TickWindow" >> beam.WindowInto(window.FixedWindows(window_seconds))
            | "TickMarks" >> beam.Map(lambda _: 1)
        )
    sidecar = None
    if config.ingest.metadata:
        from transforms.sidecar import read_sidecar

        sidecar = read_sidecar(config.ingest.metadata)
    parsed = files | "ParseArrivals" >> ParseMatches(
        root=input_root, config=config.ingest, sidecar=sidecar
    )
    fresh = parsed[GOOD] | "SkipLive" >> SkipLive(resolved)
    documents = fresh["documents"]
    model_path = settings.model_path
    max_tokens = settings.model.max_seq_length - 2  # as the build's chunker
    chunked = documents | "ChunkDocuments" >> ChunkDocuments(
        model=model_path, config=config.chunk, max_tokens=max_tokens
    )
    known = documents | "LiveVectors" >> LiveVectors(resolved)
    embedded = chunked[GOOD] | "EmbedChunks" >> EmbedChunks(
        model=model_path,
        batch_size=config.embed.batch_size,
        batch_chars=config.embed.batch_chars,
        known=known,
    )
    rows: dict[str, beam.PCollection] = {
        "files": files | "FileStats" >> beam.Map(_file_stat),
        "documents": documents,
        "seen": fresh[SEEN],
        "embedded": embedded[GOOD],
        "deletes": parsed[DELETES],
        "known": known | "KnownKeys" >> beam.Map(lambda pair: pair[0]),
        "bad_ingest": parsed[BAD],
        "bad_chunk": chunked[BAD],
        "bad_embed": embedded[BAD],
    }
    if ticks is not None:
        rows["ticks"] = ticks
    if config.knowledge.enabled:
        extracted = (
            embedded[GOOD]
            | "ChunksForKnowledge" >> beam.Map(lambda e: e.chunk)
            | "ExtractKnowledge"
            >> ExtractKnowledge(
                pipeline=config.spacy_pipeline, batch_size=config.knowledge.spacy_batch_size
            )
        )
        rows.update(
            {
                "mentions": extracted[MENTIONS],
                "statements": extracted[STATEMENTS],
                "acronyms": extracted[ACRONYMS],
                "bad_extract": extracted[BAD],
            }
        )
    return (
        rows
        | "GatherWindow" >> Gather()
        | "CommitWindow"
        >> beam.ParDo(
            _CommitWindowFn(
                input_pattern=input_pattern,
                root=root,
                build_args=list(build_args),
                policy=policy,
                settings=settings,
                since=since,
            )
        )
    )


def run_window(
    input_pattern: str,
    root: str | None,
    build_args: Sequence[str],
    *,
    window_start: float,
    window_seconds: float,
    compactor: Any,
) -> RefreshResult | None:
    """One window of the local loop (``--engine loop``): the files changed since the
    active generation's listing run through the stream's own pipeline (in batch, as one
    window) and its committer, which prints the window's line. Returns the result when
    no pipeline ran (nothing changed, or a refresh built the generation), else ``None``.
    """
    from pipelines.refresh import fingerprint, listing, read_state, refresh
    from store.activation import read_active

    started, started_at = time.monotonic(), time.time()
    resolved = resolve_root(root)
    files, active, state = listing(input_pattern), read_active(resolved), read_state(resolved)
    if active is None or compactor.exited:
        return refresh(input_pattern, root, build_args, compactor=compactor)
    ours = state.get("bundle_id") == active
    if ours and state.get("listing") == fingerprint(files):
        return RefreshResult(
            "unchanged", active, len(files), 0, 0, 0, 0, "", time.monotonic() - started
        )
    earlier = (state.get("files") or {}) if ours else {}
    changed = sorted(path for path, stat in files.items() if earlier.get(path) != stat)
    _LOOP_COMPACTORS[resolved] = compactor
    pipeline = beam.Pipeline(options=PipelineOptions(list(build_args)))
    stamp = window.TimestampedValue

    def at_start(pcoll: beam.PCollection, label: str) -> beam.PCollection:
        return pcoll | label >> beam.Map(lambda item: stamp(item, window_start))

    build_windowed_pipeline(
        pipeline,
        input_pattern=input_pattern,
        root=root,
        window_seconds=window_seconds,
        poll_seconds=window_seconds,
        stop_after=None,
        build_args=build_args,
        arrivals=at_start(pipeline | "Changed" >> beam.Create(changed), "AtWindowStart"),
        ticks=at_start(pipeline | "Tick" >> beam.Create([1]), "TickAtWindowStart"),
        since=started_at,
    )
    pipeline.run().wait_until_finish()
    return None


ROWS = (DOCUMENTS, CHUNKS, EXTRACTED_STATEMENTS)
"""The segment tables whose rows every window reads (``store.segments.live_revisions``,
the knowledge update's statements)."""


def retain_active_tables(root: str) -> None:
    """Keep in memory only the tables the next window reads again: the active
    generation's own files and its segments' document and chunk rows."""
    from store.activation import read_active

    active = None if storage.is_remote(root) else read_active(root)
    keep: Callable[[str], bool] = lambda file: False  # noqa: E731  # keeping nothing is safe
    if active is not None:
        try:
            path = local_bundle(root, active)
            segments = open_segments(
                path, read_manifest(path), verify=False, locate=lambda b: local_bundle(root, b)
            )
        except (BundleError, OSError, ValueError) as exc:
            logger.debug("table cache emptied: %s", exc)
        else:
            own = os.path.realpath(path)
            rows = {os.path.realpath(os.path.join(s.path, n)) for s in segments for n in ROWS}
            keep = lambda file: os.path.dirname(file) == own or file in rows  # noqa: E731
    table_cache.retain(keep)


def report(line: str) -> None:
    logger.info(line)
    print(line, flush=True)
