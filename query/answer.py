"""One call for agents: route, retrieve (chunks and knowledge surfaces), admit."""

import datetime as dt
from collections.abc import Iterable
from typing import Any, NamedTuple

from query.admission import Admission, Reason, admit
from query.bundle import LoadedBundle
from query.fusion import ArmHit
from query.rerank import Reranker
from query.retrieve import Evidence, retrieve
from query.router import Route, route
from query.surfaces import Derived, Expansion, chunk_arm, expand, search_surface, visibility

CHUNK_ARMS = ("dense", "lexical")


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
        }


def _available(bundle: LoadedBundle) -> frozenset[str]:
    surfaces = {"dense"} | ({"lexical"} if bundle.lexical is not None else set())
    if bundle.knowledge is not None:
        surfaces |= {"relations", "communities", "graph"}
    return frozenset(surfaces)


def _knowledge_arms(
    bundle: LoadedBundle, decision: Route, vector: Any, visible: Any, k: int
) -> tuple[list[Derived], dict[str, list[ArmHit]], list[Reason], Expansion | None]:
    """Derived rows, their chunk arms, notes for admission, and the graph expansion."""
    layer = bundle.knowledge
    derived: list[Derived] = []
    extra: dict[str, list[ArmHit]] = {}
    notes: list[Reason] = []
    if layer is None:
        return derived, extra, notes, None
    for kind in ("relations", "communities"):
        if kind in decision.surfaces:
            found = search_surface(layer, kind, vector, visible)
            derived += found
            extra[kind] = chunk_arm(bundle, found, k * 4)
    if "graph" not in decision.surfaces:
        return derived, extra, notes, None
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
    return derived, extra, notes, expansion


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
) -> Answer:
    """Route ``query``, retrieve from the surfaces it needs, and admit the evidence.

    ``extra_surfaces`` (e.g. ``("graph",)``) are used in addition to the router's
    choice when the bundle has them; graph expansion stays anchor-gated. A
    ``reranker`` (off by default) reorders the retrieved items before admission.

    Raises:
        ValueError: a blank query or ``k`` < 1 (and what :func:`query.retrieve.retrieve`
            rejects: unknown access classes).
    """
    if not query.strip():
        raise ValueError("query is empty")
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    layer = bundle.knowledge
    access = list(access) if access is not None else None
    visible = visibility(bundle, access)
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
    vector = bundle.embed(query)
    derived, extra, notes, expansion = _knowledge_arms(bundle, decision, vector, visible, k)
    evidence = retrieve(
        bundle,
        query,
        k=k,
        access=access,
        lexical_weight=lexical_weight,
        arms=tuple(s for s in decision.surfaces if s in CHUNK_ARMS),
        vector=vector,
        extra=extra,
    )
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
    )
