"""Communities of an earlier clustering cut to what is still live, on Arrow tables.

An incremental refresh keeps the parent's communities until enough of the entity graph
changed (``KnowledgeConfig.recluster_share``). Members, relations and chunks that are
gone are dropped from each; a community left with fewer than
``config.min_community_size`` members, or with no evidence chunk, is dropped, and its
children point to its nearest kept ancestor. Titles and reports stay as they were
written (their vectors are reused); the next clustering replaces them.

The work is column-wise: a SciFact generation has ~11k communities whose id lists hold
hundreds of thousands of ids, and a refresh must not turn them into Python objects.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.config import KnowledgeConfig


def _flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def kept_items(lists: pa.Array | pa.ChunkedArray, live: pa.Array) -> pa.ListArray:
    """Each row's list with only the items in ``live``, in their order."""
    lists = _flat(lists)
    values = pc.list_flatten(lists)
    keep = pc.is_in(values, value_set=live)
    owners = pc.filter(pc.list_parent_indices(lists), keep).to_numpy()
    counts = np.bincount(owners, minlength=len(lists)) if len(lists) else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(
        pa.array(offsets, type=pa.int32()), pc.filter(values, keep), type=lists.type
    )


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, table.schema.field(index), values)


def cut_communities(
    communities: pa.Table,
    *,
    entity_ids: pa.Array,
    relation_ids: pa.Array,
    chunk_ids: pa.Array,
    config: KnowledgeConfig,
) -> pa.Table:
    """The communities (rows of ``schemas.COMMUNITY_SCHEMA``) cut to the live entities,
    relations and chunks, ordered by level, then id.

    Example:
        >>> kept = cut_communities(parent, entity_ids=e, relation_ids=r, chunk_ids=c,
        ...                        config=KnowledgeConfig())
    """
    members = kept_items(communities["entity_ids"], entity_ids)
    evidence = kept_items(communities["evidence_chunk_ids"], chunk_ids)
    sizes = pc.list_value_length(members)
    cut = _set(communities, "entity_ids", members)
    cut = _set(cut, "evidence_chunk_ids", evidence)
    cut = _set(cut, "size", pc.cast(sizes, cut.schema.field("size").type))
    cut = _set(cut, "relation_ids", kept_items(communities["relation_ids"], relation_ids))
    cut = _set(cut, "chunk_ids", kept_items(communities["chunk_ids"], chunk_ids))
    keep = pc.and_(
        pc.greater_equal(sizes, config.min_community_size),
        pc.greater(pc.list_value_length(evidence), 0),
    )
    cut = cut.filter(keep)
    parents = dict(
        zip(
            communities["community_id"].to_pylist(),
            communities["parent_id"].to_pylist(),
            strict=True,
        )
    )
    kept = set(cut["community_id"].to_pylist())

    def ancestor(parent: str | None) -> str | None:
        while parent is not None and parent not in kept:
            parent = parents.get(parent)
        return parent

    moved = pa.array([ancestor(p) for p in cut["parent_id"].to_pylist()], type=pa.string())
    cut = _set(cut, "parent_id", moved)
    return cut.sort_by([("level", "ascending"), ("community_id", "ascending")])
