"""Canonicalization by key: the entities and assignment of
:func:`algorithms.canonicalize.canonicalize`, computed in steps that each hold one key's
share of the mentions (what ``transforms.canonicalize`` runs on a runner's workers).

1. *Blocks* (key: a mention's squashed form, ``squashed(norm)``). A block merges its own
   units by the unit rules (:func:`block_of`); its first unit is the one merges across
   blocks join, and its most frequent unit's form is its *head*.
2. *Edges* between blocks: an acronym's block and its dominant expansion's
   (:func:`dominant_expansion`, key: the short form), and spelling variants among heads
   (:func:`head_contexts`, :func:`variant_edges`, key: a head word's context).
3. *Components*: the edges alone meet on one worker (one per merge, far fewer than the
   mentions) and give each block key in one its component's smallest key
   (:func:`components`).
4. *Clusters* (key: :func:`cluster_key`): a block's clusters meet those of its component
   and become one entity each (:func:`cluster_entity`); clusters whose entities got the
   same id meet by it and are told apart by their first unit (:func:`distinct_ids`).

:func:`canonicalize_by_key` runs the four steps in one process: what the tests hold against
the whole-corpus algorithm.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

from algorithms.canonicalize import (
    Canonicalized,
    Embed,
    UnionFind,
    context_pairs,
    dominant_expansions,
    entity_of,
    merge_compatible,
    similar,
    type_class,
    variant_contexts,
)
from algorithms.normalize import squashed
from schemas import Entity, stable_id

Unit = tuple[str, str]
"""``(normalized form, type class)``."""
Context = tuple[int, int, str, str]
"""``(word count, position, words before, words after)`` of a candidate word."""


class Cluster(NamedTuple):
    """Units of one block that the unit rules merged, with their mentions.

    ``members`` are mention rows (``MentionRef`` or ``schemas.Mention``: anything with
    ``mention_id``, ``text``, ``label``, ``norm`` and ``chunk_id``)."""

    units: list[Unit]
    counts: list[int]
    members: list[Any]
    first: bool


class Block(NamedTuple):
    """The mentions of one squashed form, as clusters; ``head`` is the form of its most
    frequent unit (its spelling-variant candidate)."""

    key: str
    head: str
    clusters: list[Cluster]


def block_of(key: str, mentions: Iterable[Any]) -> Block:
    """The block of squashed form ``key`` from its mentions (any order).

    Raises:
        ValueError: no mention, or a mention of another squashed form.
    """
    by_unit: dict[Unit, list[Any]] = defaultdict(list)
    for m in mentions:
        by_unit[(m.norm, type_class(m.label))].append(m)
    if not by_unit:
        raise ValueError(f"block {key!r} has no mention")
    if any(squashed(norm) != key for norm, _ in by_unit):
        raise ValueError(f"block {key!r} holds a mention of another squashed form")
    counts = Counter({unit: len(ms) for unit, ms in by_unit.items()})
    units = sorted(by_unit)
    uf = UnionFind(units)
    merge_compatible(uf, units, counts)
    groups: dict[Unit, list[Unit]] = defaultdict(list)
    for unit in units:
        groups[uf.find(unit)].append(unit)
    clusters = [
        Cluster(us, [counts[u] for u in us], [m for u in us for m in by_unit[u]], units[0] in us)
        for us in groups.values()
    ]
    head = min(units, key=lambda u: (-counts[u], u))[0]
    return Block(key, head, clusters)


def dominant_expansion(definitions: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """``(short key, long key)`` when the definitions of one short form (``(short, long)``
    norms, the same squashed short form) have a dominant expansion, else ``None``."""
    dominant = dominant_expansions(definitions)
    if len(dominant) > 1:
        raise ValueError(f"definitions of several short forms: {sorted(dominant)}")
    return next(iter(dominant.items()), None)


def head_contexts(head: str) -> list[tuple[Context, tuple[str, str]]]:
    """Each candidate word of a block's head in its context: ``(context, (head, word))``."""
    return [(context, entry) for context, (entry,) in variant_contexts([head]).items()]


