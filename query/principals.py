"""The principals file of ``evidex serve --principals FILE``: who may call, and what each
caller may see; re-read when it changes.

The file is TOML (``.toml``) or YAML (``.yaml``, ``.yml``)::

    [anonymous]              # callers without credentials (optional)
    rate = 5                 # requests per second, shared by all of them

    [[principals]]
    id = "support-bot"
    secret_hash = "scrypt$16384$8$1$..."   # `evidex principals token support-bot`
    access = ["public", "internal"]        # access classes it may see
    roles = ["faq", "guide"]               # source roles it may see (all when absent)
    rate = 20                              # requests per second (no limit when absent)
    burst = 40                             # bucket size (default: the rate, at least 1)

    [jwt]                                  # signed JWTs, verified offline (optional)
    public_key = "issuer.pem"              # or jwks = "jwks.json"; relative to this file
    algorithms = ["RS256"]
    issuer = "https://idp.example.com"
    audience = "evidex"
    access_claim = "groups"
    access_map = { staff = ["internal"], hr = ["internal", "confidential"] }

A file that no longer parses after a change is refused with an error in the log, and the
principals read before it stay in force (write the file atomically: a temporary file
renamed over it). Key files named by ``[jwt]`` are watched with it.
"""

import logging
import os
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from query.credentials import PRINCIPAL_ID, parse_hash

logger = logging.getLogger(__name__)

AccessClass = Literal["public", "internal", "confidential", "restricted"]
SourceRole = Literal[
    "policy", "guide", "faq", "transcript", "reference", "spec", "note", "news", "other"
]
ASYMMETRIC = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
"""JWT algorithms accepted: public-key signatures only (never ``none`` or a shared HMAC)."""


class Identity(NamedTuple):
    """Who a request comes from and what it may see.

    ``principal`` is ``None`` for an anonymous caller, a file principal's id, or
    ``jwt:<subject>``; ``roles`` ``None`` means every source role. ``kind`` ``"local"``
    is the trusted local user of ``evidex mcp`` over stdio (:mod:`query.mcp_tools`).
    """

    principal: str | None
    kind: Literal["anonymous", "token", "jwt", "local"]
    access: frozenset[str]
    roles: frozenset[str] | None
    limit: "Limit"


class PrincipalsFileError(ValueError):
    """A principals file (or a key file it names) that cannot be read or is invalid."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limit(_Frozen):
    """A request rate: ``rate`` per second with bursts of up to ``burst``."""

    rate: float | None = Field(None, gt=0, description="requests per second (none: unlimited)")
    burst: int | None = Field(None, ge=1, description="bucket size (default: rate, at least 1)")


class PrincipalEntry(Limit):
    """One principal with a static bearer token."""

    id: str = Field(description="principal id; tokens are '<id>.<secret>'")
    secret_hash: tuple[str, ...] = Field(
        description="scrypt hash(es) of its token(s); two during a rotation"
    )
    access: tuple[AccessClass, ...] = Field(min_length=1, description="classes it may see")
    roles: tuple[SourceRole, ...] | None = Field(
        None, min_length=1, description="source roles it may see (default: every role)"
    )

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not PRINCIPAL_ID.match(value):
            raise ValueError("use letters, digits, '_' and '-' (at most 64)")
        return value

    @field_validator("secret_hash", mode="before")
    @classmethod
    def _hashes(cls, value: Any) -> Any:
        values = [value] if isinstance(value, str) else value
        for stored in values or []:
            parse_hash(str(stored))  # a CredentialFormatError is a ValueError
        return values


class JwtSettings(Limit):
    """Signed JWTs verified offline against a public key or a JWKS file."""

    public_key: str | None = Field(None, description="PEM public key file")
    jwks: str | None = Field(None, description="JWKS file (keys chosen by 'kid')")
    algorithms: tuple[str, ...] = Field(("RS256", "ES256", "EdDSA"), min_length=1)
    issuer: str | None = Field(None, description="required 'iss' (not checked when absent)")
    audience: str | None = Field(None, description="required 'aud' (not checked when absent)")
    subject_claim: str = Field("sub", description="claim naming the caller (audited)")
    access_claim: str = Field("evidex_access", description="claim holding access grants")
    access_map: dict[str, tuple[AccessClass, ...]] | None = Field(
        None, description="claim value -> classes; absent: values must be class names"
    )
    default_access: tuple[AccessClass, ...] = Field(
        ("public",), description="classes every valid token may see"
    )
    roles_claim: str | None = Field(
        None, description="claim holding source roles (a token without it sees every role)"
    )
    leeway_s: float = Field(0.0, ge=0, le=300, description="clock skew allowed on exp/nbf")

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        strange = sorted(set(value) - set(ASYMMETRIC))
        if strange:
            raise ValueError(f"algorithms {strange} refused; use public-key ones: {ASYMMETRIC}")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> "JwtSettings":
        if (self.public_key is None) == (self.jwks is None):
            raise ValueError("give exactly one of public_key and jwks")
        return self


class PrincipalsModel(_Frozen):
    """The whole file."""

    principals: tuple[PrincipalEntry, ...] = ()
    jwt: JwtSettings | None = None
    anonymous: Limit = Limit()

    @model_validator(mode="after")
    def _unique(self) -> "PrincipalsModel":
        ids = [p.id for p in self.principals]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"principal ids listed twice: {twice}")
        return self


def read_model(path: str | os.PathLike[str]) -> PrincipalsModel:
    """Parse and validate a principals file (TOML or YAML, by its suffix).

    Raises:
        PrincipalsFileError: unreadable, not TOML/YAML, or not a valid principals file.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise PrincipalsFileError(f"{path}: name it .toml, .yaml or .yml")
    try:
        text = path.read_bytes().decode("utf-8")
        if suffix == ".toml":
            data = tomllib.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text) or {}
        return PrincipalsModel.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise PrincipalsFileError(f"{path}: {problems}") from None
    except Exception as exc:  # OSError, UnicodeDecodeError, TOML and YAML syntax errors
        raise PrincipalsFileError(f"{path}: {type(exc).__name__}: {exc}") from None


