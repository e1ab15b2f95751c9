"""Who is calling: the ``Authorization`` header checked against the principals file.

No credentials: the anonymous caller, who sees ``public`` only (or a 401 under
``--anonymous none``, except on the paths in :data:`OPEN_PATHS`). ``Bearer <token>``:
a static token ``<id>.<secret>`` checked against the principal's salted hash, or a JWT
(three dot-separated parts) verified against the file's key. A token in the query string
is refused (400) and never looked at; a wrong, unknown or expired token is a 401 that does
not say which. Every 401 carries ``WWW-Authenticate: Bearer realm="evidex"``.

A static token's scrypt check costs 40-70 ms of a core, so a token that passed is remembered,
by an HMAC of it under a key of this process, until the principals file changes; a
request that needs the check runs it off the event loop (:meth:`Authenticator.finish`).

Example:
    >>> auth = Authenticator("principals.toml")
    >>> outcome = auth.identify(headers, b"", "/retrieve")
    >>> if isinstance(outcome, Pending):
    ...     outcome = auth.finish(outcome)
"""

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Literal, NamedTuple
from urllib.parse import parse_qsl

from query.credentials import check_token, dummy_check, split_token
from query.principals import (
    Identity,
    Limit,
    PrincipalEntry,
    WatchedFile,
    key_files,
    read_model,
)
from query.tokens import InvalidCredentials, JwtVerifier

Anonymous = Literal["public", "none"]
ANONYMOUS_ACCESS = frozenset({"public"})
OPEN_PATHS = frozenset({"/health", "/docs", "/openapi.json"})
"""Paths answered without credentials even under ``--anonymous none`` (liveness probes
and the API's own description; none of them shows a document)."""
OPEN_PREFIXES = ("/static/",)
TOKEN_PARAMETERS = frozenset(
    {"token", "access_token", "id_token", "api_key", "apikey", "key", "jwt", "bearer", "auth"}
)
"""Query-string names refused outright: a token in a URL ends up in logs and histories."""
REALM = 'Bearer realm="evidex"'
MAX_CACHED = 4096
"""Tokens remembered per principals snapshot (passed and failed, each); then forgotten."""


class Refusal(NamedTuple):
    """A request refused before it reaches the API: status, detail, challenge."""

    status: int
    detail: str
    challenge: str


class Pending(NamedTuple):
    """A static token that needs its scrypt check (see :meth:`Authenticator.finish`)."""

    token: str
    snapshot: "Principals"


INVALID = Refusal(401, "invalid or expired credentials", f'{REALM}, error="invalid_token"')
REQUIRED = Refusal(401, "credentials required: send Authorization: Bearer <token>", REALM)
IN_QUERY = Refusal(
    400,
    "tokens are accepted only in the Authorization header, never in the URL",
    f'{REALM}, error="invalid_request"',
)


class Principals:
    """One reading of a principals file: principals by id, the JWT verifier, and the
    tokens already checked against this reading.

    Raises:
        PrincipalsFileError: from :meth:`build`, for an invalid file or key file.
    """

    def __init__(
        self,
        entries: dict[str, PrincipalEntry],
        jwt: JwtVerifier | None,
        *,
        anonymous: Limit | None = None,
        files: list[Path] | None = None,
    ) -> None:
        self.entries = entries
        self.jwt = jwt
        self.anonymous = anonymous or Limit()
        self.files = files or []
        self._key = secrets.token_bytes(32)
        self._passed: dict[bytes, Identity] = {}
        self._failed: set[bytes] = set()

    @classmethod
    def build(cls, path: Path) -> "Principals":
        """Read ``path`` (and the key file it names) into a snapshot."""
        model = read_model(path)
        jwt = None if model.jwt is None else JwtVerifier(model.jwt, path.parent)
        entries = {p.id: p for p in model.principals}
        return cls(entries, jwt, anonymous=model.anonymous, files=key_files(model, path.parent))

    @classmethod
    def empty(cls) -> "Principals":
        """No principals file: only anonymous callers."""
        return cls({}, None)

    def _fingerprint(self, token: str) -> bytes:
        return hmac.new(self._key, token.encode("utf-8"), hashlib.sha256).digest()

    def remembered(self, token: str) -> Identity | Refusal | None:
        """The outcome of an earlier check of ``token`` against this snapshot, if any."""
        mark = self._fingerprint(token)
        found = self._passed.get(mark)
        if found is not None:
            return found
        return INVALID if mark in self._failed else None

    def check(self, token: str) -> Identity | Refusal:
        """Check a static token against its principal's hashes (scrypt; slow)."""
        parts = split_token(token)
        entry = self.entries.get(parts[0]) if parts else None
        if entry is None:
            dummy_check(token)
            ok = False
        else:  # every hash is checked, so the time does not tell which one matched
            ok = any([check_token(token, stored) for stored in entry.secret_hash])
        mark = self._fingerprint(token)
        if not ok or entry is None:
            if len(self._failed) >= MAX_CACHED:
                self._failed.clear()
            self._failed.add(mark)
            return INVALID
        identity = Identity(
            entry.id,
            "token",
            frozenset(entry.access),
            None if entry.roles is None else frozenset(entry.roles),
            Limit(rate=entry.rate, burst=entry.burst),
        )
        if len(self._passed) >= MAX_CACHED:
            self._passed.clear()
        self._passed[mark] = identity
        return identity


