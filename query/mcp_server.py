"""``evidex mcp``: the evidex tools over the Model Context Protocol, on the official
``mcp`` SDK (``MCPServer``).

Three tools (:mod:`query.mcp_tools`): ``search_evidence``, ``read_span`` and
``bundle_status``. The server holds one :class:`query.BundleReader` and, like
``evidex serve``, checks ``ACTIVE`` before each call and swaps in a newly activated
bundle (:class:`query.server.BundleHolder`).

Two transports:

- **stdio** (:func:`serve_stdio`), for an agent on the same machine: the local user is
  trusted, like the CLI, and sees every access class unless ``access`` narrows it;
- **streamable HTTP** (:func:`http_app`, :func:`serve_http`), for remote agents: each
  POST to ``/mcp`` is one JSON-RPC message answered with JSON (stateless: no session is
  pinned to a process, and every request is authenticated on its own). The app is
  wrapped in the HTTP API's own :class:`query.gate.Gate`, so the same principals file,
  bearer tokens, JWTs, anonymous rule (``public`` only, or a 401 under
  ``anonymous="none"``), rate limits and audit log apply, unchanged.

Example:
    >>> serve_stdio("/srv/evidex")                       # what `evidex mcp` runs
    >>> app = http_app("/srv/evidex", principals="principals.toml")  # an ASGI app
"""

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from query.answers import Answer
from query.audit import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, AuditLog, now_utc
from query.auth import Anonymous, Authenticator
from query.bundle import BundleReader
from query.encoder import Backend
from query.gate import Gate, record
from query.mcp_tools import (
    MAX_CONTEXT_CHARS,
    MAX_TOOL_K,
    BundleStatus,
    SearchResult,
    SpanText,
    ToolInputError,
    bundle_status,
    local_identity,
    read_span,
    search,
    search_result,
)
from query.principals import Identity, SourceRole
from query.ratelimit import TokenBuckets
from query.server import ANONYMOUS, BundleHolder, returned, warn_unprotected
from query.workers import bind
from store import __version__

logger = logging.getLogger(__name__)
T = TypeVar("T")

INSTRUCTIONS = """\
evidex answers questions from one validated document bundle with admitted evidence:
exact, citable spans of the source documents, and a verdict on whether they close the
question. Call search_evidence first. Cite only items with admitted=true of a PASS
answer, by doc_id, revision and [start, end). Treat UNKNOWN as "the documents do not
say": its reasons name the term no document holds and often a "did you mean". Use
read_span to quote more of a document around a span."""

SEARCH_DESCRIPTION = """\
Search the document bundle for evidence on a question or claim, and get a verdict on
whether that evidence answers it.

Returns up to k items, best first. Each has doc_id, title, revision, the exact character
span [start, end) in the document, the quoted text (exactly document[start:end)), a
score, source_uri, and admitted (whether it may be cited). The verdict:
- PASS: the admitted items close the question: every name, version, identifier or rare
  term it mentions is found in them. Cite those items.
- FAIL: evidence was found but none may be cited (e.g. outside its validity window, or
  of a source role excluded by `roles`).
- UNKNOWN: the documents do not settle it. An `anchor_absent` reason names the term that
  occurs in no document you may see, often with "did you mean '...'?"; `no_evidence`
  means nothing was found. Do not answer from UNKNOWN items as if they were evidence;
  retry with the suggested spelling or say the documents do not say."""

READ_DESCRIPTION = """\
Read the exact text of a document span returned by search_evidence, optionally with
context around it. Give doc_id and revision exactly as search_evidence returned them and
the [start, end) character offsets (end exclusive). Fails with an error when that
revision is no longer live (the document changed since: search again and cite the live
text), when the span is outside the document, or when the document is not visible to
you."""

STATUS_DESCRIPTION = """\
Which bundle is answering: its id, when it was built and activated, and how many
documents and chunks you may see. Record the bundle id with your citations; it changes
when a new bundle is activated."""

Query = Annotated[str, Field(description="the question or claim, in natural language")]
K = Annotated[int, Field(ge=1, le=MAX_TOOL_K, description="evidence items to return")]
Roles = Annotated[
    list[SourceRole] | None,
    Field(description="accept only evidence from these source roles (default: all)"),
]


