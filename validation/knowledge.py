"""Suites and frames for the knowledge tables: mentions, entities, relations, communities.

Referential integrity is expressed as derived boolean columns (every mention's
chunk and entity exist, every relation's entities, chunks and sentences exist,
every community's entities, relations, chunks and parent exist), so each is one
Great Expectations check that names what broke.
"""

from collections.abc import Iterable
from typing import Any

import great_expectations as gx
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from great_expectations import expectations as gxe

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


def _all_in(values: Iterable[Any], known: set[str]) -> bool:
    return all(v in known for v in values)


def _flags_suite(name: str, id_column: str, flags: Iterable[str]) -> gx.ExpectationSuite:
    suite = gx.ExpectationSuite(name=name)
    suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=id_column))
    suite.add_expectation(gxe.ExpectColumnValuesToBeUnique(column=id_column))
    suite.add_expectation(gxe.ExpectColumnValuesToMatchRegex(column=id_column, regex=_SHA256))
    for flag in flags:
        suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column=flag, value_set=[True]))
    return suite


def mentions_frame(
    path: str, documents: pd.DataFrame, chunks: pd.DataFrame, entity_ids: set[str]
) -> pd.DataFrame:
    """``mentions.parquet`` with ``chunk_found``, ``span_text_matches``, ``entity_found``."""
    frame = pq.read_table(path).to_pandas()
    texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
    chunk_doc = dict(zip(chunks["chunk_id"], chunks["doc_id"], strict=True))
    frame["chunk_found"] = [
        chunk_doc.get(c) == d for c, d in zip(frame["chunk_id"], frame["doc_id"], strict=True)
    ]
    frame["span_text_matches"] = [
        texts.get(d, "")[s:e] == t
        for d, s, e, t in zip(
            frame["doc_id"], frame["start"], frame["end"], frame["text"], strict=True
        )
    ]
    frame["entity_found"] = frame["entity_id"].isin(entity_ids)
    return frame


def mentions_suite() -> gx.ExpectationSuite:
    """Mentions: unique ids, exact spans, existing chunks and entities."""
    suite = _flags_suite(
        "mentions", "mention_id", ("chunk_found", "span_text_matches", "entity_found")
    )
    suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column="norm"))
    return suite


def entities_frame(path: str, chunk_ids: set[str]) -> pd.DataFrame:
    """``entities.parquet`` with ``has_aliases``, ``alias_counts_match``, ``chunks_found``."""
    frame = pq.read_table(path).to_pandas()
    frame["has_aliases"] = [len(a) > 0 for a in frame["aliases"]]
    frame["alias_counts_match"] = [
        len(a) == len(c) and int(sum(c)) == n
        for a, c, n in zip(
            frame["aliases"], frame["alias_counts"], frame["mention_count"], strict=True
        )
    ]
    frame["chunks_found"] = [_all_in(ids, chunk_ids) for ids in frame["chunk_ids"]]
    return frame.drop(columns=["aliases", "alias_counts", "chunk_ids"])


def entities_suite() -> gx.ExpectationSuite:
    """Entities: unique ids, a name, aliases that add up to the mention count, real chunks."""
    suite = _flags_suite(
        "entities", "entity_id", ("has_aliases", "alias_counts_match", "chunks_found")
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


def relations_frame(
    path: str, documents: pd.DataFrame, chunk_ids: set[str], entity_ids: set[str], dimension: int
) -> pd.DataFrame:
    """``relations.parquet`` with integrity flags and ``embedding_ok``."""
    frame = pq.read_table(path).to_pandas()
    lengths = dict(zip(documents["doc_id"], documents["text"].str.len(), strict=True))
    frame["subject_found"] = frame["subject_id"].isin(entity_ids)
    frame["object_found"] = [_missing(o) or o in entity_ids for o in frame["object_id"]]
    frame["chunks_found"] = [len(ids) > 0 and _all_in(ids, chunk_ids) for ids in frame["chunk_ids"]]
    frame["sentences_in_bounds"] = [
        len(ds) > 0
        and all(
            d in lengths and 0 <= s < e <= lengths[d] for d, s, e in zip(ds, ss, es, strict=True)
        )
        for ds, ss, es in zip(
            frame["sentence_doc_ids"], frame["sentence_starts"], frame["sentence_ends"], strict=True
        )
    ]
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
    path: str,
    chunk_ids: set[str],
    entity_ids: set[str],
    relation_ids: set[str],
    dimension: int,
) -> pd.DataFrame:
    """``communities.parquet`` with integrity flags, ``size_matches`` and ``embedding_ok``."""
    frame = pq.read_table(path).to_pandas()
    own = set(frame["community_id"])
    frame["entities_found"] = [_all_in(ids, entity_ids) for ids in frame["entity_ids"]]
    frame["relations_found"] = [_all_in(ids, relation_ids) for ids in frame["relation_ids"]]
    frame["chunks_found"] = [
        _all_in(a, chunk_ids) and _all_in(b, chunk_ids)
        for a, b in zip(frame["chunk_ids"], frame["evidence_chunk_ids"], strict=True)
    ]
    frame["parent_found"] = [_missing(p) or p in own for p in frame["parent_id"]]
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


def surface_vectors(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``(ann_key, embedding)`` of the embedded rows of a relations/communities table."""
    table = pq.read_table(path, columns=["ann_key", "embedding"]).to_pandas()
    table = table[table["embedding"].notna()]
    keys = table["ann_key"].to_numpy().astype(np.uint64)
    if table.empty:
        return keys, np.zeros((0, 0), dtype=np.float32)
    return keys, np.stack(table["embedding"].to_list()).astype(np.float32)
