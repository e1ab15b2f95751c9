"""ANN index: unit-norm vectors of one surface -> one USearch HNSW file (cosine metric).

Works for every surface: chunks (``EmbeddedChunk``), relation summaries and
community reports (``(id, vector)`` pairs). Keys are the first 64 bits of each
row id; a collision fails the build.
Vectors are added in key order on one thread so the file is reproducible;
:class:`BuildAnnIndexes` builds several surfaces' files side by side, one thread each.
"""

import itertools
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from schemas import EmbeddedChunk, ann_key
from store.bundles import partition_index
from store.config import AnnConfig
from transforms.gather import CollectAll, Gather, single

logger = logging.getLogger(__name__)


class AnnKeyCollisionError(ValueError):
    """Two chunk ids share their first 64 bits."""


def build_index(keys: np.ndarray, vectors: np.ndarray, *, config: AnnConfig) -> Any:
    """A USearch index over ``vectors`` (n x d float32) under uint64 ``keys``."""
    from usearch.index import Index

    index = Index(
        ndim=int(vectors.shape[1]),
        metric="cos",
        dtype="f32",
        connectivity=config.connectivity,
        expansion_add=config.expansion_add,
        expansion_search=config.expansion_search,
    )
    if len(keys):
        index.add(keys, vectors, threads=1)
    return index


def _id_and_vector(item: Any) -> tuple[str, Sequence[float]]:
    # Duck-typed: across a process boundary a RowCoder may hand back an equivalent
    # generated row class rather than EmbeddedChunk itself.
    if isinstance(item, EmbeddedChunk) or hasattr(item, "chunk"):
        return item.chunk.chunk_id, item.embedding
    row_id, vector = item
    return str(row_id), vector