def _bearer(headers: list[tuple[bytes, bytes]]) -> str | Refusal | None:
    """The bearer token of the request, a refusal for a malformed header, or ``None``."""
    values = [v for k, v in headers if k.lower() == b"authorization"]
    if not values:
        return None
    if len(values) > 1:
        return IN_QUERY._replace(detail="one Authorization header at most")
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return INVALID._replace(detail="use Authorization: Bearer <token>")
    return token


def token_in_query(query_string: bytes) -> bool:
    """Whether the URL carries a parameter named like a credential."""
    if not query_string:
        return False
    names = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    return any(name.lower() in TOKEN_PARAMETERS for name, _ in names)


class Authenticator:
    """Turns a request's headers into an :class:`Identity` or a :class:`Refusal`.

    Args:
        principals: the principals file, or ``None`` (anonymous callers only).
        anonymous: ``"public"`` (callers without credentials see public rows) or
            ``"none"`` (they are refused, except on :data:`OPEN_PATHS`).

    Raises:
        PrincipalsFileError: the file is invalid at start.
    """

    def __init__(self, principals: str | os.PathLike[str] | None, *, anonymous: Anonymous) -> None:
        if anonymous not in ("public", "none"):
            raise ValueError(f"anonymous must be 'public' or 'none', not {anonymous!r}")
        self.anonymous = anonymous
        self._file = None if principals is None else WatchedFile(principals, Principals.build)
        self._empty = Principals.empty()

    @property
    def configured(self) -> bool:
        """Whether a principals file is in use."""
        return self._file is not None

    def snapshot(self) -> Principals:
        """The principals in force now (the file re-read if it changed)."""
        return self._empty if self._file is None else self._file.current()

    def identify(
        self, headers: list[tuple[bytes, bytes]], query_string: bytes, path: str
    ) -> Identity | Refusal | Pending:
        """The caller of a request, a refusal, or a static token still to be checked."""
        if token_in_query(query_string):
            return IN_QUERY
        token = _bearer(headers)
        if isinstance(token, Refusal):
            return token
        snapshot = self.snapshot()
        if token is None:
            if self.anonymous == "none" and not is_open(path):
                return REQUIRED
            return Identity(None, "anonymous", ANONYMOUS_ACCESS, None, snapshot.anonymous)
        if token.count(".") == 2:  # header.payload.signature
            if snapshot.jwt is None:
                return INVALID
            try:
                return snapshot.jwt.identity(token)
            except InvalidCredentials:
                return INVALID
        known = snapshot.remembered(token)
        if known is not None:
            return known
        if split_token(token) is None:
            return INVALID
        return Pending(token, snapshot)

    def finish(self, pending: Pending) -> Identity | Refusal:
        """Run the scrypt check of a :class:`Pending` token (slow: off the event loop)."""
        return pending.snapshot.check(pending.token)


def is_open(path: str) -> bool:
    """Whether ``path`` is answered without credentials under ``--anonymous none``."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)
