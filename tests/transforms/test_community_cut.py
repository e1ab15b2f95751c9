"""Communities of an earlier clustering cut to what is still live, column-wise."""

import pyarrow as pa
import pytest

from algorithms.communities import detect_communities
from schemas import COMMUNITY_SCHEMA, Community
from store.config import KnowledgeConfig
from tests.algorithms.test_knowledge_graph import two_cliques
from transforms.community_cut import cut_communities, kept_items
from transforms.write import records_table


def kept_communities(communities, *, entity_ids, relation_ids, chunk_ids, config):
    """``cut_communities`` on records: the table in, the rows back as ``Community``."""
    table = cut_communities(
        records_table(communities, COMMUNITY_SCHEMA),
        entity_ids=pa.array(sorted(entity_ids), pa.string()),
        relation_ids=pa.array(sorted(relation_ids), pa.string()),
        chunk_ids=pa.array(sorted(chunk_ids), pa.string()),
        config=config,
    )
    assert table.schema == COMMUNITY_SCHEMA
    return [Community(**row) for row in table.to_pylist()]


def test_kept_items_keep_order_and_empty_lists():
    lists = pa.array([["a", "x", "b"], [], ["x"], ["b", "a"]], pa.list_(pa.string()))
    kept = kept_items(lists, pa.array(["a", "b"]))
    assert kept.to_pylist() == [["a", "b"], [], [], ["b", "a"]]
    assert kept_items(lists.slice(1, 2), pa.array(["x"])).to_pylist() == [[], ["x"]]


@pytest.fixture()
def communities():
    names = {n: n.upper() for n in ("a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4")}
    return detect_communities(two_cliques(), names, config=KnowledgeConfig(), seed=17)


def test_kept_communities_drop_what_is_gone_and_keep_their_reports(communities):
    everything = {
        "entity_ids": {e for c in communities for e in c.entity_ids},
        "relation_ids": {r for c in communities for r in c.relation_ids},
        "chunk_ids": {x for c in communities for x in c.evidence_chunk_ids},
    }
    assert kept_communities(communities, **everything, config=KnowledgeConfig()) == communities
    a_side = next(c for c in communities if c.level == 0 and "a1" in c.entity_ids)
    gone_relation = a_side.relation_ids[0]
    kept = kept_communities(
        communities,
        entity_ids=everything["entity_ids"] - {"a4"},
        relation_ids=everything["relation_ids"] - {gone_relation},
        chunk_ids=everything["chunk_ids"] - {"chunk-a4"},
        config=KnowledgeConfig(),
    )
    cut = next(c for c in kept if c.community_id == a_side.community_id)
    assert cut.entity_ids == ["a1", "a2", "a3"] and cut.size == 3
    assert gone_relation not in cut.relation_ids
    assert "chunk-a4" not in cut.chunk_ids + cut.evidence_chunk_ids
    assert cut.report == a_side.report  # the report (and so its vector) is reused


def test_a_community_below_the_minimum_size_goes_and_its_children_move_up(communities):
    a_side = next(c for c in communities if c.level == 0 and "a1" in c.entity_ids)
    b_side = next(c for c in communities if c.level == 0 and "b1" in c.entity_ids)
    # A three-level chain: a_side under b_side (made level 1) under a level-2 root.
    root = a_side._replace(community_id="root", level=2, parent_id=None)
    middle = b_side._replace(level=1, parent_id="root")
    child = a_side._replace(parent_id=middle.community_id)
    chain = [child, middle, root]
    kept = kept_communities(
        chain,
        entity_ids={e for c in chain for e in c.entity_ids} - {"b2", "b3"},
        relation_ids={r for c in chain for r in c.relation_ids},
        chunk_ids={x for c in chain for x in c.evidence_chunk_ids},
        config=KnowledgeConfig(),
    )
    assert [(c.community_id, c.parent_id) for c in kept] == [
        (child.community_id, "root"),
        ("root", None),
    ]
