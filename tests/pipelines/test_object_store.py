"""A bundle root on an object store, through Beam's own S3 filesystem.

The S3 endpoint is moto's S3-compatible HTTP server on loopback: Beam's
``S3FileSystem`` and boto3 run unchanged, exactly as they would against S3, and
nothing under the root is a local path.
"""

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evidex.cli import main
from store import storage
from store.activation import ActivationError, activate, read_active, read_history, rollback
from store.bundles import (
    CHUNKS,
    MANIFEST,
    VALIDATION_REPORT,
    bundle_path,
    list_bundles,
    local_bundle,
    read_manifest,
)
from store.pointer import ObjectPointerStore, PointerConflictError

BUCKET = "evidex-test"


@pytest.fixture(scope="module")
def s3_endpoint():
    import boto3
    from moto import server as moto_server  # a dev dependency: missing means a broken install

    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            env.setenv(name, value)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        env.setenv("AWS_ENDPOINT_URL", url)  # for commands that take no Beam options
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
        try:
            yield url
        finally:
            server.stop()


def _beam_flags(url: str) -> list[str]:
    return [
        f"--s3_endpoint_url={url}",
        "--s3_access_key_id=test",
        "--s3_secret_access_key=test",
        "--s3_region_name=us-east-1",
    ]


def test_storage_helpers_on_an_object_store(s3_endpoint, tmp_path):
    base = f"s3://{BUCKET}/helpers"
    assert storage.is_remote(base) and not storage.is_remote(str(tmp_path))
    storage.write_bytes(storage.join(base, "staging/x/a.bin"), b"a")
    storage.write_bytes(storage.join(base, "staging/x/sub/b.bin"), b"bb")
    storage.write_bytes(storage.join(base, "staging/x/manifest.json"), b"{}")
    assert storage.list_files(storage.join(base, "staging/x")) == [
        "a.bin",
        "manifest.json",
        "sub/b.bin",
    ]
    storage.move_tree(
        storage.join(base, "staging/x"), storage.join(base, "bundles/x"), last=MANIFEST
    )
    assert storage.list_files(storage.join(base, "staging/x")) == []
    assert storage.read_bytes(storage.join(base, "bundles/x/sub/b.bin")) == b"bb"
    with pytest.raises(FileExistsError):  # never publish over an existing bundle
        storage.write_bytes(storage.join(base, "staging/y/manifest.json"), b"{}")
        storage.move_tree(
            storage.join(base, "staging/y"), storage.join(base, "bundles/x"), last=MANIFEST
        )
    storage.append_bytes(storage.join(base, "log"), b"1\n")
    storage.append_bytes(storage.join(base, "log"), b"2\n")
    assert storage.read_bytes(storage.join(base, "log")) == b"1\n2\n"
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(storage.join(base, "absent"))
    storage.delete_tree(storage.join(base, "bundles/x"))
    assert storage.list_files(storage.join(base, "bundles")) == []


def test_local_copies_are_reused_and_never_escape_the_cache(s3_endpoint, tmp_path):
    remote = f"s3://{BUCKET}/copies/bundles/b1"
    storage.write_bytes(storage.join(remote, "data.bin"), b"payload")
    storage.write_bytes(storage.join(remote, MANIFEST), b'{"v": 1}')
    cache = str(tmp_path / "cache")
    first = storage.local_copy(remote, cache, manifest=MANIFEST, fresh=(VALIDATION_REPORT,))
    assert (Path(first) / "data.bin").read_bytes() == b"payload"
    assert not (Path(first) / VALIDATION_REPORT).exists()
    # same manifest: the copy is reused (a changed data object is not fetched again) ...
    storage.write_bytes(storage.join(remote, "data.bin"), b"changed")
    storage.write_bytes(storage.join(remote, VALIDATION_REPORT), b'{"passed": true}')
    again = storage.local_copy(remote, cache, manifest=MANIFEST, fresh=(VALIDATION_REPORT,))
    assert again == first and (Path(first) / "data.bin").read_bytes() == b"payload"
    assert (Path(first) / VALIDATION_REPORT).read_bytes() == b'{"passed": true}'  # refreshed
    # ... and a different manifest means a different bundle: copied again
    storage.write_bytes(storage.join(remote, MANIFEST), b'{"v": 2}')
    storage.local_copy(remote, cache, manifest=MANIFEST, fresh=())
    assert (Path(first) / "data.bin").read_bytes() == b"changed"
    # an object name that climbs out of the bundle is refused before anything is written
    storage.write_bytes(f"s3://{BUCKET}/copies/bundles/b1/../../escape.bin", b"x")
    storage.write_bytes(storage.join(remote, MANIFEST), b'{"v": 3}')
    with pytest.raises(ValueError, match="outside"):
        storage.local_copy(remote, cache, manifest=MANIFEST, fresh=())
    assert not list(tmp_path.rglob("escape.bin"))


