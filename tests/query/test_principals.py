"""The parts of the server's boundary, one at a time: token hashes and their constant-time
check, JWT verification (RSA and Ed25519 keys made here, a JWKS file), the token bucket on
an injected clock and shared across a fork, the principals file's reload, and the audit
log's rotation under several writing processes."""

import base64
import hmac
import json
import multiprocessing
import os
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from query.audit import AuditLog
from query.auth import IN_QUERY, INVALID, Authenticator, Pending, Principals, token_in_query
from query.credentials import (
    CredentialFormatError,
    check_token,
    hash_token,
    new_token,
    parse_hash,
    split_token,
)
from query.gate import Forbidden, narrow
from query.principals import (
    Identity,
    JwtSettings,
    Limit,
    PrincipalsFileError,
    WatchedFile,
    read_model,
)
from query.ratelimit import Bucket, TokenBuckets, retry_after, take
from query.tokens import InvalidCredentials, JwtVerifier

FAST = {"n": 2**10, "r": 8, "p": 1}  # cheap scrypt for tests that hash many tokens


# --- tokens and their hashes -------------------------------------------------------------


def test_a_token_names_its_principal_and_only_its_hash_is_stored():
    token = new_token("support-bot")
    principal, secret = split_token(token)  # type: ignore[misc]
    assert principal == "support-bot" and len(base64.urlsafe_b64decode(secret + "=")) == 32
    stored = hash_token(token)
    assert token not in stored and secret not in stored
    scheme, n, r, p, *_ = stored.split("$")
    assert (scheme, int(n), int(r), int(p)) == ("scrypt", 2**14, 8, 1)
    assert check_token(token, stored)
    assert not check_token(token + "x", stored)
    assert not check_token(new_token("support-bot"), stored)
    assert hash_token(token) != stored  # a fresh salt each time
    assert split_token("no-dot") is None and split_token("bad id.secretsecretsecret") is None
    with pytest.raises(ValueError, match="principal id"):
        new_token("has.dot")


def test_a_token_checks_against_its_hash_in_constant_time(monkeypatch):
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    token = new_token("p1")
    stored = hash_token(token, **FAST)
    assert check_token(token, stored) and not check_token("p1.wrongwrongwrongwrong", stored)
    assert len(compared) == 2 and all(len(a) == len(b) == 32 for a, b in compared)


@pytest.mark.parametrize(
    "stored",
    [
        "plain-secret",
        "bcrypt$1$2$3$c2FsdA==$a2V5",
        "scrypt$1000$8$1$c2FsdHNhbHQ=$" + base64.b64encode(b"k" * 32).decode(),  # n not 2^k
        "scrypt$16384$8$1$c2FsdHNhbHQ=$" + base64.b64encode(b"short").decode(),
        "scrypt$16384$8$1$!!!$" + base64.b64encode(b"k" * 32).decode(),
        "scrypt$1048576$64$1$c2FsdHNhbHQ=$" + base64.b64encode(b"k" * 32).decode(),  # 8 GiB
    ],
)
def test_malformed_or_unsafe_hashes_are_refused(stored):
    with pytest.raises(CredentialFormatError):
        parse_hash(stored)


# --- JWTs --------------------------------------------------------------------------------


def _pem(private) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _claims(**extra):
    now = int(time.time())
    return {"sub": "alice", "iat": now, "exp": now + 300, **extra}


@pytest.fixture(scope="module")
def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize("kind", ["rsa", "ed25519"])
def test_jwts_are_verified_against_the_configured_public_key(kind, rsa_key, tmp_path):
    key = rsa_key if kind == "rsa" else ed25519.Ed25519PrivateKey.generate()
    algorithm = "RS256" if kind == "rsa" else "EdDSA"
    (tmp_path / "issuer.pem").write_bytes(_pem(key))
    settings = JwtSettings(
        public_key="issuer.pem",
        algorithms=(algorithm,),
        audience="evidex",
        access_claim="groups",
        access_map={"staff": ("internal",), "hr": ("internal", "confidential")},
        roles_claim="roles",
    )
    verifier = JwtVerifier(settings, tmp_path)
    token = jwt.encode(
        _claims(aud="evidex", groups=["hr", "other"], roles="faq guide"), key, algorithm=algorithm
    )
    identity = verifier.identity(token)
    assert identity.principal == "jwt:alice" and identity.kind == "jwt"
    assert identity.access == {"public", "internal", "confidential"}
    assert identity.roles == {"faq", "guide"}
    refused = {
        "expired": jwt.encode(_claims(aud="evidex", exp=int(time.time()) - 5), key, algorithm),
        "no exp": jwt.encode({"sub": "alice", "aud": "evidex"}, key, algorithm),
        "no subject": jwt.encode({"aud": "evidex", "exp": int(time.time()) + 60}, key, algorithm),
        "audience": jwt.encode(_claims(aud="other"), key, algorithm),
        "other key": jwt.encode(
            _claims(aud="evidex"), ed25519.Ed25519PrivateKey.generate(), "EdDSA"
        ),
        "none": jwt.encode(_claims(aud="evidex"), None, algorithm="none"),
        "hmac with the public key": _hmac_confusion(_pem(key)),
        "tampered": token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"),
        "not a jwt": "a.b.c",
    }
    for name, bad in refused.items():
        with pytest.raises(InvalidCredentials):
            verifier.identity(bad)
            pytest.fail(name)


