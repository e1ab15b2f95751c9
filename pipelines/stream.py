"""Streaming mode: watch an input, and per window publish a validated generation,
leaving ``ACTIVE`` alone on failure.

Run it as ``evidex stream --input DIR --window 5m`` or ``python -m pipelines.stream``.

Engines: ``--engine beam`` runs the streaming pipeline of
:mod:`pipelines.stream_windows` (Dataflow, Flink): each window's arrivals are parsed,
chunked, embedded and parsed by spaCy inside the running pipeline, and a single
committer turns each window's rows into one segment and the next generation. Beam's
Python DirectRunner runs the continuous match to its stop time before any window fires
(its watermark does not advance while the source polls) and rejects processing-time
triggers, so on one machine the default ``--engine loop`` drives the same pipeline from a timer
instead: once per window, in batch, over the files whose size or modification time
changed since the active generation's listing, with the same committer
(:func:`pipelines.stream_windows.run_window`). ``--engine refresh`` keeps the engine
before it: a delta refresh of the whole input per window (``pipelines/refresh.py``).
Either way a document is never lost or applied twice across a crash, and files that
disappear are deletions.
"""

import argparse
import logging
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipelines.compact import DEFAULT_MAX_DELETED_SHARE, DEFAULT_MAX_SEGMENTS, MergePolicy
from pipelines.compactor import BackgroundCompaction
from pipelines.refresh import RefreshResult, refresh
from pipelines.stream_windows import (
    build_windowed_pipeline,
    report,
    retain_active_tables,
    run_window,
)
from store import table_cache
from store.bundles import resolve_root
from store.memory import choose_memory_pool
from store.models import keep_models_loaded

logger = logging.getLogger(__name__)

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
        choices=("loop", "beam", "refresh"),
        default="loop",
        help="loop (default): a local timer runs the stream's pipeline once per window over "
        "the files that changed (the DirectRunner cannot stream it); beam: the streaming "
        "Beam pipeline (Dataflow, Flink); refresh: a local timer runs a delta refresh of "
        "the whole input per window (the engine before segments were committed per window)",
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


def run_loop(
    input_pattern: str,
    root: str | None,
    *,
    window_seconds: float,
    stop_after: float | None,
    build_args: Sequence[str] = (),
    clock: Any = time,
    policy: MergePolicy | None = None,
    engine: str = "loop",
) -> int:
    """Run one window's work per window until ``stop_after``; returns the number of
    windows run. ``engine`` "loop": the stream's pipeline over the files that changed
    (:func:`pipelines.stream_windows.run_window`); "refresh": a delta refresh of the whole
    input (``pipelines.refresh``).

    Windows are aligned to multiples of ``window_seconds``; a window whose work takes
    longer than a window delays the next one (windows never overlap). Compaction runs
    beside the windows (``pipelines.compactor``).
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
            result = _one_window(
                input_pattern, root, build_args, engine, end - window_seconds, window_seconds,
                compactor,
            )  # fmt: skip
            if result is not None:  # else the window's committer printed its line
                retain_active_tables(resolve_root(root))
                start = time.strftime("%H:%M:%S", time.gmtime(end - window_seconds))
                report(f"window {start}: {result.line()}")
            windows += 1
            clock.sleep(max(0.0, end - clock.time()))
    finally:
        compactor.stop()
        table_cache.disable()
    return windows


def _one_window(
    input_pattern: str,
    root: str | None,
    build_args: Sequence[str],
    engine: str,
    start: float,
    window_seconds: float,
    compactor: BackgroundCompaction,
) -> RefreshResult | None:
    if engine == "refresh":
        return refresh(input_pattern, root, build_args, compactor=compactor)
    try:
        return run_window(
            input_pattern, root, build_args, window_start=start,
            window_seconds=window_seconds, compactor=compactor,
        )  # fmt: skip
    except (RuntimeError, OSError, ValueError) as exc:  # a failed pipeline: try next window
        seconds = time.time() - start
        reason = f"pipeline: {' '.join(str(exc).split())[:500]}"
        return RefreshResult("failed", None, 0, 0, 0, 0, 0, reason, seconds)


def run(argv: Sequence[str]) -> None:
    """Run the stream until ``--stop_after`` (or forever)."""
    args, rest = stream_arguments().parse_known_args(list(argv))
    build_args = [a for a in rest if a != "--streaming"]
    policy = MergePolicy(max_segments=args.max_segments, max_deleted_share=args.max_deleted)
    if args.notifications and args.engine != "beam":
        raise SystemExit("--notifications needs --engine beam (a streaming runner)")
    if args.engine != "beam":
        run_loop(
            args.input, args.root, window_seconds=args.window, stop_after=args.stop_after,
            build_args=build_args, policy=policy, engine=args.engine,
        )  # fmt: skip
        return
    options = PipelineOptions(build_args)
    options.view_as(StandardOptions).streaming = True
    pipeline = beam.Pipeline(options=options)
    build_windowed_pipeline(
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