def keys_and_vectors(embedded: Sequence[Any], dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted uint64 keys and their vectors, from ``EmbeddedChunk`` or ``(id, vector)`` items.

    Raises:
        AnnKeyCollisionError: two different row ids map to the same key.
    """
    pairs = sorted(
        (ann_key(row_id), row_id, vector) for row_id, vector in map(_id_and_vector, embedded)
    )
    for (k1, id1, _), (k2, id2, _) in itertools.pairwise(pairs):
        if k1 == k2 and id1 != id2:
            raise AnnKeyCollisionError(f"ANN key collision between rows {id1} and {id2}")
    keys = np.array([k for k, _, _ in pairs], dtype=np.uint64)
    vectors = np.array([v for _, _, v in pairs], dtype=np.float32)
    return keys, vectors.reshape(len(pairs), dimension)


def save_index(index: Any, path: str) -> tuple[str, int]:
    """Write a built index to ``path`` on any Beam filesystem (local, GCS, S3);
    returns ``(path, vector count)``, what the index-building steps emit."""
    with tempfile.TemporaryDirectory() as scratch:
        local = os.path.join(scratch, "index.usearch")
        index.save(local)
        with open(local, "rb") as src, FileSystems.create(path) as dst:
            shutil.copyfileobj(src, dst)
    logger.info("wrote ANN index of %d vectors to %s", len(index), path)
    return path, len(index)


def write_index(
    embedded: Sequence[Any], path: str, *, dimension: int, config: AnnConfig
) -> tuple[str, int]:
    """``EmbeddedChunk``s or ``(id, vector)`` pairs -> an HNSW file at ``path``."""
    keys, vectors = keys_and_vectors(embedded, dimension)
    return save_index(build_index(keys, vectors, config=config), path)


def partition_path(
    directory: str, access_class: str, rows: int, *, classes: int, config: AnnConfig
) -> str | None:
    """Where the HNSW file of one access class's ``rows`` chunks goes, or ``None`` when
    it gets none: small classes are searched exactly, and with one class every caller
    sees everything."""
    if classes >= 2 and rows > config.partition_min_rows:
        return FileSystems.join(directory, partition_index(access_class))
    return None


def write_partitions(
    embedded: Sequence[Any], directory: str, *, dimension: int, config: AnnConfig
) -> list[tuple[str, int]]:
    """What :class:`BuildAnnPartitions` writes, from ``EmbeddedChunk``s in memory."""
    by_class: dict[str, list[Any]] = {}
    for row in embedded:
        by_class.setdefault(row.chunk.access_class, []).append(row)
    written = []
    for access_class, rows in sorted(by_class.items()):
        path = partition_path(
            directory, access_class, len(rows), classes=len(by_class), config=config
        )
        if path is not None:
            written.append(write_index(rows, path, dimension=dimension, config=config))
    return written


class _BuildIndexFn(beam.DoFn):
    def __init__(self, *, path: str, dimension: int, config: AnnConfig) -> None:
        self._path = path
        self._dimension = dimension
        self._config = config

    def process(self, embedded: list[Any]) -> Any:
        yield write_index(embedded, self._path, dimension=self._dimension, config=self._config)


class BuildAnnIndex(beam.PTransform):
    """``PCollection[EmbeddedChunk | (id, vector)]`` -> a USearch file at ``path`` (global step).

    Example:
        >>> embedded | BuildAnnIndex(path, dimension=384, config=AnnConfig())

    Memory bound: all vectors of the corpus on one worker (4 x dimension bytes each).

    With ``collected``, the input is already one list of those items (a ``CollectAll``
    shared with other global steps over the same rows).
    """

    def __init__(
        self, path: str, *, dimension: int, config: AnnConfig, collected: bool = False
    ) -> None:
        super().__init__()
        if dimension <= 0:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self._fn = _BuildIndexFn(path=path, dimension=dimension, config=config)
        self._collected = collected

    def expand(self, embedded: beam.PCollection) -> beam.PCollection:
        lists = embedded if self._collected else embedded | "CollectVectors" >> CollectAll()
        return lists | "BuildHnsw" >> beam.ParDo(self._fn)


class _BuildIndexesFn(beam.DoFn):
    def __init__(self, *, paths: Mapping[str, str], dimension: int, config: AnnConfig) -> None:
        self._paths = dict(paths)
        self._dimension = dimension
        self._config = config

    def process(self, gathered: dict[str, list[Any]]) -> Any:
        empty = (np.zeros(0, dtype=np.uint64), np.zeros((0, self._dimension), dtype=np.float32))
        surfaces = {name: single(gathered[name], empty) for name in self._paths}
        # usearch releases the GIL while it adds vectors, so the threads run on separate
        # cores; each index is still built on one thread, in key order.
        with ThreadPoolExecutor(max_workers=len(surfaces)) as pool:
            built = {
                name: pool.submit(build_index, keys, vectors, config=self._config)
                for name, (keys, vectors) in surfaces.items()
            }
            for name, future in built.items():
                yield save_index(future.result(), self._paths[name])


class BuildAnnIndexes(beam.PTransform):
    """``{name: PCollection of one (keys, vectors) pair}`` -> one USearch file per name,
    built side by side (one global step, one thread per file).

    Each input holds what :func:`keys_and_vectors` returns for one surface's rows, e.g.
    relation summaries and community reports, whose indexes would otherwise be built one
    after the other. A name whose input is empty gets an empty index. Files are the same
    as :class:`BuildAnnIndex` writes.

    Example:
        >>> pairs = {"relations": r, "communities": c}
        >>> pairs | BuildAnnIndexes({"relations": p1, "communities": p2}, dimension=384,
        ...                         config=AnnConfig())

    Memory bound: every surface's vectors on one worker.
    """

    def __init__(self, paths: Mapping[str, str], *, dimension: int, config: AnnConfig) -> None:
        super().__init__()
        if not paths:
            raise ValueError("BuildAnnIndexes needs at least one surface")
        if dimension <= 0:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self._names = tuple(paths)
        self._fn = _BuildIndexesFn(paths=paths, dimension=dimension, config=config)

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        if set(inputs) != set(self._names):
            raise ValueError(f"inputs {sorted(inputs)} do not match paths {sorted(self._names)}")
        return inputs | "GatherVectors" >> Gather(always=True) | "BuildHnsw" >> beam.ParDo(self._fn)


class _BuildPartitionFn(beam.DoFn):
    def __init__(self, *, directory: str, dimension: int, config: AnnConfig) -> None:
        self._directory = directory
        self._dimension = dimension
        self._config = config

    def process(self, item: tuple[str, Iterable[Any]], n_classes: int) -> Any:
        access_class, grouped = item
        embedded = list(grouped)
        path = partition_path(
            self._directory, access_class, len(embedded), classes=n_classes, config=self._config
        )
        if path is not None:
            yield write_index(embedded, path, dimension=self._dimension, config=self._config)


class BuildAnnPartitions(beam.PTransform):
    """``PCollection[EmbeddedChunk]`` -> one HNSW file per large access class.

    Restricted callers search each class they may see on its own; a class with more
    than ``config.partition_min_rows`` chunks gets ``chunks.<class>.usearch`` so that
    this search stays sublinear. Nothing is written when the bundle has one class.

    Memory bound: one class's vectors on one worker (at most the chunk index's bound).
    """

    def __init__(self, directory: str, *, dimension: int, config: AnnConfig) -> None:
        super().__init__()
        self._fn = _BuildPartitionFn(directory=directory, dimension=dimension, config=config)

    def expand(self, embedded: beam.PCollection) -> beam.PCollection:
        by_class = embedded | "KeyByAccessClass" >> beam.Map(lambda e: (e.chunk.access_class, e))
        n_classes = (
            by_class
            | "ClassKeys" >> beam.Keys()
            | "DistinctClasses" >> beam.Distinct()
            | "CountClasses" >> beam.combiners.Count.Globally()
        )
        return (
            by_class
            | "GroupByAccessClass" >> beam.GroupByKey()
            | "BuildPartitions" >> beam.ParDo(self._fn, beam.pvalue.AsSingleton(n_classes))
        )
