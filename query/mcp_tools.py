"""The agent tools of ``evidex mcp`` as plain functions over a loaded bundle.

:mod:`query.mcp_server` registers them with the MCP SDK; here they take a bundle and the
caller's :class:`query.principals.Identity` and return pydantic models (the tools'
output schemas), so they can be called and tested without a protocol in between.

- :func:`search` + :func:`search_result`: the routed :func:`query.answers.answer` and
  its verdict, as ``search_evidence`` returns it;
- :func:`read_span`: the exact text of ``[start, end)`` of one revision of a document,
  refused when that revision is no longer live;
- :func:`bundle_status`: which bundle answers, when it was activated, and what the
  caller may see of it.

What a caller may see comes from its identity (:func:`query.gate.narrow`): over HTTP the
authenticated principal, over stdio the local user (:func:`local_identity`). Arguments
may narrow it, never widen it. Every refusal a caller can act on is a
:class:`ToolInputError` whose message says what to do.

Example:
    >>> me = local_identity()
    >>> result = search(bundle, "What does the with statement do?", identity=me)
    >>> search_result(result).verdict
    'PASS'
"""

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from query.answers import Answer, answer
from query.bundle import LoadedBundle
from query.gate import Forbidden, Grant, narrow
from query.principals import Identity, Limit
from query.server import RetrieveRequest, describe_bundle
from store.activation import read_history
from store.config import ACCESS_CLASSES

MAX_TOOL_K = 50
"""Most evidence items one ``search_evidence`` call returns (a model's context is small)."""
MAX_SPAN_CHARS = 20_000
"""Longest span ``read_span`` quotes."""
MAX_CONTEXT_CHARS = 4_000
"""Most characters of context ``read_span`` adds on each side."""
Verdict = Literal["PASS", "FAIL", "UNKNOWN"]


class ToolInputError(ValueError):
    """A tool call the caller can correct: bad arguments, a revision no longer live, a
    document it may not see. The message is shown to the model as the tool's error."""


def local_identity(
    access: Iterable[str] | None = None, roles: Iterable[str] | None = None
) -> Identity:
    """The trusted local user (``evidex mcp`` over stdio, like the CLI): every access class
    and source role unless ``access`` or ``roles`` narrow them.

    Raises:
        ValueError: an unknown access class.
    """
    classes = frozenset(ACCESS_CLASSES if access is None else access)
    strange = sorted(classes - set(ACCESS_CLASSES))
    if strange:
        raise ValueError(f"unknown access class(es) {strange}; known: {list(ACCESS_CLASSES)}")
    return Identity("local", "local", classes, None if roles is None else frozenset(roles), Limit())


class Reason(BaseModel):
    """Why the verdict is what it is."""

    code: str = Field(description="e.g. admitted, anchor_absent, anchor_unresolved, no_evidence")
    detail: str


class EvidenceItem(BaseModel):
    """One quotable passage: ``text`` is exactly ``document[start:end)`` of ``revision``."""

    rank: int
    doc_id: str
    title: str
    revision: str = Field(description="sha256 of the document text this span points into")
    start: int = Field(description="first character of the span (inclusive)")
    end: int = Field(description="end of the span (exclusive)")
    text: str = Field(description="the quoted text, exactly document[start:end)")
    score: float
    source_uri: str = Field(description="where the document was read from")
    source_role: str
    heading_path: str = ""
    chunk_id: str
    admitted: bool = Field(description="whether admission accepted it as citable evidence")
    rejected_because: str | None = Field(None, description="why admission rejected it")
    fallback: bool = Field(description="appended from the dense ranking to fill k")


class SearchResult(BaseModel):
    """What ``search_evidence`` returns."""

    bundle_id: str
    query: str
    verdict: Verdict = Field(
        description="PASS: the admitted items close the question; FAIL: evidence found but "
        "none admissible; UNKNOWN: something the question names is in no document the "
        "caller may see, or nothing was found (see reasons)"
    )
    reasons: list[Reason]
    operation: str = Field(description="how the question was routed (lookup, synthesis, ...)")
    items: list[EvidenceItem]


class SpanText(BaseModel):
    """What ``read_span`` returns."""

    bundle_id: str
    doc_id: str
    title: str
    revision: str
    start: int
    end: int
    text: str = Field(description="exactly document[start:end)")
    context_before: str = Field(description="up to context_chars characters before start")
    context_after: str = Field(description="up to context_chars characters after end")
    document_chars: int = Field(description="length of the whole document")
    source_uri: str


class BundleStatus(BaseModel):
    """What ``bundle_status`` returns."""

    bundle_id: str
    parent_bundle_id: str | None
    created_at: str = Field(description="when the bundle was built (UTC)")
    activated_at: str | None = Field(description="when it was last activated (UTC)")
    row_counts: dict[str, int] = Field(description="documents and chunks the caller may see")
    model: dict[str, Any]
    query_encoder: str
    caller: dict[str, Any]


def _check_query(query: str, k: int) -> None:
    """The HTTP API's own rules for a query (length, blank, control characters)."""
    try:
        RetrieveRequest(query=query, k=k)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ToolInputError(problems) from None
    if not 1 <= k <= MAX_TOOL_K:
        raise ToolInputError(f"k must be between 1 and {MAX_TOOL_K}, got {k}")


