"""Resource faults (issue 9, item 4): a full disk and a read-only bundle root.

*Full disk* is real (a size-limited tmpfs left with 64 KiB free, when the test
runs as root) and also injected at each writer: ``transforms.write.write_parquet``
raises ``OSError(ENOSPC)`` for ``chunks.parquet`` (the tables before it succeed),
and USearch's ``Index.save`` and ``bm25s.BM25.save`` raise it for every index.
*Read-only root* is real: a tmpfs remounted read-only when the test runs as root
(otherwise a directory with mode 0555); skipped if neither makes the root
unwritable. Either way the build must fail naming the cause, leave
``ACTIVE``, ``history.jsonl`` and ``bundles/`` exactly as they were, and leave
nothing that ``activate`` accepts.
"""

import errno
import importlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import transforms.write
from evidex.cli import main as evidex_main
from pipelines.build_index import BuildFailedError, run
from store.activation import ActivationError, activate, read_active
from store.bundles import list_bundles


def _snapshot(root: Path) -> tuple:
    return (
        read_active(str(root)),
        list_bundles(str(root)),
        (root / "ACTIVE").read_bytes(),
        (root / "history.jsonl").read_bytes(),
    )


@pytest.mark.slow
def test_a_full_disk_at_the_parquet_writer_fails_the_build_cleanly(
    validated_root, tiny_corpus, tmp_path, monkeypatch
):
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    before = _snapshot(root)
    real = transforms.write.write_parquet

    def full_disk(table, path):
        if path.endswith("chunks.parquet"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        real(table, path)

    monkeypatch.setattr(transforms.write, "write_parquet", full_disk)
    # Beam re-raises a DoFn's error as RuntimeError carrying its text; the build turns it
    # into BuildFailedError (a RuntimeError) naming the cause.
    with pytest.raises(BuildFailedError, match=r"\[Errno 28\] No space left on device: .*chunks"):
        run(
            _full_build(tiny_corpus, root),
            bundle_id="enospc",
        )
    assert _snapshot(root) == before
    assert not (root / "bundles" / "enospc").exists()
    assert not (root / "staging" / "enospc" / "manifest.json").exists()
    with pytest.raises(ActivationError, match="cannot activate enospc:"):
        activate(str(root), "enospc")
    assert _snapshot(root) == before


def _full_build(corpus: Path, root: Path) -> list[str]:
    """A full build without the knowledge layer: every chunk writer writes."""
    return ["--input", str(corpus), "--root", str(root), "--knowledge=false", "--delta=false"]


def _no_space(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "scratch")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("writer", "patch"),
    [
        ("usearch", ("usearch.index", "Index", "save")),
        ("bm25", ("bm25s", "BM25", "save")),
    ],
)
def test_a_full_disk_at_the_index_writers_fails_the_build_cleanly(
    writer, patch, validated_root, tiny_corpus, tmp_path, monkeypatch
):
    module, owner, method = patch
    root = tmp_path / "root"
    shutil.copytree(validated_root, root)
    before = _snapshot(root)
    monkeypatch.setattr(getattr(importlib.import_module(module), owner), method, _no_space)
    with pytest.raises(BuildFailedError, match=r"\[Errno 28\] No space left on device"):
        run(
            _full_build(tiny_corpus, root),
            bundle_id=f"enospc-{writer}",
        )
    assert _snapshot(root) == before
    assert not (root / "bundles" / f"enospc-{writer}").exists()
    with pytest.raises(ActivationError, match=f"cannot activate enospc-{writer}:"):
        activate(str(root), f"enospc-{writer}")


def _mount_tmpfs(mount: Path, size_bytes: int) -> bool:
    if os.geteuid() != 0:
        return False
    command = ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mount)]
    return subprocess.run(command, check=False, capture_output=True).returncode == 0


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.mark.slow
def test_a_really_full_filesystem_fails_the_build_cleanly(validated_root, tiny_corpus, tmp_path):
    """A real tmpfs holding the existing root with 64 KiB to spare: the build runs out."""
    mount = tmp_path / "full"
    mount.mkdir()
    used = _tree_bytes(validated_root)
    if not _mount_tmpfs(mount, used + 512 * 1024):
        pytest.skip(
            "a real full disk needs root to mount a size-limited tmpfs; "
            "the injected-ENOSPC tests above still run"
        )
    try:
        root = mount / "root"
        shutil.copytree(validated_root, root)
        filler = mount / "filler"  # leave 64 KiB free, whatever tmpfs rounds the size to
        free = shutil.disk_usage(mount).free
        filler.write_bytes(b"\0" * max(0, free - 64 * 1024))
        before = _snapshot(root)
        # Wherever the space runs out: a direct OSError, or a Beam stage failing on it.
        with pytest.raises((OSError, BuildFailedError)) as failure:
            run(_full_build(tiny_corpus, root), bundle_id="full")
        assert "No space left on device" in str(failure.value)
        assert _snapshot(root) == before
        assert not (root / "bundles" / "full").exists()
        with pytest.raises(ActivationError, match="cannot activate full:"):
            activate(str(root), "full")
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def read_only_root(validated_root, tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    mounted = False
    if os.geteuid() == 0:
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)], check=False
            ).returncode
            == 0
        )
    root = mount / "root"
    shutil.copytree(validated_root, root)
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    else:
        for directory, _dirs, _files in os.walk(root):
            os.chmod(directory, 0o555)
    try:
        (root / "probe").write_text("x")
    except OSError:
        pass
    else:
        pytest.skip(
            "cannot make the root read-only here: no tmpfs remount, and this "
            "filesystem or user ignores mode 0555"
        )
    yield root
    if mounted:
        subprocess.run(["umount", str(mount)], check=False)
    else:
        for directory, _dirs, _files in os.walk(root):
            os.chmod(directory, 0o755)


@pytest.mark.slow
def test_a_read_only_root_fails_the_build_naming_the_cause(read_only_root, tiny_corpus, capsys):
    before = _snapshot(read_only_root)
    with pytest.raises(OSError) as failure:
        run(["--input", str(tiny_corpus), "--root", str(read_only_root)], bundle_id="ro")
    assert failure.value.errno in (errno.EROFS, errno.EACCES)
    assert str(read_only_root) in str(failure.value)
    code = evidex_main(["build", "--input", str(tiny_corpus), "--root", str(read_only_root)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].startswith("evidex build: error: [Errno")
    assert "Read-only file system" in err[-1] or "Permission denied" in err[-1]
    assert _snapshot(read_only_root) == before
    assert list_bundles(str(read_only_root)) == ["b1"]
    with pytest.raises(ActivationError, match="cannot activate ro:"):
        activate(str(read_only_root), "ro")
