"""Suites and frames for the knowledge tables: mentions, entities, relations, communities.

Referential integrity is expressed as derived boolean columns (every mention's
chunk and entity exist, every relation's entities, chunks and sentences exist,
every community's entities, relations, chunks and parent exist), so each is one
Great Expectations check that names what broke.

The reference flags are computed on every row with Arrow compute; the suites see the
rows changed since the parent generation plus every row a reference or uniqueness
check fails (:mod:`validation.increments`), or every row when there is no parent.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import great_expectations as gx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from great_expectations import expectations as gxe

from algorithms.normalize import normalize_surface
from validation import increments

CATEGORIES = (
    "limit",
    "definition",
    "process",
    "compliance",
    "temporal",
    "part-of",
    "attribute",
    "co-occurrence",
)
_SHA256 = r"^[0-9a-f]{64}$"


def _missing(value: Any) -> bool:
    """None, or pandas' missing marker for a string column (NaN / NA)."""
    return value is None or (not isinstance(value, (list, np.ndarray)) and bool(pd.isna(value)))


def _flags_suite(name: str, id_column: str, flags: Iterable[str]) -> gx.ExpectationSuite:
    suite = gx.ExpectationSuite(name=name)
    suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=id_column))
    suite.add_expectation(gxe.ExpectColumnValuesToBeUnique(column=id_column))
    suite.add_expectation(gxe.ExpectColumnValuesToMatchRegex(column=id_column, regex=_SHA256))
    for flag in flags:
        suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column=flag, value_set=[True]))
    return suite


@dataclass(frozen=True)
class LiveRows:
    """The generation's live documents and chunks, as the reference checks need them."""

    doc_ids: pa.Array
    doc_lengths: pa.Array
    """Each live document's text length in code points, aligned with ``doc_ids``."""
    texts: dict[str, str]
    chunk_ids: pa.Array
    chunk_docs: pa.Array
    """Each live chunk's document id, aligned with ``chunk_ids``."""


def _checked_frame(
    table: pa.Table,
    id_column: str,
    changed: np.ndarray | None,
    references: dict[str, np.ndarray],
) -> pd.DataFrame:
    """The rows the suite must see, with their reference flags as columns.

    Those are the rows ``changed`` since the parent (every row when ``None``), every row
    whose id is duplicated, and every row a reference check (done here on all rows)
    fails; the other rows equal rows the parent's gate passed, with references intact.
    """
    rows = np.ones(table.num_rows, dtype=bool) if changed is None else changed.copy()
    rows |= increments.duplicated(table[id_column])
    for flags in references.values():
        rows |= ~flags
    picked = np.flatnonzero(rows)
    frame = table.take(picked).to_pandas()
    for name, flags in references.items():
        frame[name] = flags[picked]
    return frame


def _candidates(table: pa.Table, id_column: str, changed: np.ndarray) -> pa.Table:
    """The rows changed since the parent, and every row whose id is duplicated: when
    nothing a row can name was taken away since the parent (``grown``), the only rows
    whose references can be broken, so the only rows whose references are computed."""
    return table.take(np.flatnonzero(changed | increments.duplicated(table[id_column])))


def mentions_frame(
    table: pa.Table,
    live: LiveRows,
    entity_ids: pa.Array,
    changed: np.ndarray | None = None,
    same_documents: pa.Array | None = None,
    *,
    grown: bool = False,
) -> pd.DataFrame:
    """The mentions to check, with ``chunk_found``, ``span_text_matches``, ``entity_found``.

    Args:
        changed: per row, changed since the parent (``None``: check every row).
        same_documents: documents live in the parent with the same revision; an
            unchanged mention of any other document is checked again.
        grown: no chunk, entity or document revision live in the parent is gone: the
            references of the unchanged rows are not computed again.
    """
    if grown and changed is not None:
        return mentions_frame(_candidates(table, "mention_id", changed), live, entity_ids)
    chunk_doc = pc.take(live.chunk_docs, pc.index_in(table["chunk_id"], value_set=live.chunk_ids))
    if changed is not None and same_documents is not None:
        changed = changed | ~increments.is_in(table["doc_id"], same_documents)
    frame = _checked_frame(
        table,
        "mention_id",
        changed,
        {
            "chunk_found": increments.as_flags(pc.equal(chunk_doc, table["doc_id"])),
            "entity_found": increments.is_in(table["entity_id"], entity_ids),
        },
    )
    texts = live.texts
    frame["span_text_matches"] = [
        texts.get(d, "")[s:e] == t
        for d, s, e, t in zip(
            frame["doc_id"], frame["start"], frame["end"], frame["text"], strict=True
        )
    ]
    return frame