def _hmac_confusion(public_pem: bytes) -> str:
    """An HS256 token keyed with the public key's PEM (the classic algorithm confusion)."""
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")
    body = json.dumps(_claims(aud="evidex")).encode()
    payload = base64.urlsafe_b64encode(body).rstrip(b"=")
    signature = hmac.new(public_pem, header + b"." + payload, "sha256").digest()
    return b".".join([header, payload, base64.urlsafe_b64encode(signature).rstrip(b"=")]).decode()


def test_a_jwks_file_picks_the_key_by_kid(rsa_key, tmp_path):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keys = []
    for kid, key in (("k1", rsa_key), ("k2", other)):
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": keys}))
    verifier = JwtVerifier(JwtSettings(jwks="jwks.json", algorithms=("RS256",)), tmp_path)
    for kid, key in (("k1", rsa_key), ("k2", other)):
        token = jwt.encode(_claims(evidex_access=["internal"]), key, "RS256", headers={"kid": kid})
        assert verifier.identity(token).access == {"public", "internal"}
    swapped = jwt.encode(_claims(), rsa_key, "RS256", headers={"kid": "k2"})
    unknown = jwt.encode(_claims(), rsa_key, "RS256", headers={"kid": "k9"})
    for bad in (swapped, unknown):
        with pytest.raises(InvalidCredentials):
            verifier.identity(bad)


def test_only_public_key_algorithms_and_one_key_source_are_accepted(tmp_path):
    with pytest.raises(ValueError, match="HS256"):
        JwtSettings(public_key="k.pem", algorithms=("HS256",))
    with pytest.raises(ValueError, match="exactly one"):
        JwtSettings(public_key="k.pem", jwks="k.json")
    with pytest.raises(PrincipalsFileError, match=r"missing\.pem"):
        JwtVerifier(JwtSettings(public_key="missing.pem"), tmp_path)


# --- the principals file -----------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _file(path: Path, tokens: dict[str, str], access: str = '["public", "internal"]') -> None:
    body = "".join(
        f'[[principals]]\nid = "{pid}"\nsecret_hash = "{hash_token(t, **FAST)}"\n'
        f"access = {access}\n\n"
        for pid, t in tokens.items()
    )
    _write(path, body)


def test_toml_and_yaml_files_read_alike_and_errors_name_the_field(tmp_path):
    stored = hash_token(new_token("a"), **FAST)
    toml = tmp_path / "p.toml"
    toml.write_text(f'[[principals]]\nid = "a"\nsecret_hash = "{stored}"\naccess = ["internal"]\n')
    yaml_file = tmp_path / "p.yml"
    yaml_file.write_text(
        f"principals:\n  - id: a\n    secret_hash: '{stored}'\n    access: [internal]\n"
    )
    assert read_model(toml) == read_model(yaml_file)
    assert read_model(toml).principals[0].secret_hash == (stored,)
    entry = '[[principals]]\nid = "a"\nsecret_hash = "{}"\naccess = {}\n'
    cases = {
        "access": entry.format(stored, '["secret"]'),
        "secret_hash": entry.format("hunter2", '["public"]'),
        "listed twice": entry.format(stored, '["public"]') * 2,
        "Extra inputs": entry.format(stored, '["public"]') + 'secret = "x"\n',
        "TOMLDecodeError": "[[principals]\n",
    }
    for expected, text in cases.items():
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(PrincipalsFileError, match=expected):
            read_model(bad)
    with pytest.raises(PrincipalsFileError, match=r"\.toml, \.yaml"):
        read_model(tmp_path / "p.json")


