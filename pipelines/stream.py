"""Streaming mode: watch an input, and per processing-time window publish a validated
delta bundle (build -> validate -> activate), leaving ``ACTIVE`` alone on failure.

Run it as ``evidex stream --input DIR --window 5m`` or ``python -m pipelines.stream``
with ``--streaming`` on any runner. The pipeline is::

    MatchContinuously(input, poll interval)      # Beam's continuous file matching
      -> FixedWindows(window)                    # arrivals grouped per window
      -> GroupByKey (one key)                    # one element per non-empty window
      -> refresh(input)                          # delta build of the input's state now

Each window rebuilds from the input's *current* state, so a document is never
lost or applied twice across a crash: the active bundle always equals some past
state of the input, and the next window catches up (see ``evidex/refresh.py``).
Files that disappear are deletions.

Engines: ``--engine beam`` runs the pipeline above (for Dataflow or Flink in
streaming mode). Beam's Python DirectRunner runs the continuous match to its
stop time before any window fires (its watermark does not advance while the
source polls), and rejects processing-time triggers, so on one machine the
default ``--engine loop`` drives the very same refresh step from a timer: one
refresh per window, sleeping until the window ends.
"""

import argparse
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.transforms import window

from evidex.compactor import BackgroundCompaction
from evidex.refresh import refresh
from pipelines.compact import DEFAULT_MAX_DELETED_SHARE, DEFAULT_MAX_SEGMENTS, MergePolicy
from store import storage, table_cache
from store.bundles import (
    CHUNKS,
    DOCUMENTS,
    BundleError,
    local_bundle,
    read_manifest,
    resolve_root,
)
from store.memory import choose_memory_pool
from store.models import keep_models_loaded
from store.segments import EXTRACTED_STATEMENTS, open_segments

logger = logging.getLogger(__name__)

