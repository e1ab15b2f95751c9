"""Kill a refresh that writes a segment, and a compaction, at many points: ``ACTIVE`` never
changes, every segment it lists stays intact, and nothing partial can be activated."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from query import load_bundle, retrieve
from store.activation import ActivationError, activate, read_active
from store.bundles import bundle_path, list_bundles, read_manifest, verify_bundle
from store.segments import live_revisions, open_segments
from tests.conftest import TINY_CORPUS, write_corpus
from validation import validate_bundle

KILL_POINTS = 8
QUERIES = ("Which river reaches the Black Sea?", "How does a kite fly?")


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # so SIGKILL reaches every process it started
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


def _answers(root: str, model) -> list[list[tuple[str, int, int]]]:
    bundle = load_bundle(root, model=model)
    return [[(e.doc_id, e.start, e.end) for e in retrieve(bundle, q, k=3)] for q in QUERIES]


def _intact(root: str, active: str) -> None:
    path = bundle_path(root, active)
    segments = open_segments(path, verify_bundle(path), verify=True)
    live_revisions(segments)  # deletion sets name only what their segments hold


@pytest.mark.slow
@pytest.mark.parametrize("step", ["refresh", "compaction", "moved"])
def test_killing_a_segment_write_or_a_compaction_leaves_active_intact(
    step, tmp_path, query_encoder
):
    root = str(tmp_path / "root")
    corpus = write_corpus(tmp_path / "corpus", TINY_CORPUS)
    run = ["pipelines.build_index", "--input", str(corpus), "--root", root]
    assert _start(run).wait(timeout=300) == 0
    first = list_bundles(root)[0]
    assert validate_bundle(bundle_path(root, first)).passed
    activate(root, first)
    (corpus / "bread.txt").unlink()
    write_corpus(corpus, {"kite.md": "# Kites\n\nA kite flies because wind pushes its sail."})
    if step == "compaction":  # a two-segment generation to compact
        assert _start(run).wait(timeout=300) == 0
        second = sorted(set(list_bundles(root)) - {first})[0]
        assert validate_bundle(bundle_path(root, second)).passed
        activate(root, second)
        argv = ["pipelines.compact", "--root", root]
    elif step == "moved":  # the input re-exported elsewhere: kept documents change source
        elsewhere = write_corpus(tmp_path / "dt=2026-12-07", {})
        for path in corpus.iterdir():
            (elsewhere / path.name).write_bytes(path.read_bytes())
        argv = ["pipelines.build_index", "--input", str(elsewhere), "--root", root]
    else:
        argv = run
    active = read_active(root)
    assert active is not None
    before = set(list_bundles(root))
    baseline = _answers(root, query_encoder)

    started = time.monotonic()
    assert _start(argv).wait(timeout=300) == 0  # a reference run, to time the kill points
    duration = time.monotonic() - started
    completed = set(list_bundles(root)) - before
    assert completed

    rng = random.Random(20261202)
    points = KILL_POINTS if step != "moved" else KILL_POINTS // 2
    for at in sorted(rng.uniform(0.05, 1.0) * duration for _ in range(points)):
        proc = _start(argv)
        time.sleep(at)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert read_active(root) == active
        _intact(root, active)
        assert _answers(root, query_encoder) == baseline
        for bundle_id in set(list_bundles(root)) - before:
            verify_bundle(bundle_path(root, bundle_id))  # published means whole
            with pytest.raises(ActivationError, match="not been validated"):
                activate(root, bundle_id)
        staging = Path(root, "staging")
        for leftover in os.listdir(staging) if staging.is_dir() else []:
            with pytest.raises(ActivationError):
                activate(root, leftover)
    # What a killed run left behind never broke a later one: the newest published bundle
    # of this step validates, activates, and answers.
    newest = sorted(set(list_bundles(root)) - before)[-1]
    assert validate_bundle(bundle_path(root, newest)).passed
    activate(root, newest)
    manifest = read_manifest(bundle_path(root, newest))
    assert len(manifest.segments) == (1 if step == "compaction" else 2)
    _intact(root, newest)
    top = retrieve(load_bundle(root, model=query_encoder), "How does a kite fly?", k=1)
    assert top[0].doc_id == "kite.md"
    if step == "moved":
        moved = manifest.segments[0].sources
        assert set(moved) == set(TINY_CORPUS) - {"bread.txt", "records.jsonl"} | {
            "bike-1",
            "bike-2",
        }
        assert top[0].source_uri == str(tmp_path / "dt=2026-12-07" / "kite.md")
