"""Communities: Louvain partitions of the entity graph -> ``Community`` rows with
extractive reports (pure assembly; no generated text).

A report names the community's most central entities (its title), lists its key
entities and key relations as sentences, and points to representative chunks;
``evidence_chunk_ids`` is every chunk behind one of its relations.
"""

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from algorithms.graph import (
    Adjacency,
    adjacency,
    community_levels,
    internal_edges,
    weighted_degree,
    weighted_edges,
)
from algorithms.summaries import COOCCURRENCE
from schemas import Community, Relation, stable_id


class CommunitySettings(Protocol):
    """What community detection reads of its settings (``store.config.KnowledgeConfig``
    has these fields; any object with them will do)."""

    @property
    def louvain_resolution(self) -> float: ...
    @property
    def community_engine(self) -> Literal["python-louvain", "leiden"]: ...
    @property
    def min_community_size(self) -> int: ...
    @property
    def min_community_documents(self) -> int: ...
    @property
    def report_entities(self) -> int: ...
    @property
    def report_relations(self) -> int: ...
    @property
    def representative_chunks(self) -> int: ...


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _ranked(scores: Mapping[str, float], names: Mapping[str, str]) -> list[str]:
    return sorted(scores, key=lambda n: (-scores[n], names.get(n, ""), n))


def _report(
    members: list[str],
    graph: Adjacency,
    internal: list[Relation],
    names: Mapping[str, str],
    config: CommunitySettings,
) -> tuple[str, str, list[str], list[str]]:
    """Title, report text, representative chunks, evidence chunks."""
    central = _ranked(weighted_degree(graph, members), names)
    title = ", ".join(names[n] for n in central[:3])
    key_relations = sorted(
        internal,
        key=lambda r: (r.category == COOCCURRENCE, -r.support, -r.confidence, r.relation_id),
    )[: config.report_relations]
    counts = Counter(c for r in internal for c in r.chunk_ids)
    representative = sorted(counts, key=lambda c: (-counts[c], c))[: config.representative_chunks]
    lines = [
        f"{title}.",
        "Key entities: " + ", ".join(names[n] for n in central[: config.report_entities]) + ".",
    ]
    if key_relations:
        lines.append("Key relations: " + "; ".join(r.summary for r in key_relations) + ".")
    return title, " ".join(lines), representative, sorted(counts)


def _parent(
    community: Community, levels: list[dict[str, int]], ids: list[dict[int, str]], emitted: set[str]
) -> str | None:
    """The nearest emitted community above ``community`` that contains it."""
    node = community.entity_ids[0]
    for up in range(community.level + 1, len(levels)):
        candidate = ids[up][levels[up][node]]
        if candidate in emitted and candidate != community.community_id:
            return candidate
    return None


def detect_communities(
    relations: Sequence[Relation],
    names: Mapping[str, str],
    *,
    config: CommunitySettings,
    seed: int,
) -> list[Community]:
    """Every community of at least ``config.min_community_size`` entities, at every level.

    Args:
        relations: canonical relations (entity objects become edges).
        names: entity id -> canonical name.
        config: report sizes, Louvain resolution and the community engine.
        seed: the engine's random state.
    """
    edges = weighted_edges(relations)
    levels = community_levels(
        edges, engine=config.community_engine, seed=seed, resolution=config.louvain_resolution
    )
    graph = adjacency(edges)
    del edges
    by_pair: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    for r in relations:
        if r.object_id is not None:
            by_pair[_pair(r.subject_id, r.object_id)].append(r)
    ids: list[dict[int, str]] = []
    groups_per_level: list[dict[int, list[str]]] = []
    for level, partition in enumerate(levels):
        groups: dict[int, list[str]] = defaultdict(list)
        for node in sorted(partition):
            groups[partition[node]].append(node)
        groups_per_level.append(groups)
        ids.append({c: stable_id("community", level, *nodes) for c, nodes in groups.items()})
    communities = []
    for level, groups in enumerate(groups_per_level):
        below = {tuple(m) for m in groups_per_level[level - 1].values()} if level else set()
        for number, members in groups.items():
            if len(members) < config.min_community_size or tuple(members) in below:
                continue  # too small, or the same community as one level down
            internal = sorted(
                (r for edge in internal_edges(graph, members) for r in by_pair[edge]),
                key=lambda r: r.relation_id,
            )
            documents = {d for r in internal for d in r.sentence_doc_ids}
            if len(documents) < config.min_community_documents:
                continue  # not cross-source: the chunks themselves serve it
            title, report, representative, evidence = _report(
                members, graph, internal, names, config
            )
            communities.append(
                Community(
                    community_id=ids[level][number],
                    level=level,
                    parent_id=None,
                    title=title,
                    size=len(members),
                    entity_ids=members,
                    relation_ids=[r.relation_id for r in internal],
                    chunk_ids=representative,
                    evidence_chunk_ids=evidence,
                    report=report,
                )
            )
    emitted = {c.community_id for c in communities}
    communities = [c._replace(parent_id=_parent(c, levels, ids, emitted)) for c in communities]
    return sorted(communities, key=lambda c: (c.level, c.community_id))