def mentions_suite() -> gx.ExpectationSuite:
    """Mentions: unique ids, exact spans, existing chunks and entities."""
    suite = _flags_suite(
        "mentions", "mention_id", ("chunk_found", "span_text_matches", "entity_found")
    )
    suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column="norm"))
    return suite


def entities_frame(
    table: pa.Table, live: LiveRows, changed: np.ndarray | None = None, *, grown: bool = False
) -> pd.DataFrame:
    """The entities to check, with ``has_aliases``, ``alias_counts_match``,
    ``alias_norms_match`` (each alias's stored normalized form is its
    ``normalize_surface``), ``chunks_found`` (``changed`` and ``grown`` as in
    :func:`mentions_frame`)."""
    if grown and changed is not None:
        return entities_frame(_candidates(table, "entity_id", changed), live)
    frame = _checked_frame(
        table,
        "entity_id",
        changed,
        {"chunks_found": increments.all_in(table["chunk_ids"], live.chunk_ids)},
    )
    frame["has_aliases"] = [len(a) > 0 for a in frame["aliases"]]
    frame["alias_counts_match"] = [
        len(a) == len(c) and int(sum(c)) == n
        for a, c, n in zip(
            frame["aliases"], frame["alias_counts"], frame["mention_count"], strict=True
        )
    ]
    if "alias_norms" in frame:  # tables written before the column have none to check
        frame["alias_norms_match"] = [
            len(a) == len(n) and all(normalize_surface(x) == y for x, y in zip(a, n, strict=True))
            for a, n in zip(frame["aliases"], frame["alias_norms"], strict=True)
        ]
        frame = frame.drop(columns=["alias_norms"])
    else:
        frame["alias_norms_match"] = True
    return frame.drop(columns=["aliases", "alias_counts", "chunk_ids"])


def entities_suite() -> gx.ExpectationSuite:
    """Entities: unique ids, a name, aliases that add up to the mention count, real chunks."""
    suite = _flags_suite(
        "entities",
        "entity_id",
        ("has_aliases", "alias_counts_match", "alias_norms_match", "chunks_found"),
    )
    suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column="name"))
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="mention_count", min_value=1))
    return suite


def _vector_columns(frame: pd.DataFrame, dimension: int) -> pd.DataFrame:
    def ok(v: Any) -> bool:
        if _missing(v):
            return True
        vector = np.asarray(v, dtype=np.float64)
        finite = bool(np.isfinite(vector).all())
        return bool(len(vector) == dimension and finite and abs(np.linalg.norm(vector) - 1) < 1e-3)

    frame["embedding_ok"] = [ok(v) for v in frame["embedding"]]
    return frame.drop(columns=["embedding"])


def _sentences_in_bounds(table: pa.Table, live: LiveRows) -> np.ndarray:
    """Per relation: at least one sentence, and every sentence ``[start, end)`` a
    non-empty range inside a live document."""
    docs = increments.flat(table["sentence_doc_ids"])
    starts = increments.flat(table["sentence_starts"])
    ends = increments.flat(table["sentence_ends"])
    counts = pc.list_value_length(docs).to_numpy()
    ok = (
        (counts > 0)
        & (counts == pc.list_value_length(starts).to_numpy())
        & (counts == pc.list_value_length(ends).to_numpy())
    )
    rows = np.flatnonzero(ok)
    docs, starts, ends = docs.take(rows), starts.take(rows), ends.take(rows)
    length = pc.take(live.doc_lengths, pc.index_in(pc.list_flatten(docs), value_set=live.doc_ids))
    first, last = pc.list_flatten(starts), pc.list_flatten(ends)
    inside = increments.as_flags(
        pc.and_(
            pc.and_(pc.greater_equal(first, 0), pc.less(first, last)),
            pc.less_equal(last, length),
        )
    )
    owners = pc.list_parent_indices(docs).to_numpy()
    ok[rows[np.unique(owners[~inside])]] = False
    return ok