def variant_edges(
    entries: Iterable[tuple[str, str]],
    *,
    embed: Embed | None,
    similarity: float,
    max_block: int,
) -> list[tuple[str, str]]:
    """Block keys ``(a, b)`` whose heads (``entries`` of one context) are spelling
    variants the name encoder finds at least ``similarity`` alike."""
    pairs = context_pairs(sorted(entries), max_block)
    alike = similar(pairs, embed, similarity)
    return [(squashed(a), squashed(b)) for (a, b), ok in zip(pairs, alike, strict=True) if ok]


def components(edges: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Every block key an edge names -> the smallest key of its connected component."""
    edges = list(edges)
    uf = UnionFind(sorted({key for edge in edges for key in edge}))
    for a, b in edges:
        uf.union(a, b)
    return {key: uf.find(key) for key in uf.parent}


def cluster_key(block: Block, root: str | None, cluster: Cluster) -> tuple[str, ...]:
    """Where a block's cluster meets the others of its entity: the block's first cluster
    by its component (``root``, or the block's own key), any other one by its own first
    unit (merges across blocks join first clusters only)."""
    if cluster.first:
        return ("block", root or block.key)
    return ("unit", *cluster.units[0])


def cluster_entity(parts: Iterable[Cluster]) -> tuple[Unit, Entity, list[Any]]:
    """The entity of the clusters that meet under one key: ``(its first unit, the entity,
    its mentions sorted by id)``."""
    parts = list(parts)
    units = sorted(u for part in parts for u in part.units)
    classes = Counter({u[1]: 0 for u in units})
    for part in parts:
        for unit, count in zip(part.units, part.counts, strict=True):
            classes[unit[1]] += count
    members = sorted((m for part in parts for m in part.members), key=lambda m: m.mention_id)
    return units[0], entity_of(members, classes), members


def distinct_ids(claims: Iterable[tuple[Unit, Entity, Any]]) -> list[tuple[Entity, Any]]:
    """Entities that got the same id (one name of a person and a place cluster), with
    what travels with each: the one of the smallest first unit keeps the id, the others
    take one from their first unit."""
    kept = []
    for i, (unit, entity, rest) in enumerate(sorted(claims, key=lambda claim: claim[0])):
        if i:
            entity = entity._replace(entity_id=stable_id("entity", entity.norm, unit))
        kept.append((entity, rest))
    return kept


def canonicalize_by_key(
    mentions: Iterable[Any],
    acronyms: Iterable[tuple[str, str]] = (),
    *,
    embed: Embed | None = None,
    similarity: float = 0.85,
    max_block: int = 64,
) -> Canonicalized:
    """The four steps in one process: the same result as ``canonicalize`` (which see)."""
    by_form: dict[str, list[Any]] = defaultdict(list)
    for m in mentions:
        by_form[squashed(m.norm)].append(m)
    blocks = [block_of(key, ms) for key, ms in by_form.items()]
    by_short: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for short, long in acronyms:
        by_short[squashed(short)].append((short, long))
    edges = []
    for definitions in by_short.values():
        expansion = dominant_expansion(definitions)
        if expansion and expansion[0] in by_form and expansion[1] in by_form:
            edges.append(expansion)
    by_context: dict[Context, list[tuple[str, str]]] = defaultdict(list)
    for block in blocks:
        for context, entry in head_contexts(block.head):
            by_context[context].append(entry)
    for entries in by_context.values():
        edges += variant_edges(entries, embed=embed, similarity=similarity, max_block=max_block)
    roots = components(edges)
    by_cluster: dict[tuple[str, ...], list[Cluster]] = defaultdict(list)
    for block in blocks:
        for cluster in block.clusters:
            by_cluster[cluster_key(block, roots.get(block.key), cluster)].append(cluster)
    by_id: dict[str, list[tuple[Unit, Entity, Any]]] = defaultdict(list)
    for parts in by_cluster.values():
        unit, entity, members = cluster_entity(parts)
        by_id[entity.entity_id].append((unit, entity, members))
    entities, assignment = [], {}
    for claims in by_id.values():
        for entity, members in distinct_ids(claims):
            entities.append(entity)
            assignment.update((m.mention_id, entity.entity_id) for m in members)
    return Canonicalized(sorted(entities, key=lambda e: e.entity_id), assignment)
