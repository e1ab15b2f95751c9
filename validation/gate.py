"""Run every check on a bundle and write its ``validation.json``.

Checks: file checksums against the manifest, one Great Expectations suite per
table, and ANN qualification (vector count equals row count; recall@k of the
HNSW index against exact search on a sample of stored vectors).
"""

import json
import logging
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from store import knowledge_layers
from store.activation import validation_state
from store.bundles import (
    CHUNK_INDEX,
    CHUNKS,
    COMMUNITIES,
    COMMUNITY_INDEX,
    DOCUMENTS,
    ENTITIES,
    FAILURES_DIR,
    MENTIONS,
    RELATION_INDEX,
    RELATIONS,
    VALIDATION_REPORT,
    BundleError,
    manifest_sha256,
    partition_index,
    read_manifest,
    verify_files,
    verify_index_headers,
)
from store.config import ACCESS_CLASSES, SEARCH_EXPANSION, SOURCE_ROLES
from store.regression import RegressionCase
from store.segments import (
    Locate,
    Segment,
    live_revisions,
    open_segments,
    own_parts,
    sibling_locator,
)
from validation import frames, increments, knowledge, suites

logger = logging.getLogger(__name__)

DEFAULT_RECALL_K = 10
DEFAULT_RECALL_SAMPLE = 200
DEFAULT_MEAN_RECALL_FLOOR = 0.98
DEFAULT_MIN_RECALL_FLOOR = 0.80


class CheckResult(BaseModel):
    """One expectation or qualification check."""

    model_config = ConfigDict(frozen=True)

    name: str
    table: str
    success: bool
    observed: Any = None


class ValidationReport(BaseModel):
    """What ``validation.json`` holds."""

    model_config = ConfigDict(frozen=True)

    bundle_id: str
    manifest_sha256: str
    passed: bool
    checks: list[CheckResult]
    compared_with: str | None = None
    """The validated parent generation whose knowledge rows were not checked again
    where unchanged (``None``: every row was checked)."""
    knowledge_rows_checked: dict[str, list[int]] | None = None
    """Per knowledge table, ``[rows the suite saw, rows in the table]``."""
    references_of_changed_rows_only: bool = False
    """Nothing a knowledge row can name (a document revision, chunk, entity or
    relation of the parent's) was gone, so only the changed rows' references were
    computed (the unchanged rows' were intact in the parent and name the same rows)."""

    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.success]


def suite_columns(suite: Any) -> list[str]:
    """The columns a suite's expectations name (``column``, ``column_list``, ...)."""
    named: set[str] = set()
    for expectation in suite.expectations:
        for key, value in expectation.configuration.kwargs.items():
            if key.startswith("column"):
                named.update([value] if isinstance(value, str) else list(value))
    return sorted(named)


def _run_suite(context: Any, suite: Any, frame: pd.DataFrame, table: str) -> list[CheckResult]:
    # Only the columns the suite checks go to Great Expectations, which hashes the whole
    # frame it is given (a batch id): on a knowledge table that hashing of list and text
    # columns cost more than the checks. A column the suite names but the frame lacks is
    # left for the suite to report.
    wanted = suite_columns(suite)
    if all(c in frame.columns for c in wanted):
        frame = frame[wanted]
    source = context.data_sources.add_pandas(f"evidex_{table}")
    batch = (
        source.add_dataframe_asset(table)
        .add_batch_definition_whole_dataframe("all")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    result = batch.validate(suite)
    checks = []
    for item in result.results:
        config = item.expectation_config
        if config is None:
            continue
        columns = [str(v) for k, v in sorted(config.kwargs.items()) if k.startswith("column")]
        name = f"{table}.{config.type}({','.join(columns)})"
        observed = {
            k: item.result[k]
            for k in ("unexpected_count", "observed_value", "partial_unexpected_list")
            if k in item.result
        }
        checks.append(
            CheckResult(
                name=name, table=table, success=bool(item.success), observed=_jsonable(observed)
            )
        )
    return checks


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


_TIE = 1e-5
"""Cosine scores this close count as equal (float32 dot products of unit vectors)."""


def _recalls(
    index: Any, keys: np.ndarray, vectors: np.ndarray, picked: np.ndarray, depth: int
) -> list[float]:
    """Per picked row, the share of the index's top ``depth`` keys that belong in the
    exact top ``depth``: a key counts when its exact score reaches the ``depth``-th best
    score, so among vectors that tie (the same passage in two documents) any one is right."""
    scores = vectors[picked] @ vectors.T
    kth = -np.partition(-scores, depth - 1, axis=1)[:, depth - 1]
    found = np.asarray(index.search(vectors[picked], depth).keys).reshape(len(picked), depth)
    order = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys, found, sorter=order).clip(0, len(keys) - 1)
    rows = order[at]
    known = keys[rows] == found
    reached = np.take_along_axis(scores, rows, axis=1) >= kth[:, None] - _TIE
    return [float(n) / depth for n in (known & reached).sum(axis=1)]