def test_a_changed_file_is_read_again_and_a_broken_one_keeps_the_last_good(tmp_path, caplog):
    path = tmp_path / "principals.toml"
    first = {"a": new_token("a")}
    _file(path, first)
    watched = WatchedFile(path, Principals.build)
    snapshot = watched.current()
    assert watched.current() is snapshot  # unchanged: the same snapshot, no re-read
    second = {"a": new_token("a"), "b": new_token("b")}
    _file(path, second)
    assert set(watched.current().entries) == {"a", "b"}
    with caplog.at_level("ERROR", logger="query.principals"):
        _write(path, "principals = 3")
        kept = watched.current()
        assert set(kept.entries) == {"a", "b"}
        assert watched.current() is kept
    assert caplog.text.count("not reloaded") == 1  # once per change, not per request
    path.unlink()
    assert watched.current() is kept  # a vanished file keeps the last good too
    with pytest.raises(PrincipalsFileError):
        WatchedFile(tmp_path / "missing.toml", Principals.build)


def test_a_rotated_key_file_is_read_again(tmp_path):
    old, new = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "k.pem").write_bytes(_pem(old))
    path = tmp_path / "p.toml"
    path.write_text('[jwt]\npublic_key = "k.pem"\nalgorithms = ["EdDSA"]\n')
    auth = Authenticator(path, anonymous="public")
    header = [(b"authorization", f"Bearer {jwt.encode(_claims(), new, 'EdDSA')}".encode())]
    assert auth.identify(header, b"", "/retrieve") == INVALID
    (tmp_path / "k.pem").write_bytes(_pem(new))
    assert auth.identify(header, b"", "/retrieve").principal == "jwt:alice"


def test_tokens_are_remembered_until_the_file_changes(tmp_path):
    path = tmp_path / "p.toml"
    tokens = {"a": new_token("a")}
    _file(path, tokens)
    auth = Authenticator(path, anonymous="none")
    header = [(b"authorization", f"Bearer {tokens['a']}".encode())]
    pending = auth.identify(header, b"", "/retrieve")
    assert isinstance(pending, Pending)  # the first time: the scrypt check, off the loop
    identity = auth.finish(pending)
    assert isinstance(identity, Identity) and identity.access == {"public", "internal"}
    assert auth.identify(header, b"", "/retrieve") == identity  # then from memory
    wrong = [(b"authorization", b"Bearer a." + b"x" * 43)]
    assert auth.finish(auth.identify(wrong, b"", "/retrieve")) == INVALID
    assert auth.identify(wrong, b"", "/retrieve") == INVALID  # a failure is remembered too
    _file(path, {"a": new_token("a")})  # rotated: the old token is checked afresh, and fails
    assert auth.finish(auth.identify(header, b"", "/retrieve")) == INVALID
    assert auth.identify([], b"", "/retrieve").status == 401  # anonymous "none"
    assert auth.identify([], b"", "/health").principal is None
    assert auth.identify([], b"x=1&Access_Token=abc", "/health") == IN_QUERY
    assert token_in_query(b"q=tea&api_key=") and not token_in_query(b"q=token")


def test_a_request_narrows_but_never_widens_its_principal():
    identity = Identity(
        "p", "token", frozenset({"public", "internal"}), frozenset({"faq"}), Limit()
    )
    assert narrow(identity, None, None) == (["internal", "public"], ["faq"], None)
    assert narrow(identity, ["public"], ["faq"]).access == ["public"]
    with pytest.raises(Forbidden, match=r"\['confidential'\] are not granted to principal 'p'"):
        narrow(identity, ["public", "confidential"], None)
    with pytest.raises(Forbidden, match=r"source role\(s\) \['policy'\]"):
        narrow(identity, None, ["policy"])


# --- rate limits -------------------------------------------------------------------------


def test_the_token_bucket_refills_at_its_rate():
    bucket, wait = take(None, 100.0, rate=2.0, burst=3)
    assert (bucket, wait) == (Bucket(2.0, 100.0), 0.0)
    for _ in range(2):
        bucket, wait = take(bucket, 100.0, rate=2.0, burst=3)
        assert wait == 0.0
    bucket, wait = take(bucket, 100.0, rate=2.0, burst=3)
    assert wait == pytest.approx(0.5) and bucket.tokens == 0.0
    bucket, wait = take(bucket, 100.25, rate=2.0, burst=3)
    assert wait == pytest.approx(0.25)  # half a token so far
    bucket, wait = take(bucket, 100.5, rate=2.0, burst=3)
    assert wait == 0.0
    bucket, _ = take(bucket, 1000.0, rate=2.0, burst=3)
    assert bucket.tokens == 2.0  # never more than the burst
    assert retry_after(0.01) == "1" and retry_after(2.2) == "3"


