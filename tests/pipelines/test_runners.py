"""The same build on other runners gives identical tables; where a runner cannot run the
build, the tests pin down exactly what it does instead (see docs/runners.md).

Every comparison is against the session's in-process DirectRunner bundle ``b1`` built
from the same tiny corpus: the outputs themselves are compared, never exit codes alone.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineResult

from pipelines.build_index import STAGES, run
from store.activation import read_active
from store.bundles import (
    CHUNK_INDEX,
    CHUNKS,
    DOCUMENTS,
    FAILURES_DIR,
    LEXICAL_DIR,
    bundle_path,
    bundles_dir,
    read_index_header,
    read_manifest,
    sha256_file,
    staging_path,
)

# Files that must be byte-identical to the in-process build (rows are sorted by id and
# embedding batches are fixed by content, so the runner must not change a single byte).
IDENTICAL_FILES = (
    DOCUMENTS,
    CHUNKS,
    CHUNK_INDEX,
    f"{LEXICAL_DIR}/vocab.index.json",
    f"{LEXICAL_DIR}/data.csc.index.npy",
    f"{LEXICAL_DIR}/indices.csc.index.npy",
    f"{LEXICAL_DIR}/indptr.csc.index.npy",
)
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def assert_same_bundle(path: str, reference: str) -> None:
    """Tables, indexes and counters of the bundle at ``path`` equal the reference's."""
    for name, key in ((DOCUMENTS, "doc_id"), (CHUNKS, "chunk_id")):
        got = pq.read_table(os.path.join(path, name)).to_pylist()
        want = pq.read_table(os.path.join(reference, name)).to_pylist()
        assert [row[key] for row in got] == [row[key] for row in want], f"{name} ids"
        assert got == want, f"{name} rows"
    chunk_count = pq.ParquetFile(os.path.join(reference, CHUNKS)).metadata.num_rows
    assert chunk_count > 0
    assert read_index_header(os.path.join(path, CHUNK_INDEX)).count == chunk_count
    with open(os.path.join(path, LEXICAL_DIR, "params.index.json"), encoding="utf-8") as handle:
        assert json.load(handle)["num_docs"] == chunk_count
    for stage in STAGES:
        failures = os.path.join(FAILURES_DIR, f"{stage}.parquet")
        assert (
            pq.read_table(os.path.join(path, failures)).to_pylist()
            == pq.read_table(os.path.join(reference, failures)).to_pylist()
        ), failures
    for name in IDENTICAL_FILES:
        assert sha256_file(os.path.join(path, name)) == sha256_file(
            os.path.join(reference, name)
        ), name
    got_manifest, want_manifest = read_manifest(path), read_manifest(reference)
    # Every other table and index of the bundle (knowledge layer included): same files,
    # same bytes.
    assert sorted(got_manifest.files) == sorted(want_manifest.files)
    for name, entry in want_manifest.files.items():
        assert got_manifest.files[name] == entry, name
    assert got_manifest.row_counts == want_manifest.row_counts
    assert got_manifest.input_fingerprint == want_manifest.input_fingerprint
    # Metrics crossed the runner boundary: the embed counter reached the manifest.
    assert got_manifest.delta is not None and want_manifest.delta is not None
    assert got_manifest.delta["texts_embedded"] == want_manifest.delta["texts_embedded"]


@pytest.mark.slow
def test_multiprocess_direct_runner_matches_in_process(built_root, tiny_corpus, tmp_path):
    result = run(
        [
            "--input",
            str(tiny_corpus),
            "--root",
            str(tmp_path),
            "--direct_running_mode",
            "multi_processing",
            "--direct_num_workers",
            "2",
        ],
        bundle_id="mp",
    )
    assert_same_bundle(result.path, bundle_path(str(built_root), "b1"))