def ann_checks(
    index_path: str,
    keys: np.ndarray,
    vectors: np.ndarray,
    *,
    k: int = DEFAULT_RECALL_K,
    sample: int = DEFAULT_RECALL_SAMPLE,
    mean_floor: float = DEFAULT_MEAN_RECALL_FLOOR,
    min_floor: float = DEFAULT_MIN_RECALL_FLOOR,
    seed: int = 0,
) -> list[CheckResult]:
    """Vector count and recall@k of the HNSW file against exact cosine search."""
    from usearch.index import Index

    index = Index.restore(index_path, view=True)
    if index is None:
        return [CheckResult(name="ann.readable", table="ann", success=False)]
    index.expansion_search = SEARCH_EXPANSION  # type: ignore[misc]  # as readers do
    checks = [
        CheckResult(
            name="ann.vector_count_equals_rows",
            table="ann",
            success=len(index) == len(keys),
            observed=[len(index), len(keys)],
        ),
        CheckResult(
            name="ann.dimension",
            table="ann",
            success=index.ndim == vectors.shape[1],
            observed=[index.ndim, int(vectors.shape[1])],
        ),
    ]
    if len(keys) == 0 or not all(c.success for c in checks):
        return checks  # recall is meaningless (or impossible) on a mismatched index
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(len(keys), size=min(sample, len(keys)), replace=False))
    depth = min(k, len(keys))
    recalls = _recalls(index, keys, vectors, picked, depth)
    mean, low = float(np.mean(recalls)), float(np.min(recalls))
    checks.append(
        CheckResult(
            name=f"ann.mean_recall@{depth}",
            table="ann",
            success=mean >= mean_floor,
            observed=round(mean, 4),
        )
    )
    checks.append(
        CheckResult(
            name=f"ann.min_recall@{depth}",
            table="ann",
            success=low >= min_floor,
            observed=round(low, 4),
        )
    )
    return checks


def regression_checks(path: str, cases: list[RegressionCase]) -> list[CheckResult]:
    """Run the frozen regression queries against the bundle at ``path``."""
    from query import open_bundle, retrieve

    bundle = open_bundle(path, verify=False)  # checksums were verified just before
    checks = []
    for number, case in enumerate(cases, start=1):
        found = [e.doc_id for e in retrieve(bundle, case.query, k=case.k)]
        missing = [d for d in case.expect if d not in found]
        checks.append(
            CheckResult(
                name=f"regression.{number}({case.query[:60]})",
                table="regression",
                success=not missing,
                observed={"missing": missing, "top_k": found},
            )
        )
    return checks


