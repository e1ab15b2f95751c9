"""The HTTP API's boundary: every request authenticated, rate-limited and audited, and
what a request asks to see narrowed to what its principal may see.

:class:`Gate` is an ASGI wrapper around the app. It identifies the caller
(:class:`query.auth.Authenticator`), answers 400/401 itself for bad or missing
credentials (``WWW-Authenticate`` on every 401) and 429 with ``Retry-After`` past the
principal's rate (:class:`query.ratelimit.TokenBuckets`), and otherwise hands the
request on with ``scope["state"]["identity"]`` set. When it ends it writes one audit line
(:class:`query.audit.AuditLog`) with what the endpoint recorded through :func:`record`.

:func:`narrow` is the rule an endpoint applies: a request's ``access`` and ``roles`` may
narrow its principal's, never widen them (:class:`Forbidden`, a 403).
"""

import json
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import anyio.to_thread

from query.audit import AuditLog, now_utc
from query.auth import Authenticator, Pending, Refusal, is_open
from query.principals import Identity
from query.ratelimit import TokenBuckets, retry_after

logger = logging.getLogger(__name__)
_ANONYMOUS_BUCKET = "\x00anonymous"  # no principal id can be this


class Forbidden(ValueError):
    """A request that asks for more than its principal may see (HTTP 403)."""


class Grant(NamedTuple):
    """What one request may see and admit."""

    access: list[str]
    visible_roles: list[str] | None
    admit_roles: list[str] | None


def _who(identity: Identity) -> str:
    return (
        "anonymous callers" if identity.principal is None else f"principal {identity.principal!r}"
    )


def narrow(identity: Identity, access: Iterable[str] | None, roles: Iterable[str] | None) -> Grant:
    """The classes and roles a request of ``identity`` works with.

    Args:
        identity: the caller.
        access: the access classes the request asks for (``None``: all it may see).
        roles: the source roles the request accepts (``None``: all it may see).

    Raises:
        Forbidden: ``access`` or ``roles`` name something the principal may not see.
    """
    granted = sorted(identity.access)
    if access is None:
        wanted = granted
    else:
        wanted = sorted(set(access))
        extra = sorted(set(wanted) - identity.access)
        if extra:
            raise Forbidden(
                f"access class(es) {extra} are not granted to {_who(identity)} "
                f"(granted: {', '.join(granted)}); a request may narrow its access, not widen it"
            )
    seen = None if identity.roles is None else sorted(identity.roles)
    admit = None if roles is None else sorted(set(roles))
    if admit is not None and seen is not None:
        extra = sorted(set(admit) - set(seen))
        if extra:
            raise Forbidden(
                f"source role(s) {extra} are not granted to {_who(identity)} "
                f"(granted: {', '.join(seen)}); a request may narrow its roles, not widen them"
            )
    return Grant(wanted, seen, admit)


def record(scope_state: dict[str, Any], **fields: Any) -> None:
    """Let the endpoint add ``fields`` (bundle id, items, query, ...) to the audit line."""
    scope_state.setdefault("audit", {}).update(fields)


async def _respond(send: Any, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Gate:
    """ASGI wrapper: authentication, rate limits and the audit line of every request.

    Args:
        app: the ASGI app.
        auth: who may call.
        buckets: the shared token buckets (``None``: no rate limits).
        audit: the audit log (``None``: none written).
        audit_queries: write each ``/retrieve`` query's text into its audit line.
        bundle_id: the bundle served now (for lines of routes that answer no query).
    """

    def __init__(
        self,
        app: Any,
        *,
        auth: Authenticator,
        buckets: TokenBuckets | None,
        audit: AuditLog | None,
        audit_queries: bool,
        bundle_id: Callable[[], str],
    ) -> None:
        self.app = app
        self.auth = auth
        self.buckets = buckets
        self.audit = audit
        self.audit_queries = audit_queries
        self.bundle_id = bundle_id

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        status = 500

        async def recording_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        outcome: Identity | Refusal | Pending | None = None
        try:
            outcome = self.auth.identify(
                scope["headers"], scope.get("query_string", b""), scope["path"]
            )
            if isinstance(outcome, Pending):
                outcome = await anyio.to_thread.run_sync(self.auth.finish, outcome)
            if isinstance(outcome, Refusal):
                challenge = [(b"www-authenticate", outcome.challenge.encode())]
                await _respond(recording_send, outcome.status, outcome.detail, challenge)
                return
            state["identity"] = outcome
            wait = self._wait(outcome, scope["path"])
            if wait > 0:
                detail = f"rate limit of {outcome.limit.rate:g} requests/s exceeded"
                await _respond(
                    recording_send, 429, detail, [(b"retry-after", retry_after(wait).encode())]
                )
                return
            await self.app(scope, receive, recording_send)
        finally:
            if self.audit is not None:
                self._audit(self.audit, scope, state, outcome, status)

    def _wait(self, identity: Identity, path: str) -> float:
        rate = identity.limit.rate
        if self.buckets is None or rate is None or is_open(path):
            return 0.0
        name = identity.principal or _ANONYMOUS_BUCKET
        return self.buckets.take(name, rate=rate, burst=identity.limit.burst)

    def _audit(
        self, audit: AuditLog, scope: Any, state: dict[str, Any], outcome: Any, status: int
    ) -> None:
        identity = outcome if isinstance(outcome, Identity) else None
        fields = dict(state.get("audit", {}))
        query = fields.pop("query", None)
        line = {
            "time": now_utc(),
            "principal": identity.principal if identity else None,
            "auth": identity.kind if identity else "refused",
            "client": (scope.get("client") or ("", 0))[0],
            "pid": os.getpid(),
            "method": scope["method"],
            "route": scope["path"],
            "status": status,
            "bundle_id": fields.pop("bundle_id", None) or self._current_bundle(),
            **fields,
        }
        if self.audit_queries and query is not None:
            line["query"] = query
        try:
            audit.write(line)
        except OSError as exc:
            logger.error("audit line not written to %s: %s", audit.path, exc)

    def _current_bundle(self) -> str | None:
        try:
            return self.bundle_id()
        except Exception:  # the audit line must not fail because the bundle is gone
            return None
