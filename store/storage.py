"""Bundle roots on any Beam filesystem: a local directory or an object store.

A root such as ``gs://bucket/evidex`` or ``s3://bucket/evidex`` is read and
written only through Beam's I/O (the same clients the pipeline's workers use),
so a build on Dataflow can publish where a query server reads. ``s3://`` goes
through Beam's ``S3IO`` with one client per process: Beam's ``FileSystems``
builds a new boto3 session and client for every call, about half a second each
(botocore re-reads its service model), which made publishing and copying a
bundle take minutes. Other schemes go through ``FileSystems``.
Object stores have no directories and no atomic rename of a directory, so:

- a bundle is *published* by moving its files from ``staging/<id>/`` to
  ``bundles/<id>/`` with ``manifest.json`` last; a bundle without a manifest is
  not listed, so a half-moved bundle is never seen;
- ``ACTIVE`` is one small object, replaced by a single write; on S3 that write is
  conditional on the object's ETag (``If-Match``, or ``If-None-Match: *`` when it is
  absent), so of two racing writers exactly one wins;
- readers (validation, activation checks, queries) work on a *local copy* of a
  bundle, made once per bundle in a cache directory and reused while the remote
  manifest is byte-identical (bundles are immutable).
"""

import contextlib
import hashlib
import logging
import os
import re
import shutil
import tempfile
from typing import Any

logger = logging.getLogger(__name__)

CACHE_ENV = "EVIDEX_CACHE"
"""Directory for local copies of bundles from remote roots (default ``~/.cache/evidex``)."""

_SCHEME = re.compile(r"^(?P<scheme>[a-zA-Z][-a-zA-Z0-9+.]*)://")
"""A URL scheme as Beam's ``FileSystems.get_scheme`` reads it."""

_RAW = "uncompressed"  # never guess compression from a file suffix


def _filesystems() -> Any:
    """Beam's ``FileSystems``, imported only for remote paths: the query module reads
    local bundles without importing Apache Beam."""
    from apache_beam.io.filesystems import FileSystems

    if getattr(FileSystems, "_pipeline_options", None) is None:
        # Beam's S3 client refuses to start without options; empty ones let boto3 and
        # the GCS client read their usual environment (AWS_ENDPOINT_URL, credentials).
        from apache_beam.options.pipeline_options import PipelineOptions

        FileSystems.set_options(PipelineOptions([]))
    return FileSystems


def configure(options: Any) -> None:
    """Use these pipeline options (e.g. ``--s3_endpoint_url``) for bundle-root I/O too."""
    from apache_beam.io.filesystems import FileSystems

    FileSystems.set_options(options)


def is_remote(path: str) -> bool:
    """Whether ``path`` names an object store or other non-local filesystem (a URL
    scheme other than ``file``)."""
    match = _SCHEME.match(path)
    return match is not None and match.group("scheme").lower() != "file"


def join(base: str, *parts: str) -> str:
    """``base/part/...`` in the style of ``base``'s filesystem."""
    if is_remote(base):
        return str(_filesystems().join(base, *parts))
    return os.path.join(base, *parts)


def exists(path: str) -> bool:
    if _is_s3(path):
        return bool(_s3io().exists(path))
    return bool(_filesystems().exists(path)) if is_remote(path) else os.path.exists(path)


def read_bytes(path: str) -> bytes:
    """The whole content of one file.

    Raises:
        FileNotFoundError: there is no such file.
    """
    if not is_remote(path):
        with open(path, "rb") as handle:
            return handle.read()
    if _is_s3(path):  # one GET, not an existence check and then a GET
        content, _ = read_versioned(path)
        if content is None:
            raise FileNotFoundError(path)
        return content
    filesystems = _filesystems()
    if not filesystems.exists(path):
        raise FileNotFoundError(path)
    with filesystems.open(path, compression_type=_RAW) as handle:
        return bytes(handle.read())


def write_bytes(path: str, data: bytes) -> None:
    """Replace one file's content: temp file + fsync + rename locally, one object write
    (atomic for readers on GCS and S3) on an object store."""
    if _is_s3(path):
        with _s3io().open(path, "w") as handle:
            handle.write(data)
        return
    if is_remote(path):
        with _filesystems().create(path, compression_type=_RAW) as handle:
            handle.write(data)
        return
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def reuse_file(source: str, target: str) -> None:
    """Give ``target`` the content of ``source``, a file of an immutable bundle: a hard
    link on a local root (no bytes copied), a copy on an object store or across
    filesystems."""
    if is_remote(source) or is_remote(target):
        write_bytes(target, read_bytes(source))
        return
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed: copy
        shutil.copyfile(source, target)