ROWS = (DOCUMENTS, CHUNKS, EXTRACTED_STATEMENTS)
"""The segment tables whose rows every window reads (``store.segments.live_revisions``,
the knowledge update's statements)."""
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def seconds(text: str) -> float:
    """``"5m"`` -> 300.0; ``"30s"``, ``"1.5h"``, ``"250ms"`` and plain seconds work too."""
    match = _DURATION.match(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a positive duration: {text!r} (e.g. 30s, 5m)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def stream_arguments() -> argparse.ArgumentParser:
    """The stream's own options; everything else goes to Beam and to each window's build.

    (Plain argparse rather than a PipelineOptions subclass: ``--input`` and ``--root``
    would clash with the build's options, which each window parses in this process.)
    """
    parser = argparse.ArgumentParser(prog="python -m pipelines.stream", add_help=True)
    parser.add_argument("--input", required=True, help="directory, file or glob to watch")
    parser.add_argument("--root", default=None, help="bundle root (default $EVIDEX_HOME)")
    parser.add_argument("--window", type=seconds, default=300.0, help="window, e.g. 5m")
    parser.add_argument(
        "--poll", type=seconds, default=None, help="listing interval (default window/5)"
    )
    parser.add_argument(
        "--engine",
        choices=("loop", "beam"),
        default="loop",
        help="loop: a local timer drives one refresh per window (default; the DirectRunner "
        "cannot stream this pipeline); beam: the streaming Beam pipeline (Dataflow, Flink)",
    )
    parser.add_argument(
        "--notifications",
        default=None,
        metavar="SUBSCRIPTION",
        help="beam engine: a Pub/Sub subscription (projects/P/subscriptions/S) that receives "
        "the input bucket's object notifications; each message marks its window as having "
        "input, instead of polling the input (deploy/dataflow/streaming.md)",
    )
    parser.add_argument(
        "--stop_after",
        type=seconds,
        default=None,
        help="stop watching after this long (tests, one-off catch-up runs)",
    )
    parser.add_argument(
        "--max_segments",
        type=int,
        default=DEFAULT_MAX_SEGMENTS,
        help="merge policy: compact (beside the windows) past this many segments",
    )
    parser.add_argument(
        "--max_deleted",
        type=float,
        default=DEFAULT_MAX_DELETED_SHARE,
        help="merge policy: compact past this share of deleted chunk rows",
    )
    return parser


class _RefreshFn(beam.DoFn):
    """One non-empty window -> one refresh of the bundle root, with a progress line."""

    def __init__(
        self,
        *,
        input_pattern: str,
        root: str | None,
        build_args: list[str],
        policy: MergePolicy | None = None,
    ) -> None:
        self._input = input_pattern
        self._root = root
        self._build_args = build_args
        self._policy = policy

    def setup(self) -> None:
        keep_models_loaded()  # the worker's windows share one load of each model
        table_cache.enable()  # each window reads the tables the window before it wrote
        self._compactor = BackgroundCompaction(
            resolve_root(self._root), self._build_args, self._policy
        )

    def teardown(self) -> None:
        self._compactor.stop()
        table_cache.disable()

    def process(self, element: Any, win: Any = beam.DoFn.WindowParam) -> Iterator[str]:
        # The window's listings only say "the input was seen"; the refresh re-lists the
        # input itself, so deletions and edits late in the window are included.
        del element
        result = refresh(self._input, self._root, self._build_args, compactor=self._compactor)
        retain_active_tables(resolve_root(self._root))
        line = f"window {win.start.to_utc_datetime():%H:%M:%S}: {result.line()}"
        report(line)
        yield line


def build_pipeline(
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
) -> beam.PCollection:
    """Wire the streaming refresh pipeline; returns the per-window progress lines.

    The input is watched by polling its listing (``MatchContinuously``) or, with
    ``notifications``, by reading a Pub/Sub subscription of the bucket's object
    notifications: either way an element only says "something arrived in this window";
    the refresh lists the input itself."""
    from transforms.ingest import pattern_and_root

    if notifications is not None:
        from apache_beam.io.gcp.pubsub import ReadFromPubSub

        arrivals = pipeline | "Notifications" >> ReadFromPubSub(subscription=notifications)
    else:
        glob, _ = pattern_and_root(input_pattern)
        stop = time.time() + stop_after if stop_after else None
        match_kwargs: dict[str, Any] = {"interval": poll_seconds, "has_deduplication": False}
        if stop is not None:
            match_kwargs["stop_timestamp"] = stop
        arrivals = pipeline | "WatchInput" >> fileio.MatchContinuously(glob, **match_kwargs)
    return (
        arrivals
        | "Window" >> beam.WindowInto(window.FixedWindows(window_seconds))
        | "OneKey" >> beam.Map(lambda _: (None, 1))
        | "PerWindow" >> beam.GroupByKey()
        | "Refresh"
        >> beam.ParDo(
            _RefreshFn(
                input_pattern=input_pattern,
                root=root,
                build_args=list(build_args),
                policy=policy,
            )
        )
    )


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


def run_loop(
    input_pattern: str,
    root: str | None,
    *,
    window_seconds: float,
    stop_after: float | None,
    build_args: Sequence[str] = (),
    clock: Any = time,
    policy: MergePolicy | None = None,
) -> int:
    """Refresh once per window until ``stop_after``; returns the number of windows run.

    Windows are aligned to multiples of ``window_seconds``; a refresh that takes
    longer than a window delays the next one (windows never overlap). Compaction runs
    beside the windows (``evidex.compactor``).
    """
    keep_models_loaded()  # every window's pipeline reuses the models the first loaded
    table_cache.enable()  # each window reads the tables the window before it wrote
    compactor = BackgroundCompaction(resolve_root(root), build_args, policy)
    deadline = clock.time() + stop_after if stop_after else None
    windows = 0
    try:
        while deadline is None or clock.time() < deadline:
            now = clock.time()
            end = (now // window_seconds + 1) * window_seconds
            result = refresh(input_pattern, root, build_args, compactor=compactor)
            retain_active_tables(resolve_root(root))
            start = time.strftime("%H:%M:%S", time.gmtime(end - window_seconds))
            report(f"window {start}: {result.line()}")
            windows += 1
            clock.sleep(max(0.0, end - clock.time()))
    finally:
        compactor.stop()
        table_cache.disable()
    return windows


def run(argv: Sequence[str]) -> None:
    """Run the stream until ``--stop_after`` (or forever)."""
    args, rest = stream_arguments().parse_known_args(list(argv))
    build_args = [a for a in rest if a != "--streaming"]
    policy = MergePolicy(max_segments=args.max_segments, max_deleted_share=args.max_deleted)
    if args.notifications and args.engine != "beam":
        raise SystemExit("--notifications needs --engine beam (a streaming runner)")
    if args.engine == "loop":
        run_loop(
            args.input, args.root, window_seconds=args.window, stop_after=args.stop_after,
            build_args=build_args, policy=policy,
        )  # fmt: skip
        return
    options = PipelineOptions(build_args)
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(options=options)
    build_pipeline(
        pipeline,
        input_pattern=args.input,
        root=args.root,
        window_seconds=args.window,
        poll_seconds=args.poll or max(args.window / 5, 0.5),
        stop_after=args.stop_after,
        build_args=build_args,
        policy=policy,
        notifications=args.notifications,
    )
    pipeline.run().wait_until_finish()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pipelines.stream``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    choose_memory_pool()
    run(sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