def grant_of(identity: Identity, roles: Iterable[str] | None = None) -> Grant:
    """What ``identity`` may see, ``roles`` narrowing what admission accepts.

    Raises:
        ToolInputError: ``roles`` names a role the caller may not see.
    """
    try:
        return narrow(identity, None, None if roles is None else list(roles))
    except Forbidden as exc:
        raise ToolInputError(str(exc)) from None


def search(
    bundle: LoadedBundle,
    query: str,
    *,
    identity: Identity,
    k: int = 5,
    roles: Iterable[str] | None = None,
) -> Answer:
    """The routed, admitted answer to ``query`` over what ``identity`` may see.

    Raises:
        ToolInputError: a query the HTTP API would refuse, ``k`` out of range, or
            ``roles`` wider than the caller's.
    """
    _check_query(query, k)
    grant = grant_of(identity, roles)
    try:
        return answer(
            bundle,
            query,
            k=k,
            access=grant.access,
            roles=grant.admit_roles,
            visible_roles=grant.visible_roles,
        )
    except ValueError as exc:
        raise ToolInputError(str(exc)) from None


def search_result(result: Answer) -> SearchResult:
    """``search_evidence``'s view of an answer: each item and whether it was admitted."""
    admitted = {e.chunk_id for e in result.admission.admitted}
    rejected = {e.chunk_id: r.detail for e, r in result.admission.rejected}
    items = [
        EvidenceItem(
            rank=e.rank,
            doc_id=e.doc_id,
            title=e.title,
            revision=e.revision,
            start=e.start,
            end=e.end,
            text=e.text,
            score=e.score,
            source_uri=e.source_uri,
            source_role=e.source_role,
            heading_path=e.heading_path,
            chunk_id=e.chunk_id,
            admitted=e.chunk_id in admitted,
            rejected_because=rejected.get(e.chunk_id),
            fallback=e.fallback,
        )
        for e in result.evidence
    ]
    return SearchResult(
        bundle_id=result.bundle_id,
        query=result.query,
        verdict=result.status,  # type: ignore[arg-type]  # admission's three statuses
        reasons=[Reason(code=r.code, detail=r.detail) for r in result.admission.reasons],
        operation=result.route.operation,
        items=items,
    )


def _visible(document: dict[str, Any], grant: Grant) -> bool:
    roles = grant.visible_roles
    return document["access_class"] in grant.access and (
        roles is None or document["source_role"] in roles
    )


def _check_span(doc_id: str, length: int, start: int, end: int, context_chars: int) -> None:
    if not 0 <= start < end <= length:
        raise ToolInputError(
            f"span [{start}, {end}) is outside {doc_id!r}, which has {length} characters: "
            f"need 0 <= start < end <= {length}"
        )
    if end - start > MAX_SPAN_CHARS:
        raise ToolInputError(f"span of {end - start} characters; read at most {MAX_SPAN_CHARS}")
    if not 0 <= context_chars <= MAX_CONTEXT_CHARS:
        raise ToolInputError(f"context_chars must be between 0 and {MAX_CONTEXT_CHARS}")


def read_span(
    bundle: LoadedBundle,
    doc_id: str,
    revision: str,
    start: int,
    end: int,
    *,
    identity: Identity,
    context_chars: int = 0,
) -> SpanText:
    """The exact text of ``[start, end)`` in revision ``revision`` of ``doc_id``, with up
    to ``context_chars`` characters of context on each side.

    Raises:
        ToolInputError: the document is missing or not visible to ``identity`` (one
            message for both), ``revision`` is not its live revision, or the span or
            context is out of range.
    """
    document = bundle.documents.get(doc_id)
    if document is None or not _visible(document, grant_of(identity)):
        raise ToolInputError(
            f"no document {doc_id!r} is visible to this caller in bundle {bundle.bundle_id}; "
            "use the doc_id of an item search_evidence returned"
        )
    if document["revision"] != revision:
        raise ToolInputError(
            f"revision {revision!r} of {doc_id!r} is no longer live: bundle "
            f"{bundle.bundle_id} holds revision {document['revision']!r}, whose text may "
            "differ; call search_evidence again and cite the live revision"
        )
    text = str(document["text"])
    _check_span(doc_id, len(text), start, end, context_chars)
    return SpanText(
        bundle_id=bundle.bundle_id,
        doc_id=doc_id,
        title=str(document["title"]),
        revision=revision,
        start=start,
        end=end,
        text=text[start:end],
        context_before=text[max(0, start - context_chars) : start],
        context_after=text[end : end + context_chars],
        document_chars=len(text),
        source_uri=str(document.get("source_uri") or ""),
    )


def activated_at(root: str, bundle_id: str) -> str | None:
    """When ``bundle_id`` was last made active under ``root`` (activation or rollback),
    from the root's history; ``None`` when the history does not say."""
    for event in reversed(read_history(root)):
        if event.get("bundle_id") == bundle_id:
            return str(event.get("time"))
    return None


def bundle_status(bundle: LoadedBundle, *, identity: Identity, root: str) -> BundleStatus:
    """The served bundle as ``identity`` may see it (``GET /bundle`` of the HTTP API) and
    when it was activated."""
    info = describe_bundle(bundle, identity)
    return BundleStatus(**info, activated_at=activated_at(root, bundle.bundle_id))