def test_conditional_writes_refuse_a_stale_version(s3_endpoint):
    path = f"s3://{BUCKET}/cas/ACTIVE"
    assert storage.has_conditional_writes(path)
    assert storage.read_versioned(path) == (None, None)
    storage.write_if_version(path, b"a\n", None)  # create only if absent
    with pytest.raises(storage.PreconditionFailedError):
        storage.write_if_version(path, b"b\n", None)  # it exists now
    content, version = storage.read_versioned(path)
    assert content == b"a\n" and version
    storage.write_if_version(path, b"c\n", version)
    with pytest.raises(storage.PreconditionFailedError):  # the same stale ETag again
        storage.write_if_version(path, b"d\n", version)
    assert storage.read_bytes(path) == b"c\n"


def _interleave(monkeypatch, between) -> None:
    """Run ``between()`` once, right after the next versioned read and before its write."""
    real = storage.read_versioned
    pending = [between]

    def read_then_interfere(path):
        seen = real(path)
        if pending:
            pending.pop()()
        return seen

    monkeypatch.setattr(storage, "read_versioned", read_then_interfere)


def test_of_two_racing_activators_on_s3_exactly_one_wins(s3_endpoint, monkeypatch):
    root = f"s3://{BUCKET}/race"
    store, rival = ObjectPointerStore(root), ObjectPointerStore(root)
    store.compare_and_swap(None, "b1")
    # both read "b1"; the rival's swap lands between our read and our write
    _interleave(monkeypatch, lambda: rival.compare_and_swap("b1", "b2"))
    with pytest.raises(PointerConflictError, match="changed while activating"):
        store.compare_and_swap("b1", "b3")
    assert store.read() == "b2"
    # and the first activation of a root is create-only
    fresh, other = (ObjectPointerStore(f"s3://{BUCKET}/race-first") for _ in range(2))
    _interleave(monkeypatch, lambda: other.compare_and_swap(None, "x"))
    with pytest.raises(PointerConflictError):
        fresh.compare_and_swap(None, "y")
    assert fresh.read() == "x"


def test_a_history_append_racing_another_keeps_both_lines(s3_endpoint, monkeypatch):
    log = f"s3://{BUCKET}/appends/history.jsonl"
    storage.append_bytes(log, b"1\n")
    _interleave(monkeypatch, lambda: storage.append_bytes(log, b"2\n"))
    storage.append_bytes(log, b"3\n")  # its first write is refused; the retry sees "2"
    assert storage.read_bytes(log) == b"1\n2\n3\n"


def test_a_bundle_without_its_manifest_is_not_listed(s3_endpoint):
    root = f"s3://{BUCKET}/half"
    storage.write_bytes(storage.join(root, "bundles/b9/chunks.parquet"), b"partial")
    assert list_bundles(root) == []


