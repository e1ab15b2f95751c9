"""One call for agents: route, retrieve (chunks and knowledge surfaces), admit."""

import datetime as dt
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from query.admission import Admission, Reason, admit, mentions_anchor
from query.bundle import LoadedBundle
from query.fusion import KEPT, ArmHit, Slot
from query.graph import DENSE_SEEDS, Spread, Walk, chunk_titles, graph_arm, text_spread, walk_graph
from query.rerank import Reranker
from query.retrieval import DEFAULT_DEPTH, Evidence, dense_arm, retrieve, visible_rows
from query.router import Route, nested_description, route
from query.slots import BRIDGE_MAX_CHUNKS, bridging_names, entity_slots
from query.surfaces import Derived, Expansion, chunk_arm, expand, search_surface, visibility

CHUNK_ARMS = ("dense", "lexical")
WALK_DENSE_DEPTH = DENSE_SEEDS
WALK_WEIGHT = 8.0
"""The graph arm's weight in the fused score (dense: 1, lexical: the caller's
``lexical_weight``) where the walk leads; there the order is by places (``LEAD_RATIO``), and
the score is what each item reports."""
LEAD_RATIO = 4.0
"""On a walk route where the walk bridges from a thing the question names, the walk leads:
it keeps its places and plain fusion (dense + BM25) keeps one in every ``LEAD_RATIO + 1``
(:func:`query.fusion.fuse`). Decided with held-out sets, tuned on one multi-hop set and
checked on another (``benchmarks/experiments/walk_lead.py``, issue 57)."""
UNLED_WALK_WEIGHT = 2.0
"""The walk's fusion weight on a walk route where it does not lead (no named seed bridges):
one more arm, twice a chunk arm, so a question sent to the walk by mistake stays close to
plain fusion."""
MAX_SUGGESTIONS = 3
"""Absent anchors per query that get a "did you mean" (each costs a few dictionary lookups
and a read of a few visible chunks); the rest are reported without one."""


class Answer(NamedTuple):
    """Admitted evidence for a query, with the routing decision and the verdict.

    ``knowledge`` lists the derived rows (relation summaries, community reports,
    expanded relations) that proposed chunks; only ``evidence`` may be cited.
    """

    query: str
    bundle_id: str
    status: str
    route: Route
    admission: Admission
    evidence: tuple[Evidence, ...]
    knowledge: tuple[Derived, ...] = ()
    expansion: Expansion | None = None
    walk: Walk | None = None

    def walk_paths(self) -> list[dict[str, Any]]:
        """For each evidence item the graph arm ranked: its walk rank and the path
        (seed -> entity -> relation -> entity -> chunk) that reached it (``steps`` empty
        when the item is a seed itself, ``seed`` ``None`` when no path of at most
        ``query.whole_graph.PATH_HOPS`` edges reaches it)."""
        if self.walk is None or self.walk.graph is None:
            return []
        row_of = {self.walk.graph.chunk_ids[h.row]: h.row for h in self.walk.hits}
        ranked = [e for e in self.evidence if e.walk_rank is not None and e.chunk_id in row_of]
        paths = self.walk.paths(row_of[e.chunk_id] for e in ranked)
        result = []
        for e in ranked:
            found = paths.get(row_of[e.chunk_id])
            result.append(
                {
                    "chunk_id": e.chunk_id,
                    "walk_rank": e.walk_rank,
                    "seed": found[0] if found else None,
                    "steps": [step._asdict() for step in found[1]] if found else [],
                }
            )
        return result

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``evidex query --json`` and the HTTP API return)."""
        return {
            "query": self.query,
            "bundle_id": self.bundle_id,
            "status": self.status,
            "reasons": [r._asdict() for r in self.admission.reasons],
            "route": self.route._asdict(),
            "window": list(self.admission.window),
            "evidence": [e._asdict() for e in self.evidence],
            "admitted": [e.chunk_id for e in self.admission.admitted],
            "rejected": [
                {"chunk_id": e.chunk_id, **r._asdict()} for e, r in self.admission.rejected
            ],
            "knowledge": [d._asdict() for d in self.knowledge],
            "expansion": self.expansion._asdict() if self.expansion else None,
            "walk": None
            if self.walk is None
            else {
                "seeds": [seed._asdict() for seed in self.walk.seeds],
                "paths": self.walk_paths(),
            },
        }


def _available(bundle: LoadedBundle) -> frozenset[str]:
    surfaces = {"dense"} | ({"lexical"} if bundle.lexical is not None else set())
    if bundle.knowledge is not None:
        surfaces |= {"relations", "communities", "graph", "walk"}
    return frozenset(surfaces)


def walk_spread(bundle: LoadedBundle, rows: Any) -> Spread | None:
    """The graph arm's seed spread over the bundle's BM25 index and the visible ``rows``
    (``None`` when the bundle has no lexical index)."""
    return None if bundle.lexical is None else text_spread(bundle.lexical, rows)


def _knowledge_arms(
    bundle: LoadedBundle,
    query: str,
    decision: Route,
    vector: Any,
    access: list[str] | None,
    k: int,
    roles: list[str] | None = None,
) -> tuple[list[Derived], dict[str, list[ArmHit]], list[Reason], Expansion | None, Walk | None]:
    """Derived rows, their chunk arms, notes for admission, the graph expansion and the
    graph arm's walk."""
    layer = bundle.knowledge
    derived: list[Derived] = []
    extra: dict[str, list[ArmHit]] = {}
    notes: list[Reason] = []
    if layer is None:
        return derived, extra, notes, None, None
    visible = visibility(bundle, access, roles)
    for kind in ("relations", "communities"):
        if kind in decision.surfaces:
            found = search_surface(layer, kind, vector, visible)
            derived += found
            extra[kind] = chunk_arm(bundle, found, k * 4)
    walk = None
    if "walk" in decision.surfaces:
        rows = visible_rows(bundle, access, roles)
        graph = walk_graph(
            layer, bundle.chunk_ids, bundle.row_of_chunk, rows, lambda: chunk_titles(bundle)
        )
        walk = graph_arm(
            layer,
            graph,
            query,
            dense_arm(bundle, vector, WALK_DENSE_DEPTH, rows),
            DEFAULT_DEPTH,
            walk_spread(bundle, rows),
        )
        extra["walk"] = list(walk.hits)
    if "graph" not in decision.surfaces:
        return derived, extra, notes, None, walk
    expansion = expand(layer, decision.anchors, visible)
    if expansion.blocked:
        why = (
            "anchor(s) not found as entities with visible evidence: "
            + ", ".join(expansion.unresolved)
            if expansion.unresolved
            else "the query names no anchor to expand from"
        )
        notes.append(Reason("expansion_blocked", why))
    else:
        derived += expansion.relations
        extra["graph"] = chunk_arm(bundle, expansion.relations, k * 4)
    return derived, extra, notes, expansion, walk


