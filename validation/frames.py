"""Pandas frames the suites run on: the tables plus derived columns that make
cross-table and span invariants expressible as column expectations."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from store.bundles import embedding_matrix


def documents_frame(path: str) -> pd.DataFrame:
    """``documents.parquet`` with ``text_length``."""
    frame = pq.read_table(path).to_pandas()
    frame["text_length"] = frame["text"].str.len()
    return frame


def chunks_frame(path: str, documents: pd.DataFrame) -> pd.DataFrame:
    """``chunks.parquet`` with span, reference and vector checks as columns.

    Derived columns: ``doc_found`` (the chunk's document exists with the same
    revision), ``doc_length``, ``span_text_matches`` (``text`` equals the
    document's ``[start, end)``), ``pages_ordered`` (no pages, or
    ``1 <= page_start <= page_end``), ``embedding_dim``, ``embedding_norm`` and
    ``embedding_finite``.
    """
    table = pq.read_table(path)
    frame = table.drop_columns(["embedding"]).to_pandas()
    texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
    revisions = dict(zip(documents["doc_id"], documents["revision"], strict=True))
    frame["doc_found"] = [
        revisions.get(d) == r for d, r in zip(frame["doc_id"], frame["revision"], strict=True)
    ]
    frame["doc_length"] = [len(texts.get(d, "")) for d in frame["doc_id"]]
    frame["span_text_matches"] = [
        texts.get(d, "")[s:e] == t
        for d, s, e, t in zip(
            frame["doc_id"], frame["start"], frame["end"], frame["text"], strict=True
        )
    ]
    if {"page_start", "page_end"} <= set(frame.columns):
        first, last = frame["page_start"], frame["page_end"]
        frame["pages_ordered"] = [
            (pd.isna(a) and pd.isna(b)) or (not pd.isna(a) and not pd.isna(b) and 1 <= a <= b)
            for a, b in zip(first, last, strict=True)
        ]
    else:
        frame["pages_ordered"] = True
    vectors = embedding_matrix(table.column("embedding"))
    frame["embedding_dim"] = vectors.shape[1]
    frame["embedding_norm"] = np.linalg.norm(vectors, axis=1)
    frame["embedding_finite"] = np.isfinite(vectors).all(axis=1)
    return frame


def chunk_vectors(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``(ann_key, embedding)`` arrays from ``chunks.parquet``."""
    table = pq.read_table(path, columns=["ann_key", "embedding"])
    vectors = embedding_matrix(table.column("embedding"))
    keys = table.column("ann_key").to_numpy()
    return keys.astype(np.uint64), vectors.astype(np.float32)