def key_files(model: PrincipalsModel, base: Path) -> list[Path]:
    """The key files ``model`` names, resolved against the principals file's folder."""
    if model.jwt is None:
        return []
    return [base / name for name in (model.jwt.public_key, model.jwt.jwks) if name]


def _signature(paths: list[Path]) -> tuple[tuple[int, int, int, int], ...]:
    """What tells a changed file: inode, size, modification and change times (ns)."""
    found = []
    for path in paths:
        try:
            st = os.stat(path)
            found.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        except OSError:
            found.append((-1, -1, -1, -1))
    return tuple(found)


class WatchedFile:
    """A principals file, re-read when it (or a key file it names) changes.

    Each call of :meth:`current` stats the files (a few microseconds) and, when one
    changed, builds a new snapshot with ``build``; a file that no longer builds is logged
    and the last good snapshot is kept. After a fork each process re-reads on its own.

    Example:
        >>> watched = WatchedFile("principals.toml", build=Principals.build)
        >>> snapshot = watched.current()
    """

    def __init__(self, path: str | os.PathLike[str], build: Callable[[Path], Any]) -> None:
        self.path = Path(path).absolute()  # not resolved: a swapped symlink is a change
        self._build = build
        self._lock = threading.Lock()
        before = _signature([self.path])  # taken first: a change during the read shows
        self._snapshot = build(self.path)  # errors at start are the caller's to report
        self._watch(before)

    def current(self) -> Any:
        """The snapshot of the file as it is now (re-read if it changed)."""
        seen = _signature(self._paths)
        if seen == self._seen:
            return self._snapshot
        with self._lock:
            seen = _signature(self._paths)
            if seen != self._seen:
                self._reload(seen)
        return self._snapshot

    def _watch(self, before: tuple[tuple[int, int, int, int], ...]) -> None:
        files = list(getattr(self._snapshot, "files", []))
        self._paths = [self.path, *files]
        self._seen = before + _signature(files)

    def _reload(self, seen: tuple[tuple[int, int, int, int], ...]) -> None:
        before = _signature([self.path])
        try:
            snapshot = self._build(self.path)
        except PrincipalsFileError as exc:
            self._seen = seen  # logged once per change, not once per request
            logger.error("principals file not reloaded, the previous one stays: %s", exc)
            return
        self._snapshot = snapshot
        self._watch(before)
        logger.info("principals file reloaded: %s", self.path)