class PreconditionFailedError(RuntimeError):
    """A conditional write found the object changed since it was read."""


_S3 = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<key>.+)$", re.IGNORECASE)
_APPEND_ATTEMPTS = 20
_warned_unconditional: set[str] = set()


def has_conditional_writes(path: str) -> bool:
    """Whether ``write_if_version`` on ``path`` is a true compare-and-swap (S3)."""
    return _is_s3(path)


_s3_cached: tuple[Any, Any] | None = None  # (pipeline options, Beam's S3 client for them)


def _s3_beam_client() -> Any:
    """Beam's S3 client wrapper, built from the same pipeline options as Beam's S3
    filesystem (endpoint, credentials, region), once per options object."""
    global _s3_cached
    from apache_beam.io.aws.clients.s3.boto3_client import Client

    options = _filesystems()._pipeline_options
    if _s3_cached is None or _s3_cached[0] is not options:
        _s3_cached = (options, Client(options=options))
    return _s3_cached[1]


def _s3_client() -> Any:
    """The boto3 client, for the conditional writes Beam does not offer."""
    return _s3_beam_client().client


def _s3io() -> Any:
    """Beam's ``S3IO`` on the shared client."""
    from apache_beam.io.aws.s3io import S3IO

    return S3IO(client=_s3_beam_client())


def _is_s3(path: str) -> bool:
    return path[:5].lower() == "s3://"


def _bucket_and_key(path: str) -> tuple[str, str]:
    match = _S3.match(path)
    if match is None:
        raise ValueError(f"{path!r} names no S3 object (s3://bucket/key)")
    return match["bucket"], match["key"]


def read_versioned(path: str) -> tuple[bytes | None, str | None]:
    """A remote object's content and a version token for :func:`write_if_version`.

    Returns ``(None, None)`` when the object does not exist. On stores without
    conditional writes the token is ``None``.
    """
    if not _is_s3(path):
        try:
            return read_bytes(path), None
        except FileNotFoundError:
            return None, None
    from botocore.exceptions import ClientError

    bucket, key = _bucket_and_key(path)
    try:
        reply = _s3_client().get_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None, None
        raise
    return reply["Body"].read(), str(reply["ETag"])


def write_if_version(path: str, data: bytes, version: str | None) -> None:
    """Replace a remote object only if it still has ``version`` (``None``: only if it
    does not exist), as read by :func:`read_versioned`.

    On S3 this is the store's own check (``If-Match`` / ``If-None-Match``). Other
    object stores get an unconditional write and one warning: Beam's filesystems
    expose no generation match, so two racing writers there can both succeed.

    Raises:
        PreconditionFailedError: the object changed (or appeared) since it was read.
    """
    if not _is_s3(path):
        scheme = path.split("://", 1)[0]
        if scheme not in _warned_unconditional:
            _warned_unconditional.add(scheme)
            logger.warning(
                "%s:// has no conditional write here: concurrent writers of %s are not "
                "excluded; run one activator per root",
                scheme,
                path,
            )
        write_bytes(path, data)
        return
    from botocore.exceptions import ClientError

    bucket, key = _bucket_and_key(path)
    condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
    try:
        _s3_client().put_object(Bucket=bucket, Key=key, Body=data, **condition)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
            raise PreconditionFailedError(f"{path} changed since it was read ({code})") from exc
        raise


def append_bytes(path: str, data: bytes) -> None:
    """Append to a log file: a durable append locally; on an object store, which cannot
    append, the object is rewritten with ``data`` added, conditionally where the store
    allows it (S3), retrying when another writer got there first.

    Raises:
        PreconditionFailedError: the object kept changing under every attempt.
    """
    if is_remote(path):
        for _attempt in range(_APPEND_ATTEMPTS):
            before, version = read_versioned(path)
            try:
                write_if_version(path, (before or b"") + data, version)
                return
            except PreconditionFailedError:
                continue
        raise PreconditionFailedError(f"{path} changed under {_APPEND_ATTEMPTS} appends")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def list_files(directory: str) -> list[str]:
    """Paths relative to ``directory`` of every file under it, sorted ('/'-separated)."""
    if not is_remote(directory):
        if not os.path.isdir(directory):
            return []
        return sorted(
            os.path.relpath(os.path.join(parent, name), directory).replace(os.sep, "/")
            for parent, _dirs, files in os.walk(directory)
            for name in files
        )
    prefix = directory.rstrip("/") + "/"
    if _is_s3(prefix):
        found = [str(name) for name, _size in _s3io().list_files(prefix)]
    else:
        found = [m.path for m in _filesystems().match([prefix + "**"])[0].metadata_list]
    return sorted(path[len(prefix) :] for path in found if path.startswith(prefix))


