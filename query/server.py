"""HTTP API over the active bundle (FastAPI): ``/retrieve``, ``/health``, ``/bundle``,
``/metrics`` (Prometheus) and ``/docs`` (Swagger UI served from the
``swagger-ui-bundle-v2`` package, so it works offline).

The server holds one :class:`query.BundleReader`. Before each request it checks
``ACTIVE`` (one small file read); when a new bundle was activated, one request
opens it completely and swaps it in, while concurrent requests keep answering
from the bundle they already hold: no request is dropped or sees a mix. Under
``evidex serve --workers N`` (:mod:`query.workers`) every worker process does this
on its own.
"""

import datetime as dt
import re
import threading
from typing import Any, Literal

from fastapi import FastAPI, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, field_validator

from query.answers import answer
from query.bundle import BundleReader, LoadedBundle
from query.encoder import Backend, BundledEncoder
from query.metrics import Metrics, MetricsMiddleware
from store import __version__

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
        None, max_length=8, description="access classes the caller may see"
    )
    roles: list[str] | None = Field(None, description="source roles the caller accepts")
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


class _Holder:
    """The reader plus a lock so only one request at a time performs a reload.

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


def create_app(
    root: str | None = None,
    *,
    verify: bool = True,
    model: Any = None,
    reranker: Any = None,
    encoder: Backend = "auto",
    encoder_threads: int = 0,
) -> FastAPI:
    """The FastAPI application serving the active bundle under ``root``.

    ``reranker`` (a :class:`query.rerank.Reranker`, off by default) reorders each answer;
    ``encoder`` chooses how queries are embedded and ``encoder_threads`` how many threads
    the bundled encoder uses (see :func:`query.load_bundle`).

    Raises:
        NoActiveBundleError: nothing is active yet.
    """
    holder = _Holder(
        BundleReader(
            root, verify=verify, model=model, encoder=encoder, encoder_threads=encoder_threads
        )
    )
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

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "bundle_id": holder.bundle().bundle_id}

    @app.get("/bundle")
    def bundle_info() -> dict[str, Any]:
        bundle = holder.bundle()
        manifest = bundle.manifest
        return {
            "bundle_id": manifest.bundle_id,
            "parent_bundle_id": manifest.parent_bundle_id,
            "created_at": manifest.created_at,
            "row_counts": manifest.row_counts,
            "model": manifest.model.model_dump(),
            "query_encoder": bundle.encoder.backend,
        }

    @app.get("/metrics", include_in_schema=False)
    def metrics_endpoint() -> Response:
        body, content_type = metrics.exposition()
        return Response(content=body, media_type=content_type)

    @app.post("/retrieve")
    def retrieve_endpoint(request: RetrieveRequest) -> dict[str, Any]:
        try:
            result = answer(
                holder.bundle(),
                request.query,
                k=request.k,
                access=request.access,
                roles=request.roles,
                lexical_weight=request.lexical_weight,
                today=request.today,
                reranker=reranker,
            )
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        metrics.verdict(result.route.operation, result.status)
        return result.to_json()

    app.add_middleware(_BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


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
