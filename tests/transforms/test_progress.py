"""Progress lines: a total, the share done and the time left where the total is known."""

import logging

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline

from transforms.embed import EmbedTexts
from transforms.progress import Progress, format_duration


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_known_total_gives_share_rate_and_time_left(caplog):
    clock = _Clock()
    progress = Progress(logging.getLogger("p"), "embedded", "texts", every=100, clock=clock)
    with caplog.at_level(logging.INFO, logger="p"):
        progress.add(50, total=1000)
        clock.now += 10.0
        progress.add(50, total=1000)
    assert caplog.messages == ["embedded 100 of 1000 texts (10%, 10.0/s, about 1 min 30 s left)"]


def test_the_last_item_of_a_total_always_gets_a_line(caplog):
    clock = _Clock()
    progress = Progress(logging.getLogger("p"), "parsed", "chunks", every=500, clock=clock)
    with caplog.at_level(logging.INFO, logger="p"):
        progress.add(10, total=30)
        clock.now += 2.0
        progress.add(20, total=30)
    assert caplog.messages == ["parsed 30 of 30 chunks (100%, 15.0/s, about 0 s left)"]


def test_without_a_total_the_line_gives_the_rate(caplog):
    clock = _Clock()
    progress = Progress(logging.getLogger("p"), "chunked", "documents", every=10, clock=clock)
    with caplog.at_level(logging.INFO, logger="p"):
        progress.add(5)
        clock.now += 4.0
        progress.add(7)
    assert caplog.messages == ["chunked 12 documents (3.0/s)"]


def test_durations_read_as_seconds_minutes_or_hours():
    assert [format_duration(s) for s in (0.4, 45, 200, 3900)] == [
        "0 s",
        "45 s",
        "3 min 20 s",
        "1 h 05 min",
    ]


def test_embedding_progress_counts_against_the_distinct_texts(caplog, model_path):
    texts = [f"passage number {i} about topic {i % 7}" for i in range(300)] + ["again"] * 20
    with caplog.at_level(logging.INFO, logger="transforms.embed"), TestPipeline() as p:
        _ = p | beam.Create(texts) | EmbedTexts(model=model_path, batch_size=64)
    lines = [m for m in caplog.messages if m.startswith("embedded")]
    assert lines and all(" of 301 texts (" in line and "left)" in line for line in lines)
    assert lines[-1].startswith("embedded 301 of 301 texts (100%")
