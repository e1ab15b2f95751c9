"""HTTP API over the active bundle (FastAPI): ``/retrieve``, ``/health``, ``/bundle``,
``/metrics`` (Prometheus) and ``/docs`` (Swagger UI served from the
``swagger-ui-bundle-v2`` package, so it works offline).

The server holds one :class:`query.BundleReader`. Before each request it checks
``ACTIVE`` (one small file read); when a new bundle was activated, one request
opens it completely and swaps it in, while concurrent requests keep answering
from the bundle they already hold: no request is dropped or sees a mix. Under
``evidex serve --workers N`` (:mod:`query.workers`) every worker process does this
on its own.

Who may see what comes from the caller's principal, never from the request
(:mod:`query.gate`, :mod:`query.auth`): without ``principals`` every caller is anonymous
and sees ``public`` rows only; a request's ``access`` and ``roles`` may narrow that, never
widen it (403).
"""

import datetime as dt
import logging
import os
import re
import threading
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, field_validator

from query.answers import Answer, answer
from query.audit import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, AuditLog
from query.auth import ANONYMOUS_ACCESS, Anonymous, Authenticator
from query.bundle import BundleReader, LoadedBundle
from query.encoder import Backend, BundledEncoder
from query.gate import Forbidden, Gate, narrow, record
from query.metrics import Metrics, MetricsMiddleware
from query.principals import Identity, Limit
from query.ratelimit import TokenBuckets
from query.retrieval import visible_rows
from store import __version__

logger = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000
"""Longest query accepted over HTTP (the model reads at most 256 tokens of it anyway)."""
MAX_K = 1000
"""Most evidence items one request may ask for."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
AccessClass = Literal["public", "internal", "confidential", "restricted"]


class RetrieveRequest(BaseModel):
    """Body of ``POST /retrieve``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description=f"the question or claim (at most {MAX_QUERY_CHARS} characters, not blank, "
        "no control characters other than tab and newline)",
    )
    k: int = Field(5, ge=1, le=MAX_K, description=f"evidence items to return (1 to {MAX_K})")
    access: list[AccessClass] | None = Field(
        None,
        max_length=8,
        description="narrow the access classes searched to these (default: every class the "
        "caller's principal may see; naming one it may not see is a 403)",
    )
    roles: list[str] | None = Field(
        None,
        description="source roles admission accepts (default: all the caller may see; "
        "naming one its principal may not see is a 403)",
    )
    lexical_weight: float = Field(1.0, ge=0, description="weight of the BM25 arm")
    today: dt.date | None = Field(None, description="date for validity checks")

    @field_validator("query")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank")
        if _CONTROL.search(value):
            raise ValueError("query contains control characters")
        return value


MAX_BODY_BYTES = 65_536
"""Largest request body accepted (a 4,000-character query escaped as JSON fits easily)."""