def validate_bundle(
    path: str,
    *,
    access_classes: Iterable[str] = ACCESS_CLASSES,
    source_roles: Iterable[str] = SOURCE_ROLES,
    regression: list[RegressionCase] | None = None,
    write: bool = True,
    locate: Locate | None = None,
    every_row: bool = False,
) -> ValidationReport:
    """Validate the bundle at ``path`` and (by default) write ``validation.json`` into it.

    Args:
        path: bundle directory.
        access_classes: the declared set every access class must belong to.
        source_roles: the declared set every source role must belong to.
        regression: frozen queries that must find their documents (the root's suite).
        write: write the report into the bundle.
        locate: where the bundles holding its other segments are (default: beside it).
        every_row: check every knowledge row by row, not only the rows changed since
            the validated parent generation (see :mod:`validation.increments`).

    Raises:
        BundleError: the manifest is missing or unreadable (nothing to validate).
    """
    manifest = read_manifest(path)
    allowed = sorted(access_classes)
    checks: list[CheckResult] = []
    segments: list[Segment] = []
    counted: dict[str, Any] = {}
    try:
        verify_files(path, manifest)
        verify_index_headers(path, manifest)
        checks.append(CheckResult(name="bundle.checksums", table="bundle", success=True))
    except BundleError as exc:
        checks.append(
            CheckResult(name="bundle.checksums", table="bundle", success=False, observed=str(exc))
        )
    if checks[-1].success:
        checks += _segment_checks(path, manifest, segments, locate)
    if all(c.success for c in checks):
        checks += _table_checks(
            path,
            manifest.model.dimension,
            manifest.model.max_seq_length,
            allowed,
            sorted(source_roles),
            segments,
            None if every_row else (manifest.parent_bundle_id, locate or sibling_locator(path)),
            counted,
        )
        if regression and all(c.success for c in checks):
            checks += regression_checks(path, regression)
    report = ValidationReport(
        bundle_id=manifest.bundle_id,
        manifest_sha256=manifest_sha256(path),
        passed=all(c.success for c in checks),
        checks=checks,
        compared_with=counted.pop("compared_with", None),
        references_of_changed_rows_only=bool(counted.pop("grown", False)),
        knowledge_rows_checked=counted or None,
    )
    if write:
        with open(os.path.join(path, VALIDATION_REPORT), "w", encoding="utf-8") as handle:
            handle.write(report.model_dump_json(indent=2))
    return report


def _segment_checks(
    path: str, manifest: Any, opened: list[Segment], locate: Locate | None
) -> list[CheckResult]:
    """The generation's segments: each one present, matching its digest and checksums,
    written by a bundle that passed validation (the own segment is checked below), and
    deletion sets that name only ids their segment holds, with no document live twice.
    Fills ``opened`` with the segments."""
    try:
        opened += open_segments(path, manifest, verify=True, locate=locate)
        for segment in opened:
            if segment.path != path:
                verify_index_headers(segment.path, segment.manifest)
        live_revisions(opened)
    except BundleError as exc:
        return [
            CheckResult(
                name="generation.segments", table="bundle", success=False, observed=str(exc)
            )
        ]
    checks = [
        CheckResult(
            name="generation.segments",
            table="bundle",
            success=True,
            observed=[s.ref.key for s in opened],
        )
    ]
    unvalidated = [
        s.ref.key
        for s in opened
        if s.ref.bundle_id != manifest.bundle_id
        and not (validation_state(s.home or s.path) or {}).get("passed")
    ]
    checks.append(
        CheckResult(
            name="generation.segments_validated",
            table="bundle",
            success=not unvalidated,
            observed=unvalidated,
        )
    )
    return checks


def _live_rows(segments: list[Segment]) -> tuple[knowledge.LiveRows, pa.Array]:
    """The generation's live documents and chunks (each segment's, less what its
    deletion set names), and the live ``doc_id␟revision`` keys."""
    doc_table = pa.concat_tables(
        _live_in(s, DOCUMENTS, ["doc_id", "revision", "text"]) for s in segments
    ).combine_chunks()
    chunk_table = pa.concat_tables(
        _live_in(s, CHUNKS, ["chunk_id", "doc_id"]) for s in segments
    ).combine_chunks()
    live = knowledge.LiveRows(
        doc_ids=doc_table["doc_id"].combine_chunks(),
        doc_lengths=pc.utf8_length(doc_table["text"]).combine_chunks(),
        texts=dict(
            zip(doc_table["doc_id"].to_pylist(), doc_table["text"].to_pylist(), strict=True)
        ),
        chunk_ids=chunk_table["chunk_id"].combine_chunks(),
        chunk_docs=chunk_table["doc_id"].combine_chunks(),
    )
    return live, _revision_keys(doc_table)


def _live_in(segment: Segment, table: str, columns: list[str]) -> pa.Table:
    """A segment's documents or chunks table (``columns`` of it), less its deletions."""
    rows = pq.read_table(os.path.join(segment.path, table), columns=columns)
    if table == DOCUMENTS:
        key, gone = "doc_id", segment.deleted_documents
    else:
        key, gone = "chunk_id", segment.deleted_chunks
    deleted = pa.array(sorted(gone), type=pa.string())
    return rows.filter(pc.invert(pc.is_in(rows[key], value_set=deleted)))


