"""Reading a generation of several segments as one: live rows in chunk-id order, and
each segment's HNSW and BM25 index searched and merged.

The merged view keeps every read-path invariant of a one-segment bundle:

- rows are the live chunks of every segment, sorted by chunk id, so row order is the
  same total order (ties by chunk id) as a single segment's;
- deleted chunks are never candidates: a segment's HNSW search asks for as many more
  neighbours as the segment has deleted vectors and drops them before the merge, and
  the lexical arm scores only live rows;
- BM25 uses the live corpus's statistics by default (see :class:`SegmentedLexical`);
  compaction to one segment gives the from-scratch statistics again.

Small segments (a refresh's, typically a few hundred chunks) are not searched one by one:
their live vectors are searched exactly in one matrix product, and their BM25 postings are
merged into one table at open time, so each extra small segment costs a query almost
nothing.
"""

import math
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow.parquet as pq

from query.lexical import LexicalIndex
from store.bundles import (
    CHUNK_INDEX,
    CHUNKS,
    DOCUMENTS,
    LEXICAL_DIR,
    BundleError,
    embedding_matrix,
    numbers,
    partition_index,
    read_parquet,
)
from store.config import ACCESS_CLASSES, SEARCH_EXPANSION, LexicalConfig
from store.segments import Segment, check_deletions

CHUNK_COLUMNS = ["chunk_id", "doc_id", "start", "end", "access_class", "ann_key", "heading_path"]
DOCUMENT_COLUMNS = [
    "doc_id",
    "revision",
    "title",
    "text",
    "access_class",
    "source_role",
    "source_uri",
    "valid_from",
    "valid_to",
]


def apply_moved_sources(documents: dict[str, dict[str, Any]], sources: dict[str, str]) -> None:
    """Give each document that moved (``SegmentRef.sources``: read from another location
    since its segment was written) the source it comes from now, in place."""
    for doc_id, source_uri in sources.items():
        if doc_id in documents:
            documents[doc_id] = {**documents[doc_id], "source_uri": source_uri}


class Matches(NamedTuple):
    """What ``usearch``'s ``Index.search`` returns, as far as the read path uses it."""

    keys: np.ndarray
    distances: np.ndarray


SMALL_SEGMENT_ROWS = 8192
"""Segments with at most this many chunk rows are searched exactly, together."""


@dataclass
class _Part:
    index: Any
    deleted: np.ndarray
    """The segment's deleted keys (for ``np.isin``)."""