def relations_frame(
    table: pa.Table,
    live: LiveRows,
    entity_ids: pa.Array,
    dimension: int,
    changed: np.ndarray | None = None,
    *,
    grown: bool = False,
) -> pd.DataFrame:
    """The relations to check, with integrity flags and ``embedding_ok`` (``changed``
    and ``grown`` as in :func:`mentions_frame`)."""
    if grown and changed is not None:
        rows = _candidates(table, "relation_id", changed)
        return relations_frame(rows, live, entity_ids, dimension)
    chunk_ids = table["chunk_ids"]
    frame = _checked_frame(
        table,
        "relation_id",
        changed,
        {
            "subject_found": increments.is_in(table["subject_id"], entity_ids),
            "object_found": increments.as_flags(pc.is_null(table["object_id"]))
            | increments.is_in(table["object_id"], entity_ids),
            "chunks_found": (pc.list_value_length(increments.flat(chunk_ids)).to_numpy() > 0)
            & increments.all_in(chunk_ids, live.chunk_ids),
            "sentences_in_bounds": _sentences_in_bounds(table, live),
        },
    )
    frame = frame.drop(
        columns=["chunk_ids", "sentence_doc_ids", "sentence_starts", "sentence_ends"]
    )
    return _vector_columns(frame, dimension)


def relations_suite() -> gx.ExpectationSuite:
    """Relations: unique ids, existing entities/chunks/sentences, categories, confidences."""
    suite = _flags_suite(
        "relations",
        "relation_id",
        ("subject_found", "object_found", "chunks_found", "sentences_in_bounds", "embedding_ok"),
    )
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeInSet(column="category", value_set=list(CATEGORIES))
    )
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeBetween(column="confidence", min_value=0, max_value=1)
    )
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="support", min_value=1))
    return suite


def communities_frame(
    table: pa.Table,
    live: LiveRows,
    entity_ids: pa.Array,
    relation_ids: pa.Array,
    dimension: int,
    changed: np.ndarray | None = None,
    *,
    grown: bool = False,
    community_ids: pa.Array | None = None,
) -> pd.DataFrame:
    """The communities to check, with integrity flags, ``size_matches`` and
    ``embedding_ok`` (``changed`` and ``grown`` as in :func:`mentions_frame`, ``grown``
    also meaning no community of the parent's is gone; ``community_ids``: every
    community of the generation, when ``table`` holds some of them)."""
    own = increments.flat(table["community_id"]) if community_ids is None else community_ids
    if grown and changed is not None:
        rows = _candidates(table, "community_id", changed)
        return communities_frame(rows, live, entity_ids, relation_ids, dimension, community_ids=own)
    frame = _checked_frame(
        table,
        "community_id",
        changed,
        {
            "entities_found": increments.all_in(table["entity_ids"], entity_ids),
            "relations_found": increments.all_in(table["relation_ids"], relation_ids),
            "chunks_found": increments.all_in(table["chunk_ids"], live.chunk_ids)
            & increments.all_in(table["evidence_chunk_ids"], live.chunk_ids),
            "parent_found": increments.as_flags(pc.is_null(table["parent_id"]))
            | increments.is_in(table["parent_id"], own),
        },
    )
    frame["size_matches"] = [
        n == len(ids) for n, ids in zip(frame["size"], frame["entity_ids"], strict=True)
    ]
    frame = frame.drop(columns=["entity_ids", "relation_ids", "chunk_ids", "evidence_chunk_ids"])
    return _vector_columns(frame, dimension)


def communities_suite() -> gx.ExpectationSuite:
    """Communities: unique ids, existing members/relations/chunks/parents, a report."""
    suite = _flags_suite(
        "communities",
        "community_id",
        (
            "entities_found",
            "relations_found",
            "chunks_found",
            "parent_found",
            "size_matches",
            "embedding_ok",
        ),
    )
    suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column="report"))
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="level", min_value=0))
    return suite


def surface_vectors(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``(ann_key, embedding)`` of the embedded rows of a relations/communities table
    (its ``ann_key`` and ``embedding`` columns)."""
    table = rows.select(["ann_key", "embedding"]).to_pandas()
    table = table[table["embedding"].notna()]
    keys = table["ann_key"].to_numpy().astype(np.uint64)
    if table.empty:
        return keys, np.zeros((0, 0), dtype=np.float32)
    return keys, np.stack(table["embedding"].to_list()).astype(np.float32)