def _lead(walk: Walk | None, decision: Route) -> tuple[str | None, Route]:
    """Whether the walk leads fusion (it bridges from a thing the question names), with
    the reason added to the route."""
    if walk is None:
        return None, decision
    names = bridging_names(walk, decision.anchors)
    why = (
        f"the walk leads: it bridges from {', '.join(map(repr, names))}"
        if names
        else "the walk does not lead: no named seed with a page, or with a relation and a "
        f"name in at most {BRIDGE_MAX_CHUNKS} passages, to hop from (fusion's top "
        f"{KEPT} keep their places)"
    )
    return ("walk" if names else None), decision._replace(reasons=(*decision.reasons, why))


def _slots(
    bundle: LoadedBundle, query: str, decision: Route, walk: Walk | None, vector: Any
) -> list[Slot]:
    """Reserved places for the things a walk route's question names (:mod:`query.slots`);
    none off the walk's routes."""
    if walk is None or walk.graph is None or bundle.knowledge is None:
        return []
    vectors = bundle.vectors()
    # The walk's seeds that overlap an anchor name it in full ("Géza von Cziffra" for the
    # anchor "Cziffra"); the longest name claims the shorter.
    anchors = [a.lower() for a in decision.anchors]
    linked = [
        s.surface
        for s in walk.seeds
        if s.kind == "entity" and any(a in s.surface.lower() for a in anchors)
    ]
    return entity_slots(
        walk.graph,
        [*decision.anchors, *linked],
        lambda rows: vectors[rows] @ vector,
        walk=walk,
        bridge=nested_description(query, decision.anchors) is not None,
    )


def corpus_anchors(
    bundle: LoadedBundle,
    query: str,
    decision: Route,
    access: list[str] | None,
    roles: list[str] | None = None,
) -> tuple[Route, dict[str, str | None]]:
    """Add the query's rare terms to its anchors, and find the anchors no evidence the
    caller may see can close (each with a "did you mean" suggestion or ``None``).

    Rare terms are words of the query that no visible chunk holds and that are not
    common words of the embedding model's vocabulary (see :mod:`query.vocabulary`).
    Missing and present-only-in-invisible-documents take the same path and give the
    same reason, so nothing about other callers' documents shows.
    """
    vocab = bundle.vocabulary()
    if vocab is None:
        return decision, {}
    mask = None
    rows = visible_rows(bundle, access, roles)
    if rows is not None:
        mask = np.zeros(len(bundle.chunk_ids), dtype=bool)
        mask[rows] = True
    named = " ".join(decision.anchors).lower()
    rare = [w for w in vocab.absent_words(query, visible=mask) if w not in named]
    if rare:
        decision = decision._replace(
            anchors=(*decision.anchors, *rare),
            reasons=(
                *decision.reasons,
                *(f"rare term {w!r}: in no document this caller may see" for w in rare),
            ),
        )
    absent: dict[str, str | None] = {}
    for anchor in decision.anchors:
        if vocab.absent(anchor, visible=mask):
            suggest = len(absent) < MAX_SUGGESTIONS
            absent[anchor] = (
                vocab.suggest(anchor, visible=mask, text_of_row=bundle.chunk_text)
                if suggest
                else None
            )
    return decision, absent