class _ExactPart:
    """The live vectors of the small segments, searched by one matrix product (cosine
    distance, as the HNSW files measure it)."""

    def __init__(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.keys = keys
        self.vectors = vectors / np.maximum(norms, 1e-12)

    def __len__(self) -> int:
        return len(self.keys)

    def search(self, vector: np.ndarray, count: int) -> Matches:
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        distances = (1.0 - self.vectors @ query).astype(np.float32)
        if count < len(distances):
            top = np.argpartition(distances, count)[:count]
        else:
            top = np.arange(len(distances))
        return Matches(self.keys[top], distances[top])


def _live_nearest(part: _Part, vector: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` nearest live vectors of one HNSW part (fewer only if it has fewer).

    The search asks for ``count`` grown by the part's deleted share (and a margin), and
    asks again for twice as many while deleted rows leave it short: a segment with a tenth
    of its rows deleted is searched for about 1.2 x ``count`` neighbours, not ``count``
    plus every deleted row.
    """
    total = len(part.index)
    if count <= 0 or total == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float32)
    share = len(part.deleted) / total
    want = min(
        total, count if not len(part.deleted) else int(count / max(1 - share, 0.05) * 1.2) + 8
    )
    while True:
        matches = part.index.search(vector, want)
        found = np.asarray(matches.keys, dtype=np.uint64)
        near = np.asarray(matches.distances, dtype=np.float32)
        if len(part.deleted):
            live = ~np.isin(found, part.deleted)
            found, near = found[live], near[live]
        if len(found) >= count or want >= total:
            return found[:count], near[:count]
        want = min(total, want * 2)


class SegmentedIndex:
    """Several segments' HNSW files searched as one index over their live vectors.

    Example:
        >>> index.search(vector, 10).keys   # the 10 nearest live chunks of all segments
    """

    def __init__(self, parts: list[_Part], exact: _ExactPart | None = None) -> None:
        self._parts = parts
        self._exact = exact if exact is not None and len(exact) else None
        self._size = sum(len(p.index) - len(p.deleted) for p in parts)
        self._size += len(self._exact) if self._exact is not None else 0

    def __len__(self) -> int:
        return self._size

    def search(self, vector: np.ndarray, count: int) -> Matches:
        keys, distances = [], []
        if self._exact is not None and count > 0:
            nearest = self._exact.search(vector, count)
            keys.append(nearest.keys)
            distances.append(nearest.distances)
        for part in self._parts:
            found, near = _live_nearest(part, vector, count)
            keys.append(found)
            distances.append(near)
        if not keys:
            return Matches(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float32))
        all_keys, all_distances = np.concatenate(keys), np.concatenate(distances)
        order = np.lexsort((all_keys, all_distances))[:count]
        return Matches(keys=all_keys[order], distances=all_distances[order])


def lucene_idf(df: int, n: int) -> float:
    """BM25's IDF as Lucene (and bm25s, which built the indexes) computes it."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


STATISTICS = ("corpus", "segment")


class SegmentedLexical:
    """Several segments' BM25 indexes as one over the live rows of the merged view.

    ``statistics="corpus"`` (the default) scores every term with the IDF of the live rows
    of all segments, as a from-scratch build of the same documents would: each segment's
    stored weight is its own IDF times the normalized term frequency, so it is rescaled
    by the ratio of the two IDFs (the length normalization keeps each segment's average
    length). ``"segment"`` keeps each segment's own statistics, as Elasticsearch scores per
    shard. A deleted row scores nothing either way.
    """

    def __init__(
        self, parts: list[tuple[LexicalIndex, np.ndarray]], rows: int, statistics: str = "corpus"
    ) -> None:
        if statistics not in STATISTICS:
            raise ValueError(f"statistics must be one of {STATISTICS}, not {statistics!r}")
        self._parts = parts  # (index, global row of each segment row, -1 when deleted)
        self._rows = rows
        self.statistics = statistics
        small = [p for p in parts if p[0].rows <= SMALL_SEGMENT_ROWS]
        self._large = [p for p in parts if p[0].rows > SMALL_SEGMENT_ROWS]
        self._small = _merged_postings(small)
        self._small_vocabulary = {t for index, _ in small for t in index.vocabulary}

    def tokenize(self, text: str) -> list[str]:
        return self._parts[0][0].tokenize(text)

    def knows(self, token: str) -> bool:
        """Whether any segment's vocabulary holds ``token`` (a vocabulary check, as for one
        segment: it may hold it only in deleted rows, which :meth:`postings` leaves out)."""
        return token in self._small_vocabulary or any(
            index.knows(token) for index, _ in self._large
        )

    def postings(self, token: str) -> np.ndarray:
        """Ascending live rows whose BM25 text holds ``token``."""
        rows = [to_global[index.postings(token)] for index, to_global in self._large]
        small = self._small.get(token)
        if small is not None:
            rows.append(small[0])
        merged = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
        return np.sort(merged[merged >= 0])

    def scores(self, query: str) -> np.ndarray:
        """Each live row's BM25 score for ``query``."""
        out = np.zeros(self._rows, dtype=np.float32)
        tokens = self._parts[0][0].tokenize(query)  # once, not once per segment
        if self.statistics == "segment":
            for index, to_global in self._parts:
                local = index.token_scores(tokens)
                if local is not None:
                    live = to_global >= 0
                    out[to_global[live]] += local[live]
            return out
        for token in tokens:
            found, df = [], 0
            for index, to_global in self._large:
                weights = index.weights(token)
                if weights is None:
                    continue
                rows, values = weights
                where = to_global[rows]
                live = where >= 0
                df += int(live.sum())
                found.append((lucene_idf(len(rows), index.rows), where[live], values[live]))
            small = self._small.get(token)
            if small is not None:
                df += len(small[0])
            if not df:
                continue
            idf = lucene_idf(df, self._rows)
            for own_idf, where, values in found:
                out[where] += values * np.float32(idf / own_idf)
            if small is not None:
                out[small[0]] += small[1] * np.float32(idf)
        return out


def _merged_postings(
    parts: list[tuple[LexicalIndex, np.ndarray]],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """token -> (live global rows, weights divided by their segment's own IDF) over the
    given segments: what :meth:`SegmentedLexical.scores` multiplies by the corpus IDF."""
    pieces: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for index, to_global in parts:
        for token, rows, values in index.vocabulary_weights():
            where = to_global[rows]
            live = where >= 0
            if live.any():
                own = np.float32(lucene_idf(len(rows), index.rows))
                pieces.setdefault(token, []).append((where[live], values[live] / own))
    return {
        token: (np.concatenate([r for r, _ in found]), np.concatenate([v for _, v in found]))
        for token, found in pieces.items()
    }


@dataclass
class MergedChunks:
    """The live chunk rows of a generation's segments, in chunk-id order."""

    documents: dict[str, dict[str, Any]]
    chunk_ids: list[str]
    chunk_doc_ids: list[str]
    starts: np.ndarray
    ends: np.ndarray
    access_classes: np.ndarray
    keys: np.ndarray
    heading_paths: list[str]
    pages: list[tuple[int | None, int | None]]
    index: Any
    partitions: dict[str, Any]
    lexical: Any
    sources: list[tuple[str, np.ndarray]]
    """Each segment's chunk table and the global row of each of its rows (-1: deleted)."""

    def vectors(self) -> np.ndarray:
        """Every live row's vector, in row order (read on first use)."""
        from store.bundles import embedding_matrix

        width = None
        out: np.ndarray | None = None
        for table_path, to_global in self.sources:
            table = read_parquet(table_path, columns=["embedding"])
            matrix = embedding_matrix(table.column("embedding"))
            if out is None:
                width = matrix.shape[1]
                out = np.zeros((len(self.chunk_ids), width), dtype=np.float32)
            live = to_global >= 0
            out[to_global[live]] = matrix[live]
        return out if out is not None else np.zeros((0, 1), dtype=np.float32)


def restore_index(path: str, rel: str) -> Any:
    """Memory-map the USearch file ``rel`` of the bundle at ``path``, searched as readers do.

    Raises:
        BundleError: the file cannot be read.
    """
    from usearch.index import Index

    index = Index.restore(os.path.join(path, rel), view=True)
    if index is None:
        raise BundleError(f"cannot read {rel} of segment {path}")
    index.expansion_search = SEARCH_EXPANSION  # type: ignore[misc]  # settable at run time
    return index


def _segment_vectors(path: str) -> np.ndarray:
    return embedding_matrix(read_parquet(os.path.join(path, CHUNKS), ["embedding"])["embedding"])


def _large_segment_parts(
    segment: Segment,
    keys: np.ndarray,
    live: np.ndarray,
    classes: np.ndarray,
    index_parts: list[_Part],
    partition_parts: dict[str, list[_Part]],
    class_only: list[tuple[np.ndarray, np.ndarray, str]],
) -> None:
    """A large segment's HNSW file, and for each access class it holds: its partition
    file, or its own index when it holds one class, or else (too few rows of the class
    for a partition file) its rows of the class, searched exactly."""
    main = restore_index(segment.path, CHUNK_INDEX)
    index_parts.append(_Part(main, keys[~live]))
    held = set(classes.tolist())
    for access_class in sorted(held & set(ACCESS_CLASSES)):
        rel = partition_index(access_class)
        mine = classes == access_class
        if rel in segment.manifest.indexes:
            part = _Part(restore_index(segment.path, rel), keys[~live & mine])
            partition_parts[access_class].append(part)
        elif len(held) == 1:
            partition_parts[access_class].append(_Part(main, keys[~live]))
        else:
            vectors = _segment_vectors(segment.path)
            class_only.append((keys[live & mine], vectors[live & mine], access_class))


def _exact_parts(
    small: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    class_only: list[tuple[np.ndarray, np.ndarray, str]],
) -> dict[str | None, _ExactPart]:
    """The exactly searched rows: every live row of the small segments (under ``None``,
    for everyone, and under each access class), and the rows of large segments whose
    class was too small there for a partition file (under their class only)."""
    pieces: dict[str | None, list[tuple[np.ndarray, np.ndarray]]] = {}
    for keys, vectors, classes in small:
        pieces.setdefault(None, []).append((keys, vectors))
        for access_class in sorted(set(classes.tolist())):
            mine = classes == access_class
            pieces.setdefault(access_class, []).append((keys[mine], vectors[mine]))
    for keys, vectors, access_class in class_only:
        pieces.setdefault(access_class, []).append((keys, vectors))
    return {
        name: _ExactPart(
            np.concatenate([k for k, _ in found]), np.concatenate([v for _, v in found])
        )
        for name, found in pieces.items()
    }


def merge_segments(segments: list[Segment], lexical_config: LexicalConfig) -> MergedChunks:
    """Open every segment and merge its live rows (see the module docstring).

    Raises:
        BundleError: an index cannot be read, or a deletion set names an id the
            segment does not hold.
    """
    tables: list[Any] = []
    documents: dict[str, dict[str, Any]] = {}
    for segment in segments:
        path = segment.path
        present = set(pq.read_schema(os.path.join(path, CHUNKS)).names)
        paged = {"page_start", "page_end"} <= present
        chunks = read_parquet(
            os.path.join(path, CHUNKS),
            columns=CHUNK_COLUMNS + (["page_start", "page_end"] if paged else []),
        )
        docs = read_parquet(os.path.join(path, DOCUMENTS), columns=DOCUMENT_COLUMNS).to_pylist()
        chunk_ids = chunks.column("chunk_id").to_pylist()
        if segment.ref.deleted_documents or segment.ref.deleted_chunks:
            check_deletions(segment, [d["doc_id"] for d in docs], chunk_ids)
        deleted_docs = segment.deleted_documents
        documents.update((d["doc_id"], d) for d in docs if d["doc_id"] not in deleted_docs)
        apply_moved_sources(documents, segment.ref.sources)
        live = np.asarray([c not in segment.deleted_chunks for c in chunk_ids], dtype=bool)
        tables.append((segment, chunks, chunk_ids, live, paged))
    all_ids = [c for _, _, ids, live, _ in tables for c, ok in zip(ids, live, strict=True) if ok]
    order = np.argsort(np.asarray(all_ids, dtype=object), kind="stable")
    row_of_position = np.empty(len(all_ids), dtype=np.int64)
    row_of_position[order] = np.arange(len(all_ids))
    n = len(all_ids)

    def gathered(values: list[Any]) -> list[Any]:
        return [values[i] for i in order]

    flat: dict[str, list[Any]] = {
        k: [] for k in ("chunk_id", "doc_id", "heading_path", "access_class", "pages")
    }
    starts, ends, keys = [], [], []
    sources, lexical_parts = [], []
    index_parts: list[_Part] = []
    partition_parts: dict[str, list[_Part]] = {c: [] for c in ACCESS_CLASSES}
    small: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    class_only: list[tuple[np.ndarray, np.ndarray, str]] = []
    position = 0
    for segment, chunks, chunk_ids, live, paged in tables:
        count = int(live.sum())
        to_global = np.full(len(chunk_ids), -1, dtype=np.int64)
        to_global[live] = row_of_position[position : position + count]
        position += count
        for name in ("chunk_id", "doc_id", "heading_path", "access_class"):
            column = chunks.column(name).to_pylist()
            flat[name] += [v for v, ok in zip(column, live, strict=True) if ok]
        if paged:
            first = chunks.column("page_start").to_pylist()
            last = chunks.column("page_end").to_pylist()
            pairs = list(zip(first, last, strict=True))
        else:
            pairs = [(None, None)] * len(chunk_ids)
        flat["pages"] += [p for p, ok in zip(pairs, live, strict=True) if ok]
        segment_keys = numbers(chunks.column("ann_key")).astype(np.uint64)
        starts.append(numbers(chunks.column("start"))[live])
        ends.append(numbers(chunks.column("end"))[live])
        keys.append(segment_keys[live])
        sources.append((os.path.join(segment.path, CHUNKS), to_global))
        if not len(chunk_ids):
            continue
        classes = np.asarray(chunks.column("access_class").to_pylist(), dtype=object)
        if len(chunk_ids) <= SMALL_SEGMENT_ROWS:
            vectors = _segment_vectors(segment.path)
            small.append((segment_keys[live], vectors[live], classes[live]))
        else:
            _large_segment_parts(
                segment, segment_keys, live, classes, index_parts, partition_parts, class_only
            )
        if os.path.isdir(os.path.join(segment.path, LEXICAL_DIR)):
            lexical = LexicalIndex.open(
                os.path.join(segment.path, LEXICAL_DIR), lexical_config, rows=len(chunk_ids)
            )
            lexical_parts.append((lexical, to_global))
    pages = gathered(flat["pages"])
    exact = _exact_parts(small, class_only)
    return MergedChunks(
        documents=documents,
        chunk_ids=gathered(flat["chunk_id"]),
        chunk_doc_ids=gathered(flat["doc_id"]),
        starts=np.concatenate(starts)[order] if n else np.empty(0, dtype=np.int64),
        ends=np.concatenate(ends)[order] if n else np.empty(0, dtype=np.int64),
        access_classes=np.asarray(gathered(flat["access_class"]), dtype=object),
        keys=np.concatenate(keys)[order] if n else np.empty(0, dtype=np.uint64),
        heading_paths=gathered(flat["heading_path"]),
        pages=[] if all(p == (None, None) for p in pages) else pages,
        index=SegmentedIndex(index_parts, exact.get(None)),
        partitions={
            c: SegmentedIndex(p, exact.get(c))
            for c, p in partition_parts.items()
            if p or c in exact
        },
        lexical=SegmentedLexical(lexical_parts, n) if lexical_parts else None,
        sources=sources,
    )
