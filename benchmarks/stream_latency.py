"""Streaming latency: from a file landing in the watched input to it being answerable.

Usage:
    python -m benchmarks.stream_latency [--window 10s] [--arrivals 20]
        [--corpus ../shared/data/scifact/corpus.jsonl --docs 1000]
        [--arrivals-from ../shared/data/hotpotqa_train100/corpus.jsonl] [-- BUILD OPTIONS]

Starts ``python -m pipelines.stream`` (the default local engine) on a temporary
directory that holds the first ``--docs`` records of ``--corpus`` as one JSONL file
(or one small seed document without ``--corpus``), waits for the first activation,
then drops ``--arrivals`` new documents one at a time, each a record of
``--arrivals-from`` written as its own ``.txt`` file. Each lands at a random (seeded)
point of the stream's window cycle (the loop engine starts windows at multiples of the
window length), the first such point after the previous one became answerable: landing
right after it would put every arrival at the same phase of the cycle (just after a
window's refresh), which measures that phase, not the stream; and a random delay after
it would give two runs different phases, so that their medians differ by the luck of
the draw. With one seed, runs on two corpus sizes land every arrival at the same phase,
and their ratio measures the stream. For each it measures the
seconds until the active generation's ``retrieve`` returns that document in the top
five for its title. Prints each latency, their p50 and p95, the live segments after
each arrival, and the stream process's resident memory (current and peak) as it goes.
With ``--steady 600`` it drops one document per second for ten minutes instead, then
waits until every one is live, and reports the live segments and the stream's resident
memory at the end of each minute.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.stream import seconds
from store.activation import read_active
from store.memory import choose_memory_pool
from store.models import force_offline

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SEED = "Barn owls hunt at night and locate mice by sound alone."


class Reader:
    """What ``evidex serve`` does: a :class:`query.bundle.BundleReader` that reopens the
    bundle when ``ACTIVE`` moves, not per query (reusing the query encoder and spaCy of
    the generation before, as the server does), opened once something is active."""

    def __init__(self, root: str, model: object) -> None:
        self._root, self._model = root, model
        self._reader: Any = None

    def answerable(self, query: str, doc_id: str) -> bool:
        from query import retrieve
        from query.bundle import BundleReader

        if read_active(self._root) is None:
            return False
        if self._reader is None:
            self._reader = BundleReader(self._root, model=self._model)
        else:
            self._reader.reload()
        return doc_id in {e.doc_id for e in retrieve(self._reader.current, query, k=5)}


def until_phase(now: float, phase: float, cycle: float) -> float:
    """Seconds from ``now`` (epoch seconds) to the next moment ``phase`` seconds into a
    window cycle of ``cycle`` seconds (cycles start at multiples of ``cycle``).

    Example:
        >>> until_phase(1003.0, 5.0, 10.0), until_phase(1006.0, 5.0, 10.0)
        (2.0, 9.0)
    """
    return (phase - now) % cycle


def caught_up(root: str, watch: Path) -> bool:
    """The stream's last activated listing is the input's current one."""
    from pipelines.refresh import read_state

    state = read_state(root)
    files = {str(p) for p in watch.iterdir()}
    return state.get("bundle_id") == read_active(root) and set(state.get("files", {})) == files


def live_segments(root: str) -> int:
    from store.bundles import bundle_path, read_manifest

    active = read_active(root)
    return len(read_manifest(bundle_path(root, active)).segments) if active else 0


def memory_mib(pid: int) -> tuple[float, float]:
    """Resident and peak resident memory of ``pid`` (MiB), from /proc (0 where absent)."""
    found = {"VmRSS": 0.0, "VmHWM": 0.0}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in found:
                    found[key] = float(value.split()[0]) / 1024
    except OSError:
        pass
    return found["VmRSS"], found["VmHWM"]


def arrivals(path: str, count: int) -> list[tuple[str, str, str]]:
    """``count`` records of a BEIR corpus as (file name, text, query = the title)."""
    chosen = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record: dict[str, Any] = json.loads(line)
            title = str(record.get("title") or "").strip()
            if len(title) < 8 or not record.get("text"):
                continue
            name = f"arrival-{len(chosen):03d}.txt"
            chosen.append((name, f"{title}\n\n{record['text']}", title))
            if len(chosen) == count:
                break
    if len(chosen) < count:
        raise SystemExit(f"{path} has only {len(chosen)} usable records")
    return chosen


def live_ids(root: str) -> set[str]:
    from store.bundles import bundle_path, read_manifest
    from store.segments import live_revisions, open_segments

    active = read_active(root)
    if active is None:
        return set()
    path = bundle_path(root, active)
    return set(live_revisions(open_segments(path, read_manifest(path), verify=False)))


def steady(
    seconds: float,
    incoming: list[tuple[str, str, str]],
    watch: Path,
    root: str,
    pid: int,
    timeout: float,
) -> dict[str, Any]:
    """One arrival per second for ``seconds``, then wait until all are live."""
    started, segments, by_minute = time.monotonic(), 0, []
    for number, (name, text, _) in enumerate(incoming):
        time.sleep(max(0.0, started + number - time.monotonic()))
        (watch / name).write_text(text, encoding="utf-8")
        if number % 10 == 0:
            segments = max(segments, live_segments(root))
        if number + 1 == 60 * (len(by_minute) + 1):  # one arrival a second: a minute's end
            by_minute.append(round(memory_mib(pid)[0]))
    last = time.monotonic()
    names = {name for name, _, _ in incoming}
    while not names <= live_ids(root) and time.monotonic() - last < timeout:
        segments = max(segments, live_segments(root))
        time.sleep(1)
    missing = names - live_ids(root)
    rss, peak = memory_mib(pid)
    return {
        "arrivals": len(incoming),
        "seconds": seconds,
        "missing_after_wait": len(missing),
        "all_live_s_after_last": round(time.monotonic() - last, 1),
        "max_live_segments": segments,
        "rss_mib_minute_2": by_minute[1] if len(by_minute) > 1 else None,
        "rss_mib_by_minute": by_minute,
        "rss_mib_end": round(rss),
        "peak_rss_mib": round(peak),
        "load_average": os.getloadavg(),
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra = args_in[args_in.index("--") + 1 :] if "--" in args_in else []
    own = args_in[: args_in.index("--")] if "--" in args_in else args_in
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", default="10s", help="stream window")
    parser.add_argument("--arrivals", type=int, default=20, help="documents dropped in turn")
    parser.add_argument("--corpus", default=None, help="BEIR corpus.jsonl to start from")
    parser.add_argument(
        "--docs", type=int, default=1000, help="records of --corpus to index (at most)"
    )
    parser.add_argument(
        "--arrivals-from",
        default=str(SHARED / "hotpotqa_train100" / "corpus.jsonl"),
        help="BEIR corpus whose records arrive (titles are the queries)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per wait")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random landing times in the cycle"
    )
    parser.add_argument(
        "--steady",
        type=float,
        default=None,
        help="instead of one arrival at a time, drop one document per second for this many "
        "seconds, then wait until every one is live; reports the live segments and the "
        "stream's memory at the end of each minute",
    )
    parser.add_argument(
        "--work",
        default=None,
        help="working directory (default: a temp dir); reusing one keeps its bundle root, "
        "so the stream starts from the generation it left",
    )
    args = parser.parse_args(own)
    choose_memory_pool()  # as `evidex serve` does: the reader opens each generation
    cycle = seconds(args.window)
    force_offline()
    from store.models import load_sentence_transformer, resolve_model

    model = load_sentence_transformer(resolve_model(None))
    work = Path(args.work or tempfile.mkdtemp(prefix="evidex-stream-"))
    watch, root = work / "in", str(work / "root")
    watch.mkdir(parents=True, exist_ok=True)
    for stale in watch.glob("arrival-*.txt"):  # a --work reused from an earlier run
        stale.unlink()
    indexed = 1
    if args.corpus:
        lines = []
        with open(args.corpus, encoding="utf-8") as src:
            for line in src:
                lines.append(line)
                if len(lines) == args.docs:
                    break
        indexed, target = len(lines), watch / "corpus.jsonl"
        if not target.exists() or target.read_text(encoding="utf-8") != "".join(lines):
            target.write_text("".join(lines), encoding="utf-8")
        extra = ["--title_in_text", *extra]
    else:
        (watch / "owls.txt").write_text(SEED, encoding="utf-8")
    incoming = arrivals(args.arrivals_from, int(args.steady) if args.steady else args.arrivals)
    command = [sys.executable, "-m", "pipelines.stream", "--input", str(watch), "--root", root,
               "--window", args.window, *extra]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    started = time.monotonic()
    # A benchmark stopped by SIGTERM (kill, pkill) stops its stream too (the finally
    # below), instead of leaving it committing windows into the root.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with open(work / "stream.log", "w") as log:
        stream = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + args.timeout
            while not caught_up(root, watch) and time.monotonic() < deadline:
                time.sleep(0.5)
            rss, peak = memory_mib(stream.pid)
            print(f"caught up with the input after {time.monotonic() - started:.0f} s "
                  f"(rss {rss:.0f} MiB, peak {peak:.0f} MiB)", flush=True)  # fmt: skip
            if args.steady:
                summary = steady(args.steady, incoming, watch, root, stream.pid, args.timeout)
                print(json.dumps({"docs": indexed, "window": args.window, **summary}), flush=True)
                return 0
            latencies = []
            reader = Reader(root, model)
            phase = random.Random(args.seed)
            for name, text, query in incoming:
                time.sleep(until_phase(time.time(), phase.uniform(0.0, cycle), cycle))
                landed = time.monotonic()
                (watch / name).write_text(text, encoding="utf-8")
                while not reader.answerable(query, name):
                    if time.monotonic() - landed > args.timeout:
                        raise TimeoutError(f"{name} not answerable after {args.timeout}s")
                    time.sleep(0.25)
                latencies.append(time.monotonic() - landed)
                rss, peak = memory_mib(stream.pid)
                print(f"{name}: answerable {latencies[-1]:.1f} s after landing; "
                      f"{live_segments(root)} segments; rss {rss:.0f} MiB, peak {peak:.0f} MiB",
                      flush=True)  # fmt: skip
        finally:
            stream.kill()
            stream.wait()
    summary = {
        "docs": indexed,
        "window": args.window,
        "landing": f"random phase, seed {args.seed}",
        "arrivals": len(latencies),
        "p50_s": round(statistics.median(latencies), 1),
        "p95_s": round(percentile(latencies, 0.95), 1),
        "max_s": round(max(latencies), 1),
        "peak_rss_mib": round(peak),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(summary), flush=True)
    print(f"log: {work / 'stream.log'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
