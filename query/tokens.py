"""Signed JWTs verified offline (PyJWT): the key or key set named by a principals file's
``[jwt]`` table, the claims it requires, and the caller they describe.

Only public-key algorithms are accepted (``query.principals.ASYMMETRIC``); ``exp`` is
required and enforced (with ``leeway_s``), and ``iss``/``aud`` when the file names them.
A token's access classes are ``default_access`` plus those its ``access_claim`` grants:
through ``access_map`` (claim value -> classes) when there is one, else the claim's values
that are class names. Every failure is one :class:`InvalidCredentials`, whatever part of the
token failed.

Example:
    >>> verifier = JwtVerifier(settings, base=Path("/etc/evidex"))
    >>> verifier.identity(token).access
    frozenset({'public', 'internal'})
"""

from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from query.principals import Identity, JwtSettings, Limit, PrincipalsFileError
from store.config import ACCESS_CLASSES


class InvalidCredentials(Exception):
    """A bearer token that is unknown, malformed, badly signed or expired (no detail
    on which: the response must not say)."""


def _claim_values(value: Any) -> list[str]:
    """A claim as a list of strings: a list as is, a string split on spaces (OAuth
    ``scope`` style); anything else gives nothing."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


class JwtVerifier:
    """Verifies JWTs against the keys of a principals file's ``[jwt]`` table.

    Args:
        settings: the table.
        base: the principals file's folder (key file names are relative to it).

    Raises:
        PrincipalsFileError: the key file cannot be read or holds no public key.
    """

    def __init__(self, settings: JwtSettings, base: Path) -> None:
        self.settings = settings
        self._key: Any = None
        self._keys: dict[str | None, Any] = {}
        name = settings.public_key or settings.jwks or ""
        path = base / name
        try:
            raw = path.read_bytes()
            if settings.public_key:
                self._key = load_pem_public_key(raw)
            else:
                keys = jwt.PyJWKSet.from_json(raw.decode("utf-8")).keys
                self._keys = {k.key_id: k for k in keys}
                if not self._keys:
                    raise ValueError("no usable key")
        except (OSError, ValueError, TypeError, jwt.PyJWTError) as exc:
            raise PrincipalsFileError(f"JWT key file {path}: {type(exc).__name__}: {exc}") from None

    def _key_for(self, token: str) -> Any:
        if self._key is not None:
            return self._key
        kid = jwt.get_unverified_header(token).get("kid")
        if kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise InvalidCredentials

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``.

        Raises:
            InvalidCredentials: any failure (signature, algorithm, expiry, issuer,
                audience, a missing subject, or not a JWT at all).
        """
        s = self.settings
        try:
            return jwt.decode(
                token,
                self._key_for(token),
                algorithms=list(s.algorithms),
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.leeway_s,
                options={
                    "require": ["exp", s.subject_claim],
                    "verify_aud": s.audience is not None,
                },
            )
        except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
            raise InvalidCredentials from exc

    def identity(self, token: str) -> Identity:
        """The caller ``token`` describes: ``jwt:<subject>`` and the classes it grants.

        Raises:
            InvalidCredentials: as :meth:`claims`.
        """
        s = self.settings
        claims = self.claims(token)
        subject = claims.get(s.subject_claim)
        if not isinstance(subject, str) or not subject:
            raise InvalidCredentials
        granted: set[str] = set(s.default_access)
        for value in _claim_values(claims.get(s.access_claim)):
            if s.access_map is not None:
                granted.update(s.access_map.get(value, ()))
            elif value in ACCESS_CLASSES:
                granted.add(value)
        roles = None
        if s.roles_claim is not None and s.roles_claim in claims:
            roles = frozenset(_claim_values(claims[s.roles_claim]))
        return Identity(
            principal=f"jwt:{subject}",
            kind="jwt",
            access=frozenset(granted),
            roles=roles,
            limit=Limit(rate=s.rate, burst=s.burst),
        )