def _revision_keys(documents: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(
        documents["doc_id"], documents["revision"], "\x1f"
    ).combine_chunks()


def _baseline(
    parent_id: str | None, locate: Locate, live: knowledge.LiveRows, live_keys: pa.Array
) -> increments.Baseline | None:
    """The parent generation to compare the knowledge tables with: present, validated
    for its exact manifest, with knowledge tables. ``None``: check every row.
    ``live_keys`` are the ``doc_id␟revision`` of ``live.doc_ids``, in their order."""
    if not parent_id:
        return None
    where = locate(parent_id)
    if not knowledge_layers.has_table(where, ENTITIES):
        return None
    if not (validation_state(where) or {}).get("passed"):
        return None
    try:
        parent_manifest = read_manifest(where)
        segments = open_segments(where, parent_manifest, verify=False, locate=locate)
    except BundleError:
        return None
    parent_keys = _revision_keys(
        pa.concat_tables(_live_in(s, DOCUMENTS, ["doc_id", "revision"]) for s in segments)
    )
    chunks = pa.concat_tables(_live_in(s, CHUNKS, ["chunk_id"]) for s in segments)
    return increments.Baseline(
        bundle_id=parent_id,
        path=where,
        same_documents=pc.filter(live.doc_ids, pc.is_in(live_keys, value_set=parent_keys)),
        documents_kept=increments.contains_all(live_keys, parent_keys),
        chunk_ids=chunks["chunk_id"].combine_chunks(),
    )


def _table_checks(
    path: str,
    dimension: int,
    window: int,
    allowed: list[str],
    roles: list[str],
    segments: list[Segment],
    parent: tuple[str | None, Locate] | None,
    counted: dict[str, Any],
) -> list[CheckResult]:
    """The table suites and ANN checks; the knowledge rows compared with the parent
    generation (its id and where to find it; ``None``: every row checked)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    folders = own_parts(path)  # several when a batch build wrote several segments
    docs = pd.concat(
        [frames.documents_frame(os.path.join(path, f, DOCUMENTS)) for f in folders],
        ignore_index=True,
    )
    checks = _run_suite(
        context,
        suites.documents_suite(access_classes=allowed, source_roles=roles),
        docs,
        "documents",
    )
    chunks = pd.concat(
        [frames.chunks_frame(os.path.join(path, f, CHUNKS), docs) for f in folders],
        ignore_index=True,
    )
    checks += _run_suite(
        context,
        suites.chunks_suite(dimension=dimension, max_tokens=window, access_classes=allowed),
        chunks,
        "chunks",
    )
    failures_dir = os.path.join(path, FAILURES_DIR)
    for name in sorted(os.listdir(failures_dir)) if os.path.isdir(failures_dir) else []:
        stage = name.removesuffix(".parquet")
        frame = pd.read_parquet(os.path.join(failures_dir, name))
        checks += _run_suite(context, suites.failures_suite(stage), frame, f"failures_{stage}")
    for folder in folders:
        where = os.path.join(path, folder)
        keys, vectors = frames.chunk_vectors(os.path.join(where, CHUNKS))
        found = ann_checks(os.path.join(where, CHUNK_INDEX), keys, vectors)
        found += _partition_checks(where, chunks, keys, vectors)
        checks += [
            c.model_copy(update={"name": f"{folder}:{c.name}"}) if folder else c for c in found
        ]
    if knowledge_layers.has_table(path, ENTITIES):
        live, live_keys = _live_rows(segments)
        baseline = _baseline(*parent, live, live_keys) if parent else None
        counted["compared_with"] = baseline.bundle_id if baseline else None
        checks += _knowledge_checks(context, path, live, dimension, baseline, counted)
    return checks


def _partition_checks(
    path: str, chunks: pd.DataFrame, keys: np.ndarray, vectors: np.ndarray
) -> list[CheckResult]:
    """Each access-class HNSW partition holds exactly that class's chunks, with recall."""
    class_of_key = {
        int(k): a for k, a in zip(chunks["ann_key"], chunks["access_class"], strict=True)
    }
    checks: list[CheckResult] = []
    for access_class in ACCESS_CLASSES:
        rel = partition_index(access_class)
        if not os.path.exists(os.path.join(path, rel)):
            continue
        mask = np.array([class_of_key.get(int(k)) == access_class for k in keys], dtype=bool)
        checks += [
            c.model_copy(update={"name": c.name.replace("ann.", f"ann.chunks.{access_class}.")})
            for c in ann_checks(os.path.join(path, rel), keys[mask], vectors[mask])
        ]
    return checks


def _knowledge_table(
    path: str, table: str, id_column: str, baseline: increments.Baseline | None
) -> tuple[pa.Table, np.ndarray | None, bool]:
    """A knowledge table, per row whether it changed since the baseline's, and whether
    every id of the baseline's table is still in it."""
    rows = knowledge_layers.read_table(path, table)
    if baseline is None:
        return rows, None, False
    if not knowledge_layers.has_table(baseline.path, table):
        return rows, None, False
    if _same_files(baseline.path, path, table):  # kept as it was (hard links)
        return rows, np.zeros(rows.num_rows, dtype=bool), True
    parent = knowledge_layers.read_table(baseline.path, table)
    changed, kept = increments.compared(rows, parent, id_column)
    return rows, changed, kept


def _same_files(parent: str, path: str, table: str) -> bool:
    """Whether the generation at ``path`` holds table ``table`` in the very files of the
    one at ``parent`` (hard links of them)."""
    names = [
        n for n in knowledge_layers.table_files(table) if os.path.exists(os.path.join(path, n))
    ]
    return bool(names) and all(
        os.path.exists(os.path.join(parent, n))
        and os.path.samefile(os.path.join(parent, n), os.path.join(path, n))
        for n in names
    )


def _knowledge_checks(
    context: Any,
    path: str,
    live: knowledge.LiveRows,
    dimension: int,
    baseline: increments.Baseline | None,
    counted: dict[str, Any],
) -> list[CheckResult]:
    """The knowledge suites, on the rows each must see (:mod:`validation.increments`);
    ``counted`` receives the rows checked and held per table."""
    join = os.path.join
    entities, entities_changed, entities_kept = _knowledge_table(
        path, ENTITIES, "entity_id", baseline
    )
    mentions, mentions_changed, _ = _knowledge_table(path, MENTIONS, "mention_id", baseline)
    relations, relations_changed, relations_kept = _knowledge_table(
        path, RELATIONS, "relation_id", baseline
    )
    communities, communities_changed, communities_kept = _knowledge_table(
        path, COMMUNITIES, "community_id", baseline
    )
    # Nothing a row can name is gone since the parent (documents with their revisions,
    # chunks, entities, relations): the parent's rows kept unchanged still name what
    # exists, so references are computed on the changed rows only.
    grown = bool(
        baseline is not None
        and baseline.documents_kept
        and baseline.chunk_ids is not None
        and entities_kept
        and relations_kept
        and increments.contains_all(live.chunk_ids, baseline.chunk_ids)
    )
    counted["grown"] = grown
    entity_ids = entities["entity_id"].combine_chunks()
    frames: dict[str, tuple[pd.DataFrame, int]] = {
        "entities": (
            knowledge.entities_frame(entities, live, entities_changed, grown=grown),
            entities.num_rows,
        )
    }
    frames["mentions"] = (
        knowledge.mentions_frame(
            mentions,
            live,
            entity_ids,
            mentions_changed,
            baseline.same_documents if baseline else None,
            grown=grown,
        ),
        mentions.num_rows,
    )
    frames["relations"] = (
        knowledge.relations_frame(
            relations, live, entity_ids, dimension, relations_changed, grown=grown
        ),
        relations.num_rows,
    )
    frames["communities"] = (
        knowledge.communities_frame(
            communities,
            live,
            entity_ids,
            relations["relation_id"].combine_chunks(),
            dimension,
            communities_changed,
            grown=grown and communities_kept,
        ),
        communities.num_rows,
    )
    suites_of = {
        "entities": knowledge.entities_suite,
        "mentions": knowledge.mentions_suite,
        "relations": knowledge.relations_suite,
        "communities": knowledge.communities_suite,
    }
    checks: list[CheckResult] = []
    for name, (frame, total) in frames.items():
        checks += _run_suite(context, suites_of[name](), frame, name)
        counted[name] = [len(frame), total]
    for table, index in ((RELATIONS, RELATION_INDEX), (COMMUNITIES, COMMUNITY_INDEX)):
        keys, vectors = knowledge.surface_vectors(
            knowledge_layers.read_table(path, table, ["ann_key", "embedding"])
        )
        if len(keys):
            surface = [
                c.model_copy(update={"name": c.name.replace("ann.", f"ann.{table.split('.')[0]}.")})
                for c in ann_checks(join(path, index), keys, vectors)
            ]
            checks += surface
    return checks
