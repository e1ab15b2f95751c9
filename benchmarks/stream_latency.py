"""Streaming latency: from a file landing in the watched input to it being answerable.

Usage:
    python -m benchmarks.stream_latency [--window 10s] [--files 3] [-- BUILD OPTIONS]

Starts ``python -m pipelines.stream`` (the default local engine) on a temporary
directory with one seed document, waits for the first activation, then drops
``--files`` new documents one at a time; for each it measures the seconds until
the active bundle's ``retrieve`` returns that document first for a query only it
answers. Prints each latency and their median.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from store.activation import read_active
from store.models import force_offline

SEED = "Barn owls hunt at night and locate mice by sound alone."
NEW = [
    ("glass.txt", "Glass is made by melting sand with soda ash and lime.", "How is glass made?"),
    ("rust.txt", "Iron rusts when it reacts with oxygen and water.", "Why does iron rust?"),
    ("tea.txt", "Green tea is steamed soon after picking.", "How is green tea made?"),
    ("bees.txt", "Honey bees dance to show where flowers are.", "Why do bees dance?"),
]  # fmt: skip


def answerable(root: str, query: str, doc_id: str, model: object) -> bool:
    from query import load_bundle, retrieve

    if read_active(root) is None:
        return False
    return retrieve(load_bundle(root, model=model), query, k=1)[0].doc_id == doc_id


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra = args_in[args_in.index("--") + 1 :] if "--" in args_in else []
    own = args_in[: args_in.index("--")] if "--" in args_in else args_in
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", default="10s", help="stream window")
    parser.add_argument("--files", type=int, default=3, choices=range(1, len(NEW) + 1))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per file")
    args = parser.parse_args(own)
    force_offline()
    from store.models import load_sentence_transformer, resolve_model

    model = load_sentence_transformer(resolve_model(None))
    work = Path(tempfile.mkdtemp(prefix="evidex-stream-"))
    watch, root = work / "in", str(work / "root")
    watch.mkdir()
    (watch / "owls.txt").write_text(SEED, encoding="utf-8")
    command = [sys.executable, "-m", "pipelines.stream", "--input", str(watch), "--root", root,
               "--window", args.window, *extra]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with open(work / "stream.log", "w") as log:
        stream = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + args.timeout
            while read_active(root) is None and time.monotonic() < deadline:
                time.sleep(0.5)
            latencies = []
            for name, text, query in NEW[: args.files]:
                landed = time.monotonic()
                (watch / name).write_text(text, encoding="utf-8")
                while not answerable(root, query, name, model):
                    if time.monotonic() - landed > args.timeout:
                        raise TimeoutError(f"{name} not answerable after {args.timeout}s")
                    time.sleep(0.5)
                latencies.append(time.monotonic() - landed)
                print(f"{name}: answerable {latencies[-1]:.1f} s after landing", flush=True)
        finally:
            stream.kill()
            stream.wait()
    print(f"median {statistics.median(latencies):.1f} s over {len(latencies)} files "
          f"(window {args.window}); log: {work / 'stream.log'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