def _resolver(layer: Any, visible: Any) -> Any:
    """Anchor resolution: the anchor's own token, or (with a knowledge layer) a passage
    among the chunks of the canonical entity the anchor names."""
    if layer is None:
        return mentions_anchor

    chunks_of: dict[str, set[str]] = {}

    def resolves(anchor: str, item: Any) -> bool:
        if mentions_anchor(anchor, item):
            return True
        if anchor not in chunks_of:
            found = layer.resolve(anchor, visible)
            chunks_of[anchor] = {c for e in found for c in layer.entity_chunks[e]}
        return item.chunk_id in chunks_of[anchor]

    return resolves


def answer(
    bundle: LoadedBundle,
    query: str,
    *,
    k: int = 5,
    access: Iterable[str] | None = None,
    roles: Iterable[str] | None = None,
    lexical_weight: float = 1.0,
    today: dt.date | None = None,
    extra_surfaces: tuple[str, ...] = (),
    reranker: Reranker | None = None,
    visible_roles: Iterable[str] | None = None,
) -> Answer:
    """Route ``query``, retrieve from the surfaces it needs, and admit the evidence.

    ``extra_surfaces`` (e.g. ``("graph",)``) are used in addition to the router's
    choice when the bundle has them; graph expansion stays anchor-gated. A
    ``reranker`` (off by default) reorders the retrieved items before admission.
    ``access`` and ``visible_roles`` bound what the caller may see, on every surface
    (evidence, derived rows, the walk, "did you mean"); ``roles`` only bounds what
    admission accepts (other roles' items are returned, rejected with a reason).

    Raises:
        ValueError: a blank query or ``k`` < 1 (and what :func:`query.retrieval.retrieve`
            rejects: unknown access classes).
    """
    if not query.strip():
        raise ValueError("query is empty")
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    layer = bundle.knowledge
    access = list(access) if access is not None else None
    seen = list(visible_roles) if visible_roles is not None else None
    visible = visibility(bundle, access, seen)
    known = None
    if layer is not None:
        known = lambda a: [layer.entity_names[e] for e in layer.resolve(a, visible)]  # noqa: E731
    available = _available(bundle)
    decision = route(
        query, available=available, known_entities=known, recognizer=bundle.recognizer()
    )
    added = tuple(s for s in extra_surfaces if s in available and s not in decision.surfaces)
    if added:
        decision = decision._replace(
            surfaces=decision.surfaces + added,
            reasons=(*decision.reasons, f"surfaces added by the caller: {', '.join(added)}"),
        )
    if decision.operation == "out_of_scope":
        verdict = admit(query, [], anchors=decision.anchors, operation="out_of_scope", today=today)
        return Answer(query, bundle.bundle_id, verdict.status, decision, verdict, ())
    decision, absent = corpus_anchors(bundle, query, decision, access, seen)
    vector = bundle.embed(query)
    derived, extra, notes, expansion, walk = _knowledge_arms(
        bundle, query, decision, vector, access, k, seen
    )
    lead, decision = _lead(walk, decision)
    evidence = retrieve(
        bundle,
        query,
        k=k,
        access=access,
        visible_roles=seen,
        lexical_weight=lexical_weight,
        arms=tuple(s for s in decision.surfaces if s in CHUNK_ARMS),
        vector=vector,
        extra=extra,
        weights=None if walk is None else {"walk": WALK_WEIGHT if lead else UNLED_WALK_WEIGHT},
        slots=_slots(bundle, query, decision, walk, vector),
        lead=lead,
        lead_ratio=LEAD_RATIO,
    )
    held = [f"evidence #{e.rank} holds the place of {e.holds}" for e in evidence if e.holds]
    if held:
        decision = decision._replace(reasons=(*decision.reasons, *held))
    if reranker is not None:
        evidence = list(reranker.rerank(query, evidence))
    verdict = admit(
        query,
        evidence,
        anchors=decision.anchors,
        operation=decision.operation,
        allowed_roles=roles,
        today=today,
        contradictions=layer.contradictions if layer is not None else None,
        notes=notes,
        absent=absent,
        resolves=_resolver(layer, visible),
    )
    return Answer(
        query,
        bundle.bundle_id,
        verdict.status,
        decision,
        verdict,
        tuple(evidence),
        tuple(derived),
        expansion,
        walk,
    )