# --- PortableRunner against Beam's local job service --------------------------------------


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def job_service(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Beam's local job service in a subprocess on a free loopback port.

    Yields ``(endpoint, log_path)``; the service is stopped afterwards.
    """
    port = _free_loopback_port()
    port_file = tmp_path / "job_service.port"
    log_path = tmp_path / "job_service.log"
    command = [
        sys.executable,
        "-m",
        "apache_beam.runners.portability.local_job_service_main",
        "--port",
        str(port),
        "--port_file",
        str(port_file),
    ]
    with open(log_path, "wb") as log:
        service = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while not port_file.exists():  # written once the gRPC server listens
                if service.poll() is not None:
                    raise RuntimeError(
                        f"job service exited with {service.returncode}: "
                        f"{log_path.read_text(errors='replace')[-2000:]}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError("job service did not start within 60 s")
                time.sleep(0.1)
            assert int(port_file.read_text()) == port
            yield f"localhost:{port}", log_path
        finally:
            service.terminate()
            try:
                service.wait(timeout=30)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait(timeout=30)


@pytest.mark.slow
def test_portable_runner_on_local_job_service_matches_in_process(
    built_root, tiny_corpus, tmp_path, job_service
):
    endpoint, log_path = job_service
    result = run(
        [
            "--input",
            str(tiny_corpus),
            "--root",
            str(tmp_path / "root"),
            "--runner",
            "PortableRunner",
            "--job_endpoint",
            endpoint,
            "--environment_type",
            "LOOPBACK",
        ],
        bundle_id="portable",
    )
    assert_same_bundle(result.path, bundle_path(str(built_root), "b1"))
    # The job really went through the service (not a local fallback).
    assert "with state DONE" in log_path.read_text(errors="replace")


# --- DaskRunner on a dask.distributed LocalCluster ----------------------------------------
#
# Beam 2.77's DaskRunner cannot run the build. The reproducers below pin down each reason
# with a minimal pipeline (each one applies to the build, see docs/runners.md); the last
# test pins down what the build itself does on Dask: it fails and publishes nothing.


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[object]:
    from dask.distributed import LocalCluster

    with LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as cluster:
        yield cluster


@pytest.fixture
def dask_options(dask_cluster) -> Iterator[list[str]]:
    """Beam flags for the DaskRunner; closes the client the runner opens."""
    from distributed import default_client

    yield ["--runner", DASK_RUNNER, "--dask_client_address", dask_cluster.scheduler_address]
    with contextlib.suppress(ValueError):  # ValueError: the runner never connected
        default_client().close()


def _parity(number: int) -> Iterator[object]:
    yield number if number % 2 == 0 else beam.pvalue.TaggedOutput("odd", number)


class _WriteSortedJson(beam.DoFn):
    """Writes the one list it receives, sorted, as JSON to ``path``."""

    def __init__(self, path: str) -> None:
        self._path = path

    def process(self, rows: list[int]) -> Iterator[str]:
        with open(self._path, "w", encoding="utf-8") as handle:
            json.dump(sorted(rows), handle)
        yield self._path


def _read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def _tagged_output_pipeline(options: list[str], out: Path) -> PipelineResult:
    pipeline = beam.Pipeline(options=PipelineOptions(options))
    split = (
        pipeline
        | beam.Create([1, 2, 3, 4])
        | beam.FlatMap(_parity).with_outputs("odd", main="even")
    )
    _ = split.odd | beam.combiners.ToList() | beam.ParDo(_WriteSortedJson(str(out)))
    result = pipeline.run()
    result.wait_until_finish()
    return result


def _two_sink_pipeline(options: list[str], first: Path, second: Path) -> None:
    pipeline = beam.Pipeline(options=PipelineOptions(options))
    numbers = pipeline | beam.Create([1, 2, 3])
    _ = (
        numbers
        | "CollectFirst" >> beam.combiners.ToList()
        | "WriteFirst" >> beam.ParDo(_WriteSortedJson(str(first)))
    )
    _ = (
        numbers
        | "CollectSecond" >> beam.combiners.ToList()
        | "WriteSecond" >> beam.ParDo(_WriteSortedJson(str(second)))
    )
    pipeline.run().wait_until_finish()


def test_dask_runner_is_not_registered_under_its_short_name():
    with pytest.raises(ValueError, match="Unexpected pipeline runner: DaskRunner"):
        beam.Pipeline(options=PipelineOptions(["--runner", "DaskRunner"]))


@pytest.mark.slow
def test_dask_runner_feeds_every_output_of_a_multi_output_pardo_to_each_consumer(
    dask_options, tmp_path
):
    _tagged_output_pipeline([], tmp_path / "direct.json")
    assert _read_json(tmp_path / "direct.json") == [1, 3]
    result = _tagged_output_pipeline(dask_options, tmp_path / "dask.json")
    # The consumer of the "odd" output also received the main output's elements.
    assert _read_json(tmp_path / "dask.json") == [1, 2, 3, 4]
    with pytest.raises(NotImplementedError):
        result.metrics()


@pytest.mark.slow
def test_dask_runner_executes_only_the_last_applied_sink(dask_options, tmp_path):
    _two_sink_pipeline([], tmp_path / "direct_first.json", tmp_path / "direct_second.json")
    assert _read_json(tmp_path / "direct_first.json") == [1, 2, 3]
    assert _read_json(tmp_path / "direct_second.json") == [1, 2, 3]
    _two_sink_pipeline(dask_options, tmp_path / "dask_first.json", tmp_path / "dask_second.json")
    assert _read_json(tmp_path / "dask_second.json") == [1, 2, 3]
    assert not (tmp_path / "dask_first.json").exists()


def _parquet_read_pipeline(options: list[str], table: Path, out: Path) -> None:
    pipeline = beam.Pipeline(options=PipelineOptions(options))
    _ = (
        pipeline
        | beam.io.ReadFromParquet(str(table))
        | beam.Map(lambda row: row["x"])
        | beam.combiners.ToList()
        | beam.ParDo(_WriteSortedJson(str(out)))
    )
    pipeline.run().wait_until_finish()


@pytest.mark.slow
def test_dask_runner_has_no_translation_for_source_reads(dask_options, tmp_path):
    table = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"x": [3, 1, 2]}), table)
    _parquet_read_pipeline([], table, tmp_path / "direct.json")
    assert _read_json(tmp_path / "direct.json") == [1, 2, 3]
    # beam.io.Read (behind ReadFromParquet, used by delta builds) becomes a no-op that
    # hands the next step no input at all.
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'map'"):
        _parquet_read_pipeline(dask_options, table, tmp_path / "dask.json")
    assert not (tmp_path / "dask.json").exists()


@pytest.mark.slow
def test_dask_runner_build_fails_and_publishes_nothing(dask_options, tiny_corpus, tmp_path):
    root = tmp_path / "root"
    with pytest.raises(AttributeError, match="'Document' object has no attribute") as failure:
        run(["--input", str(tiny_corpus), "--root", str(root), *dask_options], bundle_id="dask")
    # The documented failure: the ingest step's documents reached the consumer of its
    # explicit-deletes output (the multi-output ParDo limitation) and were read as deletes.
    frames = [entry.name for entry in failure.traceback]
    assert "_deleted_by" in frames, (
        "the DaskRunner failure mode changed: update docs/runners.md (Dask) and this test"
    )
    assert not os.path.exists(bundles_dir(str(root)))
    assert read_active(str(root)) is None
    # Only the last applied sink's branch ran, so no table reached the staging directory.
    staging = staging_path(str(root), "dask")
    assert not os.path.exists(os.path.join(staging, DOCUMENTS))
    assert not os.path.exists(os.path.join(staging, CHUNKS))
