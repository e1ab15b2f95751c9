"""One call for agents: route, retrieve, admit."""

import datetime as dt
from collections.abc import Iterable
from typing import Any, NamedTuple

from query.admission import Admission, admit
from query.bundle import LoadedBundle
from query.retrieve import Evidence, retrieve
from query.router import Route, route


class Answer(NamedTuple):
    """Admitted evidence for a query, with the routing decision and the verdict."""

    query: str
    bundle_id: str
    status: str
    route: Route
    admission: Admission
    evidence: tuple[Evidence, ...]

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
        }


def answer(
    bundle: LoadedBundle,
    query: str,
    *,
    k: int = 5,
    access: Iterable[str] | None = None,
    roles: Iterable[str] | None = None,
    lexical_weight: float = 1.0,
    today: dt.date | None = None,
) -> Answer:
    """Route ``query``, retrieve from the surfaces it needs, and admit the evidence."""
    available = frozenset({"dense"} | ({"lexical"} if bundle.lexical is not None else set()))
    decision = route(query, available=available)
    if decision.operation == "out_of_scope":
        evidence: list[Evidence] = []
    else:
        arms = tuple(s for s in decision.surfaces if s in ("dense", "lexical"))
        evidence = retrieve(
            bundle, query, k=k, access=access, lexical_weight=lexical_weight, arms=arms
        )
    verdict = admit(
        query,
        evidence,
        anchors=decision.anchors,
        operation=decision.operation,
        allowed_roles=roles,
        today=today,
    )
    return Answer(query, bundle.bundle_id, verdict.status, decision, verdict, tuple(evidence))
