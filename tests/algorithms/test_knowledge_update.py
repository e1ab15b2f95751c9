"""The incremental knowledge update's pure parts: linking new mentions to existing
entities (cutting kept communities to what is live: tests/transforms/test_community_cut.py)."""

from hypothesis import given
from hypothesis import strategies as st

from algorithms.canonicalize import (
    KnownUnit,
    MentionRef,
    canonicalize,
    link_mentions,
    refreshed_entity,
    type_class,
    updated_entity,
)
from algorithms.normalize import normalize_surface


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


_SURFACES = ["UPI", "U.P.I.", "Unified Payments Interface", "UPI  Lite", "upi"]


@given(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(_SURFACES)), min_size=1, max_size=30),
    st.sets(st.integers(0, 5)),
    st.lists(st.tuples(st.integers(6, 8), st.sampled_from(_SURFACES)), max_size=10),
)
def test_an_entity_updated_by_its_change_is_the_one_refreshed_from_every_member(
    members, dropped, gained
):
    """A refresh drops whole documents: the mentions lost are every mention of their
    chunks. Updating the entity's row by what it gained and lost gives what recomputing
    it from every live mention gives (or nothing, when none is left)."""

    def mention(i: int, doc: int, text: str) -> MentionRef:
        return MentionRef(f"m{i:03d}", text, "ORG", normalize_surface(text), f"d{doc}-c{i % 2}")

    old = [mention(i, doc, text) for i, (doc, text) in enumerate(members)]
    new = [mention(100 + i, doc, text) for i, (doc, text) in enumerate(gained)]
    entity = refreshed_entity(canonicalize(old).entities[0]._replace(entity_id="e1"), old)
    lost = [m for m in old if int(m.chunk_id[1]) in dropped]
    live = [m for m in old if m not in lost] + new
    updated = updated_entity(entity, new, lost)
    if not live:
        assert updated is None
    else:
        assert updated == refreshed_entity(entity, live)