def test_buckets_by_principal_on_an_injected_clock():
    now = [50.0]
    buckets = TokenBuckets(clock=lambda: now[0], slots=8)
    assert [buckets.take("a", rate=1.0, burst=2) for _ in range(3)] == [0.0, 0.0, 1.0]
    assert buckets.take("b", rate=1.0, burst=2) == 0.0  # another principal, another bucket
    now[0] += 1.0
    assert buckets.take("a", rate=1.0, burst=2) == 0.0
    assert buckets.take("a", rate=1.0, burst=2) == 1.0
    for i in range(40):  # more principals than slots: the idlest slot is reused
        buckets.take(f"p{i}", rate=1.0)


def _take_in_child(buckets: TokenBuckets, out: "multiprocessing.Queue[list[float]]") -> None:
    out.put([buckets.take("shared", rate=0.001, burst=3) for _ in range(2)])


def test_forked_workers_share_one_bucket():
    buckets = TokenBuckets()
    assert buckets.take("shared", rate=0.001, burst=3) == 0.0
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_take_in_child, args=(buckets, out))
    child.start()
    waits = out.get(timeout=30)
    child.join(30)
    assert waits == [0.0, 0.0]  # the child took the other two tokens
    assert buckets.take("shared", rate=0.001, burst=3) > 0  # and the parent sees that


# --- the audit log -----------------------------------------------------------------------


def test_the_audit_log_rotates_by_size_and_keeps_its_backups(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, max_bytes=2048, backups=2)
    for i in range(200):
        log.write({"n": i, "route": "/retrieve"})
    files = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert all(p.stat().st_size < 2048 + 64 for p in tmp_path.glob("audit.jsonl*"))
    kept = [json.loads(x)["n"] for p in ("audit.jsonl.2", "audit.jsonl.1", "audit.jsonl")
            for x in (tmp_path / p).read_text().splitlines()]  # fmt: skip
    assert kept == list(range(kept[0], 200))  # the newest lines, in order, none lost
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError):
        AuditLog(path, max_bytes=10)


def _write_lines(path: str, worker: int, count: int) -> None:
    log = AuditLog(path, max_bytes=16 * 1024, backups=50)
    for i in range(count):
        log.write({"worker": worker, "n": i, "pad": "x" * (i % 50)})


def test_processes_appending_and_rotating_at_once_lose_no_line(tmp_path):
    path = str(tmp_path / "audit.jsonl")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_lines, args=(path, w, 1500)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    lines = [
        json.loads(line)  # every line whole: no interleaved writes
        for p in tmp_path.glob("audit.jsonl*")
        if not p.name.endswith(".lock")
        for line in p.read_text().splitlines()
    ]
    assert len(list(tmp_path.glob("audit.jsonl.*"))) > 3  # it did rotate
    for w in range(3):
        assert sorted(x["n"] for x in lines if x["worker"] == w) == list(range(1500))


# --- the command line --------------------------------------------------------------------


def test_the_cli_makes_tokens_hashes_and_checks_files(tmp_path, capsys, monkeypatch):
    import io

    from evidex.cli import main

    assert main(["principals", "token", "support-bot", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["id"] == "support-bot" and check_token(made["token"], made["secret_hash"])
    monkeypatch.setattr("sys.stdin", io.StringIO(made["token"] + "\n"))
    assert main(["principals", "hash", "--json"]) == 0
    hashed = json.loads(capsys.readouterr().out)
    assert "token" not in hashed and check_token(made["token"], hashed["secret_hash"])
    path = tmp_path / "p.toml"
    stored = hashed["secret_hash"]
    path.write_text(
        f'[[principals]]\nid = "support-bot"\nsecret_hash = "{stored}"\naccess = ["internal"]\n'
    )
    assert main(["principals", "check", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"principals": ["support-bot"], "jwt": False}
    path.write_text("[[principals]]\nid = 'x'\n")
    assert main(["principals", "check", str(path)]) == 1
    assert "secret_hash" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("not a token\n"))
    assert main(["principals", "hash"]) == 1