class _BodyLimit:
    """ASGI wrapper: a body over ``limit`` bytes is a 413 before the app reads it.

    Bodies must declare their size: a POST without ``Content-Length`` (chunked) is a
    411, so no request body is ever read without a known bound.
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            length = dict(scope["headers"]).get(b"content-length")
            if length is None or not length.isdigit():
                await _plain(send, 411, b"Content-Length required")
                return
            if int(length) > self.limit:
                await _plain(send, 413, f"request body over {self.limit} bytes".encode())
                return
        await self.app(scope, receive, send)


async def _plain(send: Any, status: int, message: bytes) -> None:
    body = b'{"detail":"' + message + b'"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BundleHolder:
    """The reader plus a lock so only one request at a time performs a reload (the HTTP
    API and the MCP server, :mod:`query.mcp_server`, follow ``ACTIVE`` through it).

    Requests that arrive while a reload runs wait for it instead of answering from the
    old bundle: the reload needs about 0.1 s of CPU, but competing for the GIL with a
    full thread pool of requests stretched it to 0.4-0.9 s on two busy cores, past the
    second in which a worker must follow ``ACTIVE``. Waiting costs those requests at
    most the reload itself, once per activation.
    """

    def __init__(self, reader: BundleReader) -> None:
        self.reader = reader
        self._lock = threading.Lock()

    def bundle(self) -> LoadedBundle:
        if self.reader.stale():
            with self._lock:
                self.reader.reload()  # a no-op for the requests that waited on another's
        return self.reader.current


ANONYMOUS = Identity(None, "anonymous", ANONYMOUS_ACCESS, None, Limit())


def create_app(
    root: str | None = None,
    *,
    verify: bool = True,
    model: Any = None,
    reranker: Any = None,
    encoder: Backend = "auto",
    encoder_threads: int = 0,
    principals: str | os.PathLike[str] | None = None,
    anonymous: Anonymous = "public",
    audit_log: str | os.PathLike[str] | None = None,
    audit_queries: bool = False,
    audit_max_bytes: int = DEFAULT_MAX_BYTES,
    audit_backups: int = DEFAULT_BACKUPS,
) -> FastAPI:
    """The FastAPI application serving the active bundle under ``root``.

    ``reranker`` (a :class:`query.rerank.Reranker`, off by default) reorders each answer;
    ``encoder`` chooses how queries are embedded and ``encoder_threads`` how many threads
    the bundled encoder uses (see :func:`query.load_bundle`). ``principals`` is a
    principals file (:mod:`query.principals`; re-read when it changes); without one every
    caller is anonymous. ``anonymous="none"`` refuses callers without credentials (401).
    ``audit_log`` appends one JSON line per request (:mod:`query.audit`), with the query
    text only if ``audit_queries``.

    Raises:
        NoActiveBundleError: nothing is active yet.
        PrincipalsFileError: ``principals`` cannot be read or is invalid.
        ValueError: ``anonymous="none"`` without a principals file (no one could call).
    """
    if anonymous == "none" and principals is None:
        raise ValueError("anonymous 'none' needs a principals file: no caller could be served")
    auth = Authenticator(principals, anonymous=anonymous)
    # The walk imports scipy on first use (a one-shot lookup never does); a server walks
    # sooner or later, so it is imported once here, before any worker is forked.
    import scipy.sparse  # noqa: F401

    holder = BundleHolder(
        BundleReader(
            root, verify=verify, model=model, encoder=encoder, encoder_threads=encoder_threads
        )
    )
    warn_unprotected(holder.reader.current, auth)
    metrics = Metrics(holder.bundle)
    app = FastAPI(
        title="evidex",
        version=__version__,
        description="Admitted evidence from the active evidex bundle.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.reader = holder.reader
    _offline_docs(app)
    _routes(app, holder, metrics, reranker)
    audit = None
    if audit_log is not None:
        audit = AuditLog(audit_log, max_bytes=audit_max_bytes, backups=audit_backups)
    app.add_middleware(_BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(
        Gate,
        auth=auth,
        buckets=TokenBuckets(),
        audit=audit,
        audit_queries=audit_queries,
        bundle_id=lambda: holder.reader.current.bundle_id,
    )
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


def warn_unprotected(bundle: LoadedBundle, auth: Authenticator) -> None:
    """Say at start-up when non-public rows are served without a principals file."""
    if auth.configured:
        return
    hidden = {c: len(r) for c, r in bundle.rows_of_class().items() if c not in ANONYMOUS_ACCESS}
    if hidden:
        counts = ", ".join(f"{n} {c}" for c, n in sorted(hidden.items()))
        logger.warning(
            "bundle %s holds non-public chunks (%s) and no principals file is configured: "
            "every HTTP caller is anonymous and sees public rows only; give --principals "
            "FILE to serve the others to authenticated callers",
            bundle.bundle_id,
            counts,
        )


def _identity(request: Request) -> Identity:
    identity = request.scope.get("state", {}).get("identity")
    return identity if isinstance(identity, Identity) else ANONYMOUS


def _routes(app: FastAPI, holder: "BundleHolder", metrics: Metrics, reranker: Any) -> None:
    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "bundle_id": holder.bundle().bundle_id}

    @app.get("/bundle")
    def bundle_info(request: Request) -> dict[str, Any]:
        bundle = holder.bundle()
        record(request.scope.setdefault("state", {}), bundle_id=bundle.bundle_id)
        return describe_bundle(bundle, _identity(request))

    @app.get("/metrics", include_in_schema=False)
    def metrics_endpoint() -> Response:
        body, content_type = metrics.exposition()
        return Response(content=body, media_type=content_type)

    @app.post("/retrieve")
    def retrieve_endpoint(body: RetrieveRequest, request: Request) -> dict[str, Any]:
        state = request.scope.setdefault("state", {})
        record(state, query=body.query)  # written only with --audit-queries
        try:
            grant = narrow(_identity(request), body.access, body.roles)
        except Forbidden as exc:
            raise HTTPException(status_code=403, detail=str(exc)) from exc
        bundle = holder.bundle()
        record(state, bundle_id=bundle.bundle_id, access=grant.access)
        try:
            result = answer(
                bundle,
                body.query,
                k=body.k,
                access=grant.access,
                roles=grant.admit_roles,
                visible_roles=grant.visible_roles,
                lexical_weight=body.lexical_weight,
                today=body.today,
                reranker=reranker,
            )
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        metrics.verdict(result.route.operation, result.status)
        record(state, **returned(result))
        return result.to_json()


def returned(result: Answer) -> dict[str, Any]:
    """What an answer shows, for its audit line: each evidence item's ``(doc_id,
    revision, start, end)`` and the ids of the derived rows."""
    return {
        "items": [
            {"doc_id": e.doc_id, "revision": e.revision, "start": e.start, "end": e.end}
            for e in result.evidence
        ],
        "derived": [{"kind": d.kind, "id": d.id} for d in result.knowledge],
    }


def describe_bundle(bundle: LoadedBundle, identity: Identity) -> dict[str, Any]:
    """``GET /bundle``: the served bundle as the caller may see it. The manifest's row
    counts cover every access class, so a caller who may not see them all gets the counts
    of the documents and chunks it may see instead."""
    manifest = bundle.manifest
    rows = visible_rows(bundle, sorted(identity.access), identity.roles)
    if rows is None:
        counts = dict(manifest.row_counts)
    else:
        doc_ids = {bundle.chunk_doc_ids[int(r)] for r in rows}
        counts = {"documents": len(doc_ids), "chunks": len(rows)}
    return {
        "bundle_id": manifest.bundle_id,
        "parent_bundle_id": manifest.parent_bundle_id,
        "created_at": manifest.created_at,
        "row_counts": counts,
        "model": manifest.model.model_dump(),
        "query_encoder": bundle.encoder.backend,
        "caller": {
            "principal": identity.principal,
            "access": sorted(identity.access),
            "roles": None if identity.roles is None else sorted(identity.roles),
        },
    }


SWAGGER_PREFIX = "/static/swagger"


def _offline_docs(app: FastAPI) -> None:
    """``/docs`` from the Swagger UI files of the ``swagger-ui-bundle-v2`` package."""
    from swagger_ui_bundle import swagger_ui_path

    app.mount(SWAGGER_PREFIX, StaticFiles(directory=swagger_ui_path), name="swagger")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="evidex API",
            swagger_js_url=f"{SWAGGER_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_PREFIX}/favicon-32x32.png",
        )


def after_fork(app: FastAPI, threads: int) -> None:
    """Make a forked worker's copy of ``app`` its own: a new ONNX Runtime session with
    ``threads`` intra-op threads (a session's thread pool does not survive a fork)."""
    encoder = app.state.reader.current.encoder
    if isinstance(encoder, BundledEncoder):
        encoder.reopen(threads)
