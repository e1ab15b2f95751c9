"""Static bearer tokens: their format, their salted hashes, and constant-time checks.

A token is ``<principal id>.<secret>``: the id says which principal's hash to check, the
secret is 32 random bytes in URL-safe base64. A principals file stores only
``hash_token(token)``: scrypt (``hashlib.scrypt``, stdlib) over the whole token with a
salt of its own and the cost parameters written beside it::

    scrypt$16384$8$1$<salt, base64>$<key, base64>

so a stolen file gives no token, and a token cannot be moved to another principal's id.
Comparisons use :func:`hmac.compare_digest`; a token whose principal does not exist
still costs one scrypt (:func:`dummy_check`), so timing does not tell ids apart.

Example:
    >>> token = new_token("support-bot")
    >>> stored = hash_token(token)
    >>> check_token(token, stored)
    True
"""

import base64
import binascii
import functools
import hashlib
import hmac
import re
import secrets

SCHEME = "scrypt"
SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
"""scrypt's cost: about 16 MiB and 40-70 ms of one core per check (OWASP's minimum
for scrypt is N = 2^17 with r = 8 for passwords; tokens here are 256 random bits, so
the hash guards a leaked file, not a guessable secret)."""
SALT_BYTES = 16
KEY_BYTES = 32
SECRET_BYTES = 32
MAX_MEMORY = 128 * 2**20
PRINCIPAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""Principal ids: letters, digits, ``_`` and ``-`` (no dot: the dot ends the id in a token)."""
_SECRET = re.compile(r"^[A-Za-z0-9_-]{16,256}$")


class CredentialFormatError(ValueError):
    """A stored secret hash that is not ``scrypt$N$r$p$salt$key``."""


def new_token(principal_id: str) -> str:
    """A fresh random token for ``principal_id`` (show it once; store only its hash).

    Raises:
        ValueError: the id is not letters, digits, ``_`` and ``-`` (at most 64).
    """
    if not PRINCIPAL_ID.match(principal_id):
        raise ValueError(
            f"principal id {principal_id!r}: use letters, digits, '_' and '-' (at most 64)"
        )
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).rstrip(b"=")
    return f"{principal_id}.{secret.decode('ascii')}"


def split_token(token: str) -> tuple[str, str] | None:
    """``(principal id, secret)`` of a well-formed static token, else ``None``."""
    principal_id, dot, secret = token.partition(".")
    if not dot or not PRINCIPAL_ID.match(principal_id) or not _SECRET.match(secret):
        return None
    return principal_id, secret


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scrypt(token: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        token.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=MAX_MEMORY, dklen=KEY_BYTES
    )


def hash_token(
    token: str,
    *,
    n: int = SCRYPT_N,
    r: int = SCRYPT_R,
    p: int = SCRYPT_P,
    salt: bytes | None = None,
) -> str:
    """The salted scrypt hash of ``token`` to store in a principals file.

    Args:
        token: the whole token, ``<principal id>.<secret>``.
        n, r, p: scrypt's cost parameters (``n`` a power of two).
        salt: for tests only; by default 16 fresh random bytes.

    Returns:
        ``scrypt$n$r$p$<salt base64>$<key base64>``.
    """
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    key = _scrypt(token, salt, n, r, p)
    return f"{SCHEME}${n}${r}${p}${_b64(salt)}${_b64(key)}"


def parse_hash(stored: str) -> tuple[int, int, int, bytes, bytes]:
    """``(n, r, p, salt, key)`` of a stored hash.

    Raises:
        CredentialFormatError: anything but ``scrypt$N$r$p$salt$key`` with sane values.
    """
    parts = stored.split("$")
    try:
        if len(parts) != 6 or parts[0] != SCHEME:
            raise ValueError("not scrypt$N$r$p$salt$key")
        n, r, p = (int(x) for x in parts[1:4])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
        if n < 2 or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16:
            raise ValueError("scrypt cost out of range")
        if 128 * r * n > MAX_MEMORY or len(salt) < 8 or len(key) != KEY_BYTES:
            raise ValueError("scrypt memory, salt or key length out of range")
    except (ValueError, binascii.Error) as exc:
        raise CredentialFormatError(f"secret hash {stored[:16]!r}...: {exc}") from exc
    return n, r, p, salt, key


def check_token(token: str, stored: str) -> bool:
    """Whether ``token`` hashes to ``stored`` (compared in constant time).

    Raises:
        CredentialFormatError: ``stored`` is malformed.
    """
    n, r, p, salt, key = parse_hash(stored)
    return hmac.compare_digest(_scrypt(token, salt, n, r, p), key)


def dummy_check(token: str) -> bool:
    """One scrypt of the default cost, always ``False``: what checking a token of an
    unknown principal costs, so that it takes as long as checking a known one."""
    check_token(token, _dummy_hash())
    return False


@functools.cache
def _dummy_hash() -> str:
    return hash_token("unknown.principal-dummy-secret")