def delete_tree(directory: str) -> None:
    """Delete ``directory`` and everything under it (no error if it is absent)."""
    if not is_remote(directory):
        shutil.rmtree(directory, ignore_errors=True)
        return
    files = [join(directory, rel) for rel in list_files(directory)]
    if files and _is_s3(directory):
        failed = {path: error for path, error in _s3io().delete_files(files) if error}
        if failed:
            raise OSError(f"could not delete {len(failed)} objects, e.g. {next(iter(failed))}")
    elif files:
        _filesystems().delete(files)


def delete_file(path: str) -> None:
    """Delete one file (no error if it is absent)."""
    if not is_remote(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    if not exists(path):
        return
    if _is_s3(path):
        failed = [error for _path, error in _s3io().delete_files([path]) if error]
        if failed:
            raise OSError(f"could not delete {path}: {failed[0]}")
    else:
        _filesystems().delete([path])


def move_tree(source: str, target: str, *, last: str) -> None:
    """Move every file from ``source`` to ``target`` on one object store, ``last`` last.

    Raises:
        FileExistsError: ``target`` already holds files.
        FileNotFoundError: ``source`` has no ``last`` file.
    """
    files = list_files(source)
    if list_files(target):
        raise FileExistsError(f"{target} already exists")
    if last not in files:
        raise FileNotFoundError(f"{join(source, last)} is missing")
    ordered = [rel for rel in files if rel != last] + [last]
    for rel in ordered:  # one at a time, so `last` is written only after all others
        if _is_s3(source):
            _s3io().rename(join(source, rel), join(target, rel))
        else:
            _filesystems().rename([join(source, rel)], [join(target, rel)])


def download_tree(source: str, target: str) -> None:
    """Copy every file under the remote ``source`` into the local directory ``target``.

    Raises:
        ValueError: an object name would land outside ``target`` (``..``, empty parts).
    """
    for rel in list_files(source):
        parts = rel.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"refusing to copy {join(source, rel)!r}: a path outside {target}")
        local = os.path.join(target, *parts)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        remote = join(source, rel)
        with (
            _s3io().open(remote, "r")
            if _is_s3(remote)
            else _filesystems().open(remote, compression_type=_RAW) as src,
            open(local, "wb") as dst,
        ):
            shutil.copyfileobj(src, dst, 1 << 20)


def cache_dir(root: str) -> str:
    """Local directory holding copies of bundles from the remote ``root``."""
    base = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "evidex")
    return os.path.join(base, hashlib.sha256(root.encode("utf-8")).hexdigest()[:16])


def local_copy(remote_dir: str, cache: str, *, manifest: str, fresh: tuple[str, ...]) -> str:
    """A local directory with the files of the immutable remote bundle ``remote_dir``.

    A cached copy is reused when its ``manifest`` bytes equal the remote ones; the
    files in ``fresh`` (written after publication, e.g. a validation report) are
    fetched again every time. A new copy is downloaded beside the cache and renamed
    into place, so a reader never sees half a copy.

    Raises:
        FileNotFoundError: the remote bundle has no ``manifest``.
    """
    name = remote_dir.rstrip("/").rsplit("/", 1)[-1]
    local = os.path.join(cache, name)
    remote_manifest = read_bytes(join(remote_dir, manifest))
    cached_manifest = os.path.join(local, manifest)
    if not (os.path.isfile(cached_manifest) and read_bytes(cached_manifest) == remote_manifest):
        os.makedirs(cache, exist_ok=True)
        temp = tempfile.mkdtemp(prefix=f".{name}.", dir=cache)
        logger.info("copying bundle %s to %s", remote_dir, local)
        download_tree(remote_dir, temp)
        if os.path.isfile(cached_manifest) and read_bytes(cached_manifest) == remote_manifest:
            shutil.rmtree(temp)  # another process finished the same copy first: keep it
        else:  # absent or stale: swap, never deleting files a reader may have open first
            stale = f"{temp}.stale"
            if os.path.exists(local):
                os.rename(local, stale)
            os.rename(temp, local)
            shutil.rmtree(stale, ignore_errors=True)
    for rel in fresh:
        remote, path = join(remote_dir, rel), os.path.join(local, rel)
        if exists(remote):
            write_bytes(path, read_bytes(remote))
        elif os.path.exists(path):
            os.remove(path)
    return local