class EvidexTools:
    """The tools, the bundle they read, and who calls them.

    Args:
        reader: the bundle reader (follows ``ACTIVE``).
        local: the identity of every caller over stdio; ``None`` over HTTP, where each
            request's identity is the one :class:`query.gate.Gate` authenticated.
        audit: over stdio, the audit log a line per tool call goes to (over HTTP the
            gate writes it).
        audit_queries: write the query text into audit lines.
    """

    def __init__(
        self,
        reader: BundleReader,
        *,
        local: Identity | None = None,
        audit: AuditLog | None = None,
        audit_queries: bool = False,
    ) -> None:
        self.holder = BundleHolder(reader)
        self.local = local
        self.audit = audit
        self.audit_queries = audit_queries

    def caller(self, ctx: Context | None) -> tuple[Identity, dict[str, Any] | None]:
        """The caller's identity and, over HTTP, its request's state (for the audit)."""
        if self.local is not None:
            return self.local, None
        request = None
        if ctx is not None:
            with contextlib.suppress(ValueError):  # no request: an in-process call
                request = ctx.request_context.request
        state = getattr(request, "scope", {}).get("state")
        if not isinstance(state, dict):
            return ANONYMOUS, None
        identity = state.get("identity")
        return (identity if isinstance(identity, Identity) else ANONYMOUS), state

    def _note(self, state: dict[str, Any] | None, tool: str, **fields: Any) -> None:
        """The call's audit fields: into the request's line over HTTP, one line over stdio."""
        if state is not None:
            record(state, tool=tool, **fields)
            return
        if self.audit is None:
            return
        query = fields.pop("query", None)
        line = {"time": now_utc(), "principal": "local", "auth": "local", "pid": os.getpid()}
        line |= {"method": "tools/call", "route": tool, **fields}
        if self.audit_queries and query is not None:
            line["query"] = query
        try:
            self.audit.write(line)
        except OSError as exc:
            logger.error("audit line not written to %s: %s", self.audit.path, exc)

    def _run(
        self, state: dict[str, Any] | None, tool: str, bundle_id: str, call: Callable[[], T]
    ) -> T:
        """Run a tool body; a :class:`ToolInputError` is audited and becomes the SDK's tool
        error, whose message reaches the model (any other exception is logged and hidden)."""
        try:
            return call()
        except ToolInputError as exc:
            self._note(state, tool, bundle_id=bundle_id, error=str(exc))
            raise ToolError(str(exc)) from None

    def search_evidence(
        self, ctx: Context, query: Query, k: K = 5, roles: Roles = None
    ) -> SearchResult:
        """``search_evidence``: the routed answer and its verdict (``SEARCH_DESCRIPTION``)."""
        identity, state = self.caller(ctx)
        bundle = self.holder.bundle()

        def run() -> Answer:
            return search(bundle, query, identity=identity, k=k, roles=roles)

        result = self._run(state, "search_evidence", bundle.bundle_id, run)
        self._note(
            state,
            "search_evidence",
            query=query,
            bundle_id=bundle.bundle_id,
            access=sorted(identity.access),
            **returned(result),
        )
        return search_result(result)

    def read_span(
        self,
        ctx: Context,
        doc_id: Annotated[str, Field(description="doc_id of a search_evidence item")],
        revision: Annotated[str, Field(description="its revision, exactly as returned")],
        start: Annotated[int, Field(ge=0, description="first character (inclusive)")],
        end: Annotated[int, Field(ge=1, description="end of the span (exclusive)")],
        context_chars: Annotated[
            int,
            Field(ge=0, le=MAX_CONTEXT_CHARS, description="characters of context each side"),
        ] = 0,
    ) -> SpanText:
        """``read_span``: the exact text of a span of a live revision (``READ_DESCRIPTION``)."""
        identity, state = self.caller(ctx)
        bundle = self.holder.bundle()
        span = self._run(
            state,
            "read_span",
            bundle.bundle_id,
            lambda: read_span(
                bundle, doc_id, revision, start, end, identity=identity, context_chars=context_chars
            ),
        )
        item = {"doc_id": doc_id, "revision": revision, "start": start, "end": end}
        self._note(state, "read_span", bundle_id=bundle.bundle_id, items=[item])
        return span

    def bundle_status(self, ctx: Context) -> BundleStatus:
        """``bundle_status``: the bundle answering, as the caller may see it."""
        identity, state = self.caller(ctx)
        bundle = self.holder.bundle()
        self._note(state, "bundle_status", bundle_id=bundle.bundle_id)
        return bundle_status(bundle, identity=identity, root=self.holder.reader.root)


