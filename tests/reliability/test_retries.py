"""Retries (issue 9, item 2): a transform that fails every element once gives the same tables.

What is simulated: a worker that crashes mid-bundle. ``_FailFirstAttemptFn``
wraps the real chunking DoFn (``transforms.chunk._ChunkDocumentFn``, real
tokenizer); on an element's *first* attempt it emits all of that element's
chunks and then raises, so the failed attempt has already produced output that
the runner must throw away. Attempts are remembered in marker files, which
survive the DoFn being deserialized again for the retry.

What retries: Beam's ``BundleBasedDirectRunner`` re-executes a failed bundle
(``TransformExecutor._MAX_RETRY_PER_BUNDLE``, 4 by default) and commits only the
output of the attempt that succeeded — the same contract as Dataflow's work-item
retries. Because every element of a bundle fails once, a bundle of n elements
needs n retries, so the test raises that cap to 64 (a setting, not a behaviour
change). The default DirectRunner (FnApiRunner) does not retry; the test pins
that too, so a change in Beam's behaviour shows up here.
"""

import os
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.runners.direct.executor import TransformExecutor

from schemas import CHUNK_SCHEMA, register_coders
from store.config import ChunkConfig, IngestConfig
from tests.conftest import TINY_CORPUS
from transforms.chunk import _ChunkDocumentFn
from transforms.ingest import make_document
from transforms.tags import BAD, GOOD
from transforms.write import WriteTable, records_table


class _FailFirstAttemptFn(beam.DoFn):
    """Delegates to ``inner``; an element's first attempt yields its output, then raises."""

    def __init__(self, inner: beam.DoFn, markers: str) -> None:
        self._inner = inner
        self._markers = markers

    def setup(self) -> None:
        self._inner.setup()

    def process(self, doc):
        yield from self._inner.process(doc)
        marker = os.path.join(self._markers, doc.doc_id.replace("/", "_"))
        if not os.path.exists(marker):
            Path(marker).touch()
            raise ConnectionError(f"simulated worker loss after emitting {doc.doc_id}")


def _documents():
    config = IngestConfig()
    texts = {name: text for name, text in TINY_CORPUS.items() if not name.endswith(".jsonl")}
    texts.update({f"extra{i}.txt": f"Extra document {i}. " * (20 + i) for i in range(6)})
    return [
        make_document(doc_id=n, title="", raw_text=t, source_uri=n, config=config)
        for n, t in sorted(texts.items())
    ]


def _chunk_and_write(model_path: str, out: Path, *, runner, markers: str | None) -> None:
    register_coders()
    fn = _ChunkDocumentFn(model=model_path, config=ChunkConfig(), max_tokens=254)
    step = _FailFirstAttemptFn(fn, markers) if markers else fn
    with beam.Pipeline(runner=runner, options=PipelineOptions([])) as p:
        chunks = (
            p
            | "Docs" >> beam.Create(_documents())
            | "Chunk" >> beam.ParDo(step).with_outputs(BAD, main=GOOD)
        )
        _ = chunks[GOOD] | "Write" >> WriteTable(
            str(out),
            to_table=lambda rows: records_table(rows, CHUNK_SCHEMA),
            sort_key=lambda c: c.chunk_id,
        )


@pytest.mark.slow
def test_retried_bundles_give_identical_tables_without_duplicates(
    model_path, tmp_path, monkeypatch
):
    monkeypatch.setattr(TransformExecutor, "_MAX_RETRY_PER_BUNDLE", 64)
    clean, flaky = tmp_path / "clean.parquet", tmp_path / "flaky.parquet"
    markers = tmp_path / "markers"
    markers.mkdir()
    _chunk_and_write(model_path, clean, runner=BundleBasedDirectRunner(), markers=None)
    _chunk_and_write(model_path, flaky, runner=BundleBasedDirectRunner(), markers=str(markers))

    docs = _documents()
    assert sorted(os.listdir(markers)) == sorted(d.doc_id for d in docs)  # each failed once
    a, b = pq.read_table(clean), pq.read_table(flaky)
    assert a.equals(b)
    ids = b.column("chunk_id").to_pylist()
    assert len(ids) == len(set(ids)) and len(ids) >= len(docs)
    assert set(b.column("doc_id").to_pylist()) == {d.doc_id for d in docs}  # no lost document
    assert clean.read_bytes() == flaky.read_bytes()


def test_the_default_direct_runner_does_not_retry(model_path, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    with pytest.raises(Exception, match="simulated worker loss"):
        _chunk_and_write(model_path, tmp_path / "x.parquet", runner=None, markers=str(markers))
    assert not (tmp_path / "x.parquet").exists()
