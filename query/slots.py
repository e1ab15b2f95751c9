"""Reserved places for the things a question names (issue 57): the reservation invariant
applied per named thing rather than per arm.

A question that names several things ("Are Christopher Nolan and Sathish Kalathil both
film directors?", "Whose director was born first, Film A or Film B?") needs the evidence of
each of them; the named things' own pages are the easiest evidence there is, yet one side's
page is easily crowded out by the other side's neighbours. So each named thing that has a
page (a document titled with its name, less a trailing parenthesis) gets a
:class:`query.fusion.Slot`, and fusion places the best of its page's chunks before anything
else fills the rest. A name with no page of its own gets none: the passages that merely
mention it are what the chunk arms and the walk (which seeds from it) already rank, and
reserving them pushed the answer hop of chain questions down ("the Diocese of the birthplace
of X": measured on MuSiQue, issue 57). For a *bridge* comparison (the question
also describes a thing through another: "whose director") each side also gets its bridge
hop: the best chunk the walk reached from that side's entity, that is not one of the named
things' own pages.

Contract: only what the caller may see (the walk graph's visible rows) fills a slot; slots
are made only when at least two named things have a page; deterministic (rows by dense
similarity, then row).
"""

import re
from collections.abc import Callable, Sequence

import numpy as np

from algorithms.normalize import normalize_surface
from query.fusion import Slot
from query.graph import Graph, Walk

MAX_NAMED = 4
"""Named things that get a slot ("whose director was born first" names up to four)."""
BRIDGE_DEPTH = 30
"""How deep in the walk's ranking a side's bridge hop is looked for."""
BRIDGE_MAX_CHUNKS = 10
"""A named seed without a page bridges through its relations only when its name stands in
at most this many passages (its seed weight, 1 / those passages, at least
``1 / BRIDGE_MAX_CHUNKS``): an acronym or a term standing in dozens of abstracts ("CTCF",
"fidelity") names a topic, not a thing to hop from (issue 57, measured on SciFact with the
walk forced on every claim)."""
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")

Similarity = Callable[[list[int]], np.ndarray]
"""Chunk rows -> the query's dense similarity to each (orders a slot's passages)."""


def named_things(anchors: Sequence[str]) -> list[str]:
    """The query's distinct names, longest first claiming shorter ones inside them
    ("Nolan" is part of "Christopher Nolan"), in the query's order."""
    kept: list[str] = []
    for anchor in sorted(set(anchors), key=lambda a: (-len(a), a)):
        low = anchor.lower()
        if not any(low in k.lower() for k in kept):
            kept.append(anchor)
    return sorted(kept, key=list(anchors).index)


def _passages(graph: Graph, name: str) -> tuple[list[int], list[int]]:
    """A name's own passages (the visible chunks of the document titled with it) and the
    entity nodes with visible chunks it names."""
    page = graph.pages.get(normalize_surface(_DISAMBIGUATION.sub("", name)), [])
    named = graph.layer.aliases.get(normalize_surface(name), [])
    return list(page), [e for e in named if graph.chunk_count(e) > 0]


def entity_slots(
    graph: Graph,
    anchors: Sequence[str],
    similarity: Similarity,
    *,
    walk: Walk | None = None,
    bridge: bool = False,
) -> list[Slot]:
    """One slot per named thing with a page (none unless two or more have one), and with
    ``bridge`` (and a ``walk``) one more per side for its bridge hop.

    Args:
        graph: the walk graph of the caller's visible rows.
        anchors: the query's anchors (:class:`query.router.Route`).
        similarity: the query's dense similarity to chunk rows.
        walk: the graph arm's walk for the query (for bridge hops).
        bridge: whether the question is a bridge comparison.

    Returns:
        Slots, the named things' first, then their bridge hops.
    """
    sides: list[tuple[str, list[int], list[int]]] = []
    for name in named_things(anchors)[:MAX_NAMED]:
        rows, entities = _passages(graph, name)
        if rows:
            sims = similarity(rows)
            order = sorted(range(len(rows)), key=lambda i: (-float(sims[i]), rows[i]))
            sides.append((name, [rows[i] for i in order], entities))
    if len(sides) < 2:
        return []
    slots = [Slot(f"named {name!r}", tuple(rows)) for name, rows, _ in sides]
    if bridge and walk is not None:
        slots += _bridge_slots(graph, walk, sides)
    return slots


def _bridge_slots(
    graph: Graph, walk: Walk, sides: Sequence[tuple[str, list[int], list[int]]]
) -> list[Slot]:
    """Each side's bridge hop: the walk's best chunk whose explanation path starts at one
    of that side's entities, other than the named things' own passages."""
    own = {r for _, rows, _ in sides for r in rows}
    top = [h.row for h in walk.hits[:BRIDGE_DEPTH] if h.row not in own]
    paths = walk.paths(top)
    slots = []
    for name, _, entities in sides:
        labels = {graph.label(e) for e in entities}
        hops = [r for r in top if r in paths and paths[r][0] in labels and paths[r][1]]
        if hops:
            slots.append(Slot(f"bridge from {name!r}", (hops[0],)))
    return slots


def bridging_names(walk: Walk, anchors: Sequence[str]) -> list[str]:
    """The walk's entity seeds that the question names (the seed's words are, or are part
    of, an anchor) and that bridge: the entity has a page titled with its name, or it has a
    relation to another entity and is specific (its name stands in at most
    ``BRIDGE_MAX_CHUNKS`` passages). Where there is none, the walk has nothing to hop from
    but similar passages, and it should not lead (:func:`query.fusion.fuse`'s ``lead``)."""
    graph = walk.graph
    if graph is None:
        return []
    names = [a.lower() for a in anchors]
    found = []
    for seed in walk.seeds:
        words = seed.surface.lower()
        if seed.kind != "entity" or not any(words in a or a in words for a in names):
            continue
        neighbours = graph.neighbours(seed.node)
        paged = any(normalize_surface(s) in graph.pages for s in (seed.name, seed.surface))
        related = bool((neighbours < graph.n_entities).any())
        if paged or (related and seed.weight * BRIDGE_MAX_CHUNKS >= 1.0):
            found.append(seed.name)
    return found