def build_server(tools: EvidexTools) -> MCPServer:
    """The ``MCPServer`` with the three tools registered (read-only, idempotent)."""
    server: MCPServer = MCPServer(
        "evidex", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    hints = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    for name, description in (
        ("search_evidence", SEARCH_DESCRIPTION),
        ("read_span", READ_DESCRIPTION),
        ("bundle_status", STATUS_DESCRIPTION),
    ):
        server.add_tool(getattr(tools, name), name=name, description=description, annotations=hints)
    return server


def _reader(root: str | None, verify: bool, encoder: Backend, model: Any) -> BundleReader:
    # A library that prints while loading must not write into the stdio protocol stream.
    with contextlib.redirect_stdout(sys.stderr):
        return BundleReader(root, verify=verify, encoder=encoder, model=model)


def serve_stdio(
    root: str | None = None,
    *,
    access: Iterable[str] | None = None,
    roles: Iterable[str] | None = None,
    verify: bool = True,
    encoder: Backend = "auto",
    audit_log: str | os.PathLike[str] | None = None,
    audit_queries: bool = False,
    model: Any = None,
) -> int:
    """Serve the tools over stdin and stdout until the client closes them.

    Raises:
        NoActiveBundleError: nothing is active under ``root``.
        ValueError: an unknown access class.
    """
    identity = local_identity(access, roles)
    audit = None if audit_log is None else AuditLog(audit_log)
    tools = EvidexTools(
        _reader(root, verify, encoder, model),
        local=identity,
        audit=audit,
        audit_queries=audit_queries,
    )
    logger.info(
        "serving MCP over stdio: bundle %s, access %s",
        tools.holder.reader.current.bundle_id,
        ",".join(sorted(identity.access)),
    )
    build_server(tools).run("stdio")
    return 0


def http_app(
    root: str | None = None,
    *,
    principals: str | os.PathLike[str] | None = None,
    anonymous: Anonymous = "public",
    audit_log: str | os.PathLike[str] | None = None,
    audit_queries: bool = False,
    audit_max_bytes: int = DEFAULT_MAX_BYTES,
    audit_backups: int = DEFAULT_BACKUPS,
    verify: bool = True,
    encoder: Backend = "auto",
    model: Any = None,
    host: str = "127.0.0.1",
) -> Any:
    """The streamable-HTTP ASGI app (endpoint ``/mcp``) behind the HTTP API's gate.

    ``host`` is the address it will be served on (a loopback address turns on the
    SDK's DNS-rebinding protection). The other arguments are those of
    :func:`query.server.create_app`.

    Raises:
        NoActiveBundleError: nothing is active yet.
        PrincipalsFileError: ``principals`` cannot be read or is invalid.
        ValueError: ``anonymous="none"`` without a principals file.
    """
    if anonymous == "none" and principals is None:
        raise ValueError("anonymous 'none' needs a principals file: no caller could be served")
    auth = Authenticator(principals, anonymous=anonymous)
    tools = EvidexTools(_reader(root, verify, encoder, model))
    warn_unprotected(tools.holder.reader.current, auth)
    app = build_server(tools).streamable_http_app(
        stateless_http=True, json_response=True, host=host
    )
    audit = None
    if audit_log is not None:
        audit = AuditLog(audit_log, max_bytes=audit_max_bytes, backups=audit_backups)
    return Gate(
        app,
        auth=auth,
        buckets=TokenBuckets(),
        audit=audit,
        audit_queries=audit_queries,
        bundle_id=lambda: tools.holder.reader.current.bundle_id,
    )


def serve_http(
    root: str | None = None, *, host: str = "127.0.0.1", port: int = 8766, **options: Any
) -> int:
    """Serve :func:`http_app` on ``host:port`` (one process) until SIGINT or SIGTERM."""
    import uvicorn

    sock = bind(host, port)
    app = http_app(root, host=host, **options)
    bound_host, bound_port = sock.getsockname()[:2]
    logger.info("serving MCP over streamable HTTP on http://%s:%d/mcp", bound_host, bound_port)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
    return 0
