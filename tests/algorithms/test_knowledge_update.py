"""The incremental knowledge update's pure parts: linking new mentions to existing
entities, and cutting kept communities to what is still live."""

import pytest

from algorithms.canonicalize import (
    KnownUnit,
    MentionRef,
    canonicalize,
    link_mentions,
    refreshed_entity,
    type_class,
)
from algorithms.communities import detect_communities, kept_communities
from algorithms.normalize import normalize_surface
from store.config import KnowledgeConfig
from tests.algorithms.test_knowledge_graph import two_cliques


def refs(*surfaces: tuple[str, str], start: int = 0) -> list[MentionRef]:
    return [
        MentionRef(f"m{start + i:03d}", text, label, normalize_surface(text), f"c{i % 3}")
        for i, (text, label) in enumerate(surfaces)
    ]


def known_of(mentions: list[MentionRef]) -> dict[tuple[str, str], KnownUnit]:
    """The units of a full canonicalization of ``mentions``, as a refresh reads them."""
    result = canonicalize(mentions)
    counts: dict[tuple[str, str], int] = {}
    owner: dict[tuple[str, str], str] = {}
    for m in mentions:
        unit = (m.norm, type_class(m.label))
        counts[unit] = counts.get(unit, 0) + 1
        owner[unit] = result.assignment[m.mention_id]
    return {unit: KnownUnit(owner[unit], n) for unit, n in counts.items()}


OLD = refs(
    ("Reserve Bank of India", "ORG"),
    ("Reserve Bank of India", "ORG"),
    ("micro RNA", "NOUN_CHUNK"),
    ("Paris", "GPE"),
    ("Paris", "GPE"),
    ("Paris", "NOUN_CHUNK"),
    ("Jordan", "PERSON"),
)


def test_new_mentions_join_the_entity_a_full_canonicalization_would_give_them():
    new = refs(
        ("Reserve Bank of India", "ORG"),  # same unit
        ("microRNA", "NOUN_CHUNK"),  # same squashed form, same class
        ("paris", "NOUN_CHUNK"),  # a thing joins the larger typed entity of its form
        ("Jordan", "GPE"),  # a place never joins a person
        ("Oolong tea", "NOUN_CHUNK"),  # unknown: a new entity
        ("oolong tea", "NOUN_CHUNK"),
        start=100,
    )
    old = canonicalize(OLD)
    linked = link_mentions(known_of(OLD), new)
    whole = canonicalize([*OLD, *new])
    # Every new mention lands where canonicalizing old and new together puts it.
    for m in new:
        assert linked.assignment[m.mention_id] == whole.assignment[m.mention_id], m.text
    old_ids = {e.entity_id for e in old.entities}
    assert {linked.assignment[m.mention_id] for m in new[:3]} <= old_ids
    assert [e.aliases for e in linked.entities] in (
        [["Jordan"], ["Oolong tea", "oolong tea"]],
        [["Oolong tea", "oolong tea"], ["Jordan"]],
    )
    assert not {e.entity_id for e in linked.entities} & old_ids


def test_a_new_entity_whose_id_exists_joins_the_existing_one():
    # "Tea" (thing) is known; a new mention "tea" of the same unit links by unit, and a
    # new cluster that would be given the same id is folded into the existing entity.
    old = refs(("Tea", "NOUN_CHUNK"))
    known = known_of(old)
    linked = link_mentions(known, refs(("TEA", "NOUN_CHUNK"), start=50))
    assert linked.entities == []
    assert linked.assignment == {"m050": canonicalize(old).entities[0].entity_id}


def test_a_refreshed_entity_keeps_its_id_and_name_and_recounts_its_mentions():
    entity = canonicalize(OLD[:2]).entities[0]
    members = refs(("Reserve Bank of India", "ORG"), ("RBI's bank", "ORG"), start=10)
    refreshed = refreshed_entity(entity, members)
    assert (refreshed.entity_id, refreshed.name) == (entity.entity_id, entity.name)
    assert refreshed.mention_count == 2
    assert refreshed.aliases == ["Reserve Bank of India", "RBI's bank"]
    assert refreshed.alias_counts == [1, 1]
    assert refreshed.chunk_ids == ["c0", "c1"]


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