@pytest.mark.slow
def test_build_validate_activate_query_and_delta_on_an_object_store(
    s3_endpoint, tiny_corpus, built_root, tmp_path, monkeypatch, query_encoder
):
    from pipelines.build_index import run
    from query import load_bundle, retrieve

    cache = tmp_path / "cache"
    monkeypatch.setenv(storage.CACHE_ENV, str(cache))
    root = f"s3://{BUCKET}/roots/main"
    flags = _beam_flags(s3_endpoint)

    first = run(["--input", str(tiny_corpus), "--root", root, *flags], bundle_id="b1")
    assert first.path == f"{root}/bundles/b1"
    remote = storage.list_files(root)
    assert remote and all(rel.startswith("bundles/b1/") for rel in remote)  # staging is gone
    manifest = read_manifest(bundle_path(root, "b1"))
    assert set(manifest.files) | {MANIFEST} == {rel.split("/", 2)[2] for rel in remote}
    # same input, same config: the same chunk rows as the local build of the tiny corpus
    local_chunks = pq.read_table(Path(built_root) / "bundles/b1" / CHUNKS, columns=["chunk_id"])
    copy = local_bundle(root, "b1")
    assert Path(copy).is_relative_to(cache)
    remote_chunks = pq.read_table(Path(copy) / CHUNKS, columns=["chunk_id"])
    assert remote_chunks.equals(local_chunks)

    with pytest.raises(ActivationError, match="not been validated"):
        activate(root, "b1")
    assert main(["validate", "--root", root]) == 0
    report = json.loads(
        storage.read_bytes(storage.join(bundle_path(root, "b1"), VALIDATION_REPORT))
    )
    assert report["passed"] is True
    assert main(["activate", "b1", "--root", root]) == 0
    assert read_active(root) == "b1"
    assert storage.read_bytes(storage.join(root, "ACTIVE")) == b"b1\n"

    bundle = load_bundle(root, model=query_encoder)
    assert bundle.bundle_id == "b1" and Path(bundle.path).is_relative_to(cache)
    top = retrieve(bundle, "Which volcano is on Sicily?", k=1)[0]
    assert top.doc_id == "volcano.txt"

    # an unchanged corpus, built by worker processes that share no disk with this one:
    # the delta build reads the remote parent and reuses every chunk row
    workers = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    second = run(["--input", str(tiny_corpus), "--root", root, *flags, *workers], bundle_id="b2")
    assert second.manifest.parent_bundle_id == "b1"
    assert second.manifest.delta["texts_embedded"] == 0
    assert second.manifest.delta["chunks_reused"] == manifest.row_counts["chunks"]
    assert list_bundles(root) == ["b1", "b2"]
    with pytest.raises(ActivationError, match="not been validated"):
        activate(root, "b2")
    assert read_active(root) == "b1"  # a refused activation leaves ACTIVE alone
    assert main(["validate", "b2", "--root", root]) == 0
    activate(root, "b2")
    rollback(root)
    assert read_active(root) == "b1"
    assert [e["action"] for e in read_history(root)] == ["activate", "activate", "rollback"]
    assert main(["gc", "--keep", "0", "--root", root]) == 0  # b1 active; b2 is not protected
    assert list_bundles(root) == ["b1"]
    assert storage.list_files(bundle_path(root, "b2")) == []


@pytest.mark.slow
def test_a_build_of_several_segments_on_an_object_store(
    s3_endpoint, tiny_corpus, tmp_path, monkeypatch, query_encoder
):
    from pipelines.build_index import run
    from query import load_bundle, retrieve

    monkeypatch.setenv(storage.CACHE_ENV, str(tmp_path / "cache"))
    root = f"s3://{BUCKET}/roots/parts"
    flags = _beam_flags(s3_endpoint)
    args = ["--input", str(tiny_corpus), "--root", root, "--segments", "2", "--knowledge=false"]
    built = run([*args, *flags], bundle_id="p1")
    assert [r.part for r in built.manifest.segments] == ["parts/0", "parts/1"]
    remote = {rel.split("/", 2)[2] for rel in storage.list_files(root)}
    # Each part's manifest reached the store with the files it checksums.
    assert {"parts/0/manifest.json", "parts/1/manifest.json", MANIFEST} <= remote
    assert set(built.manifest.files) | {MANIFEST} == remote
    assert main(["validate", "--root", root]) == 0
    assert main(["activate", "p1", "--root", root]) == 0
    bundle = load_bundle(root, model=query_encoder)
    assert len(bundle.segments) == 2
    assert retrieve(bundle, "Which volcano is on Sicily?", k=1)[0].doc_id == "volcano.txt"
