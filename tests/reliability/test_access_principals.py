"""Issue 55: access classes enforced by the server, not claimed by the caller.

A six-document bundle holds all four access classes and five source roles. It is served
(FastAPI's TestClient over ``create_app``, and a real ``evidex serve --workers 2``) with a
principals file of static tokens and a JWT key. For anonymous callers, each principal and
each JWT, every endpoint and surface (evidence, relation and community summaries, graph
expansion, the walk and its paths, "did you mean", ``/bundle``, ``/metrics``) shows zero
rows, ids, revisions or words of documents the caller may not see; forged ``access`` and
``roles`` widenings are 403; bad, expired, forged and query-string tokens are 400/401 with
no detail on which part failed; and every request leaves one audit line that names exactly
what was returned.
"""

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import jwt
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from fastapi.testclient import TestClient

from query import open_bundle
from query.credentials import hash_token, new_token
from query.server import create_app
from tests.conftest import free_port, validate_and_activate, write_corpus

pytestmark = pytest.mark.slow  # one real build for the module, then many requests

CORPUS = {
    "handbook.md": "# Handbook\n\nNorthwind Bank operates the Lumen payment network for its "
    "member banks.",
    "faq.md": "# FAQ\n\nThe Harbor Authority supervises the Lumen payment network and Northwind "
    "Bank.",
    "roadmap.md": "# Roadmap\n\nNorthwind Bank plans the Quillfeather upgrade of the Lumen "
    "payment network.",
    "ops.md": "# Operations\n\nLumen operators at Northwind Bank rotate the Cobaltine "
    "certificates of the Harbor Authority.",
    "salaries.md": "# Salaries\n\nThe Saffronel salary band for staff engineers at Northwind "
    "Bank is capped at Rs 9000 per month.",
    "incident.md": "# Incident\n\nThe Obsidian breach exposed Lumen payment network keys held "
    "by Northwind Bank.",
}
CLASS = {
    "handbook.md": "public",
    "faq.md": "public",
    "roadmap.md": "internal",
    "ops.md": "internal",
    "salaries.md": "confidential",
    "incident.md": "restricted",
}
ROLE = {
    "handbook.md": "guide",
    "faq.md": "faq",
    "roadmap.md": "note",
    "ops.md": "guide",
    "salaries.md": "policy",
    "incident.md": "transcript",
}
SECRETS = {  # words only that document holds
    "roadmap.md": ("quillfeather", "plans"),
    "ops.md": ("cobaltine", "certificates"),
    "salaries.md": ("saffronel", "9000"),
    "incident.md": ("obsidian", "breach", "exposed"),
}
ALL = ("public", "internal", "confidential", "restricted")
PRINCIPALS = {  # id -> (access, roles)
    "staff": (("public", "internal"), None),
    "hr": (("public", "internal", "confidential"), None),
    "security": (ALL, None),
    "ops-bot": (ALL, ("guide", "faq")),
}
JWT_GROUPS = {"jwt-staff": ["staff"], "jwt-hr": ["hr", "unknown-group"]}
QUERIES = [
    "Which authority supervises the network that Northwind Bank operates?",  # the walk
    "Summarize the Lumen payment network",  # relation and community surfaces
    "Compare Northwind Bank and Harbor Authority",  # graph expansion
    "What is the Quillfeather upgrade?",
    "Which Cobaltine certificates do Lumen operators rotate?",
    "What is the Saffronel salary band for staff engineers?",
    "What did the Obsidian breach expose?",
    "What is the Quillfeathr upgrade?",  # one edit from a word: "did you mean"
    "Which Cobaltyne certificates exist?",
    "What is the Safronel band?",
    "What was the Obsidan breach?",
]
TYPOS = {"Quillfeathr": "roadmap.md", "Cobaltyne": "ops.md", "Safronel": "salaries.md"}


def visible(access: tuple[str, ...], roles: tuple[str, ...] | None) -> set[str]:
    return {d for d in CORPUS if CLASS[d] in access and (roles is None or ROLE[d] in roles)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundle built and activated once; its chunk ids and revisions by document."""
    from pipelines.build_index import run

    base = tmp_path_factory.mktemp("principals")
    corpus = write_corpus(base / "corpus", CORPUS)
    sidecar = base / "meta.jsonl"
    rows = [{"source_id": d, "access_class": CLASS[d], "source_role": ROLE[d]} for d in CORPUS]
    sidecar.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    root = base / "root"
    argv = ["--input", str(corpus), "--root", str(root), "--metadata", str(sidecar)]
    result = run([*argv, "--surface_vectors"], bundle_id="p1")
    validate_and_activate(str(root), "p1")
    bundle = open_bundle(result.path, verify=False)
    chunks: dict[str, set[str]] = {d: set() for d in CORPUS}
    for chunk_id, doc_id in zip(bundle.chunk_ids, bundle.chunk_doc_ids, strict=True):
        chunks[doc_id].add(chunk_id)
    assert {c: len(r) for c, r in bundle.rows_of_class().items()} == {
        "confidential": 1,
        "internal": 2,
        "public": 2,
        "restricted": 1,
    }
    revisions = {d: bundle.documents[d]["revision"] for d in CORPUS}
    return {"root": root, "base": base, "chunks": chunks, "revisions": revisions}


@pytest.fixture(scope="module")
def signing_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def public_pem(key: Any) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def write_principals(path: Path, tokens: dict[str, str], *, extra: str = "") -> None:
    """A TOML principals file for ``tokens`` (id -> token) and the module's JWT key."""
    lines = []
    for pid, token in tokens.items():
        access, roles = PRINCIPALS.get(pid, (("public",), None))
        lines += [
            "[[principals]]",
            f'id = "{pid}"',
            f'secret_hash = "{hash_token(token)}"',
            f"access = {json.dumps(list(access))}",
        ]
        if roles:
            lines.append(f"roles = {json.dumps(list(roles))}")
        if pid == "limited":
            lines += ["rate = 0.01", "burst = 2"]
        lines.append("")
    lines += [
        "[jwt]",
        'public_key = "jwt.pem"',
        'algorithms = ["EdDSA"]',
        'issuer = "https://idp.test"',
        'audience = "evidex"',
        'access_claim = "groups"',
        "[jwt.access_map]",
        'staff = ["internal"]',
        'hr = ["internal", "confidential"]',
        extra,
    ]
    temporary = path.with_suffix(".tmp")
    temporary.write_text("\n".join(lines), encoding="utf-8")
    os.replace(temporary, path)  # atomically, as an operator should


def make_jwt(key: Any, subject: str, groups: list[str], *, expires_in: float = 600) -> str:
    now = int(time.time())
    claims = {
        "sub": subject,
        "groups": groups,
        "iss": "https://idp.test",
        "aud": "evidex",
        "iat": now,
        "exp": now + int(expires_in),
    }
    return jwt.encode(claims, key, algorithm="EdDSA")


class Caller(NamedTuple):
    headers: dict[str, str]
    allowed: set[str]  # the documents it may see
    principal: str | None
    kind: str
    access: set[str]


class AuditTail:
    """The audit log's lines written since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        return [json.loads(line) for line in data.decode("utf-8").splitlines()]

    def wait(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The next ``count`` lines, waiting for a server process to write them."""
        lines: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(lines) < count:
            assert time.monotonic() < deadline, f"{len(lines)} of {count} audit lines"
            lines += self.new()
            time.sleep(0.02)
        assert len(lines) == count, lines
        return lines


@pytest.fixture(scope="module")
def gateway(served, signing_key, query_encoder) -> dict[str, Any]:
    """One app with principals, JWTs and an audit log, shared by the tests that only read."""
    folder = served["base"] / "gateway"
    folder.mkdir()
    (folder / "jwt.pem").write_bytes(public_pem(signing_key))
    tokens = {pid: new_token(pid) for pid in [*PRINCIPALS, "limited"]}
    write_principals(folder / "principals.toml", tokens)
    audit = folder / "audit.jsonl"
    app = create_app(
        str(served["root"]),
        model=query_encoder,
        principals=folder / "principals.toml",
        audit_log=audit,
    )
    callers: dict[str, Caller] = {
        "anonymous": Caller({}, visible(("public",), None), None, "anonymous", {"public"})
    }
    for pid, (access, roles) in PRINCIPALS.items():
        header = {"Authorization": f"Bearer {tokens[pid]}"}
        callers[pid] = Caller(header, visible(access, roles), pid, "token", set(access))
    for subject, groups in JWT_GROUPS.items():
        header = {"Authorization": f"Bearer {make_jwt(signing_key, subject, groups)}"}
        access = (
            ("public", "internal", "confidential") if "hr" in groups else ("public", "internal")
        )
        callers[subject] = Caller(
            header, visible(access, None), f"jwt:{subject}", "jwt", set(access)
        )
    return {
        "client": TestClient(app),
        "tail": AuditTail(audit),
        "tokens": tokens,
        "callers": callers,
        "folder": folder,
    }


def assert_shows_only(text: str, allowed: set[str], served: dict[str, Any], query: str = ""):
    """Nothing of a document outside ``allowed`` is in ``text``: no doc id, revision,
    chunk id, nor any word only it holds (unless the query itself says it)."""
    lowered, asked = text.lower(), query.lower()
    for doc in set(CORPUS) - allowed:
        assert doc not in text, (doc, text[:500])
        assert served["revisions"][doc] not in text, doc
        assert not any(c in text for c in served["chunks"][doc]), doc
        for word in SECRETS.get(doc, ()):
            said = re.compile(rf"\b{word}\b")
            assert said.search(asked) or not said.search(lowered), (doc, word, text[:800])


CALLERS = ["anonymous", *PRINCIPALS, *JWT_GROUPS]


@pytest.mark.parametrize("caller", CALLERS)
def test_every_surface_shows_only_what_the_caller_may_see(caller, served, gateway):
    client, tail = gateway["client"], gateway["tail"]
    headers, allowed, principal, kind, _ = gateway["callers"][caller]
    tail.new()
    answered = []
    for query in QUERIES:
        response = client.post("/retrieve", json={"query": query, "k": 4}, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert_shows_only(response.text, allowed, served, query)
        docs = {e["doc_id"] for e in body["evidence"]}
        assert docs <= allowed
        assert len(body["evidence"]) == min(4, len(allowed))  # filtered before top-k
        for word, doc in TYPOS.items():  # "did you mean" only from visible documents
            if word in query.split():
                suggested = "did you mean" in json.dumps(body["reasons"])
                assert suggested == (doc in allowed), (caller, query, body["reasons"])
        if query.startswith("Which authority"):  # the walk and its explain paths
            assert body["walk"] is not None and body["walk"]["paths"]
        if query.startswith(("Summarize", "Compare")):
            assert body["knowledge"]  # derived rows, each of visible evidence only
        answered.append(body)
    for doc, words in SECRETS.items():  # the positive control: what it may see, it finds
        if doc in allowed:
            query = next(q for q in QUERIES[3:7] if words[0] in q.lower())
            body = client.post("/retrieve", json={"query": query, "k": 1}, headers=headers)
            assert body.json()["evidence"][0]["doc_id"] == doc
            answered.append(body.json())
    info = client.get("/bundle", headers=headers)
    assert info.status_code == 200
    assert_shows_only(info.text, allowed, served)
    chunks = sum(len(served["chunks"][d]) for d in allowed)
    assert info.json()["row_counts"]["chunks"] == chunks
    assert info.json()["caller"]["principal"] == principal
    metrics = client.get("/metrics", headers=headers)
    assert metrics.status_code == 200
    assert_shows_only(metrics.text, allowed, served)
    assert client.get("/health", headers=headers).status_code == 200

    lines = tail.new()
    assert [line["route"] for line in lines] == ["/retrieve"] * len(answered) + [
        "/bundle",
        "/metrics",
        "/health",
    ]
    for line, body in zip(lines, answered, strict=False):
        assert line["principal"] == principal and line["status"] == 200
        assert line["bundle_id"] == "p1" and "query" not in line
        assert line["items"] == [
            {"doc_id": e["doc_id"], "revision": e["revision"], "start": e["start"], "end": e["end"]}
            for e in body["evidence"]
        ]
        assert line["derived"] == [{"kind": d["kind"], "id": d["id"]} for d in body["knowledge"]]
    assert {line["auth"] for line in lines} == {kind}


@pytest.mark.parametrize("caller", CALLERS)
def test_a_request_may_narrow_its_access_but_never_widen_it(caller, served, gateway):
    client, tail = gateway["client"], gateway["tail"]
    headers, allowed, principal, _, granted = gateway["callers"][caller]
    tail.new()
    statuses = []
    forged = sorted(set(ALL) - granted)
    if forged:
        response = client.post(
            "/retrieve", json={"query": "Northwind Bank", "access": ALL, "k": 6}, headers=headers
        )
        assert response.status_code == 403, response.text
        detail = response.json()["detail"]
        assert "not granted" in detail and all(repr(c) in detail for c in forged)
        assert "evidence" not in response.text
        statuses.append(403)
    narrowed = client.post(
        "/retrieve", json={"query": "Northwind Bank", "access": ["public"], "k": 6}, headers=headers
    )
    assert narrowed.status_code == 200
    assert {e["doc_id"] for e in narrowed.json()["evidence"]} == allowed & {"handbook.md", "faq.md"}
    statuses.append(200)
    lines = tail.new()
    assert [line["status"] for line in lines] == statuses
    assert all(line["principal"] == principal for line in lines)
    assert all("items" not in line for line in lines[:-1])  # a 403 returned nothing
    assert lines[-1]["access"] == ["public"]


def test_roles_bound_what_a_principal_sees_and_admits(served, gateway):
    client = gateway["client"]
    headers, allowed = gateway["callers"]["ops-bot"][:2]
    assert allowed == {"handbook.md", "faq.md", "ops.md"}
    widened = client.post(
        "/retrieve", json={"query": "Northwind Bank", "roles": ["policy"]}, headers=headers
    )
    assert widened.status_code == 403 and "policy" in widened.json()["detail"]
    narrowed = client.post(
        "/retrieve",
        json={"query": "Lumen payment network", "roles": ["faq"], "k": 3},
        headers=headers,
    )
    assert narrowed.status_code == 200
    body = narrowed.json()
    assert {e["doc_id"] for e in body["evidence"]} == allowed  # seen, but admitted by role
    assert [e["doc_id"] for e in body["evidence"] if e["chunk_id"] in body["admitted"]] == [
        "faq.md"
    ]


BAD_CREDENTIALS = {
    "unknown principal": lambda g, key: "nobody." + g["tokens"]["staff"].partition(".")[2],
    "wrong secret": lambda g, key: "staff." + g["tokens"]["hr"].partition(".")[2],
    "another's secret": lambda g, key: "hr." + g["tokens"]["staff"].partition(".")[2],
    "malformed": lambda g, key: "not a token",
    "garbage jwt": lambda g, key: "eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl",
    "expired jwt": lambda g, key: make_jwt(key, "jwt-hr", ["hr"], expires_in=-120),
    "jwt of another key": lambda g, key: make_jwt(
        ed25519.Ed25519PrivateKey.generate(), "jwt-hr", ["hr"]
    ),
    "jwt alg none": lambda g, key: jwt.encode(
        {"sub": "x", "groups": ["hr"], "exp": int(time.time()) + 600}, None, algorithm="none"
    ),
    "jwt of another issuer": lambda g, key: jwt.encode(
        {"sub": "x", "iss": "https://evil.test", "aud": "evidex", "exp": int(time.time()) + 60},
        key,
        algorithm="EdDSA",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CREDENTIALS))
def test_bad_and_expired_tokens_are_401_without_saying_why(case, served, gateway, signing_key):
    client, tail = gateway["client"], gateway["tail"]
    token = BAD_CREDENTIALS[case](gateway, signing_key)
    tail.new()
    for path, method in (("/retrieve", "POST"), ("/bundle", "GET"), ("/metrics", "GET")):
        response = client.request(
            method,
            path,
            headers={"Authorization": f"Bearer {token}"},
            json={"query": "Northwind Bank"} if method == "POST" else None,
        )
        assert response.status_code == 401, (case, path, response.text)
        assert response.headers["www-authenticate"].startswith('Bearer realm="evidex"')
        detail = response.json()["detail"]
        assert detail in {"invalid or expired credentials", "use Authorization: Bearer <token>"}
    lines = tail.new()
    assert [(line["status"], line["principal"], line["auth"]) for line in lines] == [
        (401, None, "refused")
    ] * 3
    assert all("items" not in line for line in lines)


def test_other_schemes_and_query_string_tokens_are_refused(served, gateway):
    client, tail = gateway["client"], gateway["tail"]
    valid = gateway["tokens"]["security"]
    tail.new()
    basic = client.get("/bundle", headers={"Authorization": "Basic c3RhZmY6c2VjcmV0"})
    assert basic.status_code == 401 and basic.headers["www-authenticate"].startswith("Bearer")
    for name in ("access_token", "token", "api_key"):
        response = client.post(
            f"/retrieve?{name}={valid}",
            json={"query": "What did the Obsidian breach expose?"},
            headers={"Authorization": f"Bearer {valid}"},  # refused even beside a good header
        )
        assert response.status_code == 400, response.text
        assert "Authorization header" in response.json()["detail"]
        assert 'error="invalid_request"' in response.headers["www-authenticate"]
    lines = tail.new()
    assert [line["status"] for line in lines] == [401, 400, 400, 400]
    assert all(valid not in json.dumps(line) for line in lines)  # never written down
    assert all(line["route"] in ("/bundle", "/retrieve") for line in lines)


def test_a_principal_over_its_rate_gets_429_with_retry_after(served, gateway):
    client, tail = gateway["client"], gateway["tail"]
    headers = {"Authorization": f"Bearer {gateway['tokens']['limited']}"}
    tail.new()
    statuses = [client.get("/bundle", headers=headers).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]  # burst 2, then one request per 100 s
    refused = client.get("/bundle", headers=headers)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert client.get("/bundle").status_code == 200  # others are not limited by it
    assert [line["status"] for line in tail.new()] == [200, 200, 429, 429, 200]


def test_anonymous_none_refuses_callers_without_credentials(served, gateway, query_encoder):
    app = create_app(
        str(served["root"]),
        model=query_encoder,
        principals=gateway["folder"] / "principals.toml",
        anonymous="none",
    )
    client = TestClient(app)
    refused = client.post("/retrieve", json={"query": "Northwind Bank"})
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="evidex"'
    assert client.get("/bundle").status_code == 401 and client.get("/metrics").status_code == 401
    assert client.get("/health").status_code == 200  # liveness probes stay open
    headers = {"Authorization": f"Bearer {gateway['tokens']['staff']}"}
    assert client.post("/retrieve", json={"query": "Northwind Bank"}, headers=headers).is_success
    with pytest.raises(ValueError, match="needs a principals file"):
        create_app(str(served["root"]), model=query_encoder, anonymous="none")


def test_without_principals_the_server_warns_and_serves_public_rows_only(
    served, query_encoder, caplog
):
    with caplog.at_level("WARNING", logger="query.server"):
        client = TestClient(create_app(str(served["root"]), model=query_encoder))
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "no principals file is configured" in warning
    assert "1 confidential, 2 internal, 1 restricted" in warning
    response = client.post("/retrieve", json={"query": "What did the Obsidian breach expose?"})
    assert {e["doc_id"] for e in response.json()["evidence"]} <= {"handbook.md", "faq.md"}
    forged = client.post("/retrieve", json={"query": "breach", "access": ["restricted"]})
    assert forged.status_code == 403 and "anonymous callers" in forged.json()["detail"]
    token = client.get("/bundle", headers={"Authorization": "Bearer staff.abcdefghijklmnopqrstu"})
    assert token.status_code == 401  # no principals: no token is valid


def test_a_rewritten_principals_file_rotates_keys_without_a_restart(
    served, signing_key, query_encoder, tmp_path, caplog
):
    (tmp_path / "jwt.pem").write_bytes(public_pem(signing_key))
    old = {"staff": new_token("staff")}
    path = tmp_path / "principals.toml"
    write_principals(path, old)
    client = TestClient(create_app(str(served["root"]), model=query_encoder, principals=path))
    old_header = {"Authorization": f"Bearer {old['staff']}"}
    assert client.get("/bundle", headers=old_header).json()["caller"]["principal"] == "staff"

    new = {"staff": new_token("staff")}
    write_principals(path, new)
    assert client.get("/bundle", headers=old_header).status_code == 401  # revoked at once
    new_header = {"Authorization": f"Bearer {new['staff']}"}
    assert client.get("/bundle", headers=new_header).status_code == 200

    path.write_text("[[principals]]\nid = 'broken", encoding="utf-8")  # a bad edit
    with caplog.at_level("ERROR", logger="query.principals"):
        assert client.get("/bundle", headers=new_header).status_code == 200  # the last good
    assert "not reloaded" in caplog.text

    other = ed25519.Ed25519PrivateKey.generate()  # the issuer's key rotates
    write_principals(path, new)
    jwt_header = {"Authorization": f"Bearer {make_jwt(other, 'jwt-staff', ['staff'])}"}
    assert client.get("/bundle", headers=jwt_header).status_code == 401
    (tmp_path / "jwt.pem").write_bytes(public_pem(other))
    assert client.get("/bundle", headers=jwt_header).status_code == 200


def _serve(root: Path, port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "evidex.cli", "serve", "--root", str(root)]
    return subprocess.Popen(
        [*command, "--port", str(port), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _until_both_workers(
    tail: AuditTail, workers: set[int], status: int, method: str, url: str, **kw: Any
) -> list[tuple[dict[str, Any], httpx.Response]]:
    """Send one request on new connections until each worker has answered it with
    ``status`` (the audit lines say which worker answered): the lines and responses."""
    headers = {"connection": "close", **kw.pop("headers", {})}
    pairs = []
    deadline = time.monotonic() + 60
    while {line["pid"] for line, _ in pairs} != workers:
        assert time.monotonic() < deadline, [line["pid"] for line, _ in pairs]
        response = httpx.request(method, url, headers=headers, timeout=30, **kw)
        assert response.status_code == status, response.text
        (line,) = tail.wait(1)
        assert line["status"] == status and line["pid"] in workers
        pairs.append((line, response))
    return pairs


def test_two_workers_enforce_principals_rates_and_rotation(served, signing_key, tmp_path):
    (tmp_path / "jwt.pem").write_bytes(public_pem(signing_key))
    tokens = {"staff": new_token("staff"), "limited": new_token("limited")}
    principals = tmp_path / "principals.yaml"
    toml = tmp_path / "principals.toml"
    write_principals(toml, tokens)
    principals.write_text(yaml.safe_dump(tomllib.loads(toml.read_text())), encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(
        served["root"], port, "--workers", "2", "--principals", str(principals),
        "--audit-log", str(audit),
    )  # fmt: skip
    tail = AuditTail(audit)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                if httpx.get(f"{base}/health", timeout=10).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        tail.wait(1)
        with open(f"/proc/{server.pid}/task/{server.pid}/children", encoding="ascii") as handle:
            workers = {int(p) for p in handle.read().split()}
        assert len(workers) == 2

        url = f"{base}/retrieve"
        ask = {"json": {"query": "Northwind Bank", "k": 6}}
        staff = {"Authorization": f"Bearer {tokens['staff']}"}
        for line, response in _until_both_workers(
            tail, workers, 200, "POST", url, headers=staff, **ask
        ):
            evidence = response.json()["evidence"]
            assert {e["doc_id"] for e in evidence} == visible(("public", "internal"), None)
            assert line["principal"] == "staff"
            assert line["items"] == [
                {k: e[k] for k in ("doc_id", "revision", "start", "end")} for e in evidence
            ]
        for _, response in _until_both_workers(tail, workers, 200, "POST", url, **ask):
            assert {e["doc_id"] for e in response.json()["evidence"]} == {"handbook.md", "faq.md"}

        limited = {"connection": "close", "Authorization": f"Bearer {tokens['limited']}"}
        refused_by: set[int] = set()
        passed = 0
        while refused_by != workers:  # burst 2 across both workers, not 2 each
            r = httpx.get(f"{base}/bundle", headers=limited, timeout=30)
            (line,) = tail.wait(1)
            assert r.status_code == line["status"] in (200, 429)
            passed += r.status_code == 200
            if r.status_code == 429:
                refused_by.add(line["pid"])
                assert int(r.headers["retry-after"]) >= 1
            assert len(refused_by) + passed < 40
        assert passed == 2

        rotated = {"staff": new_token("staff"), "limited": tokens["limited"]}
        write_principals(toml, rotated)
        temporary = tmp_path / "principals.yaml.tmp"
        temporary.write_text(yaml.safe_dump(tomllib.loads(toml.read_text())), encoding="utf-8")
        os.replace(temporary, principals)
        _until_both_workers(tail, workers, 401, "POST", url, headers=staff, **ask)
        fresh = {"Authorization": f"Bearer {rotated['staff']}"}
        _until_both_workers(tail, workers, 200, "POST", url, headers=fresh, **ask)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        finally:
            server.kill()
    assert server.returncode == 0, server.stdout.read() if server.stdout else ""


def test_the_audit_time_is_utc(served, gateway):
    gateway["tail"].new()
    gateway["client"].get("/health")
    (line,) = gateway["tail"].new()
    stamp = dt.datetime.fromisoformat(line["time"].replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 60
    assert line["principal"] is None and line["auth"] == "anonymous"


def test_query_text_is_audited_only_when_asked(served, gateway, query_encoder, tmp_path):
    audit = tmp_path / "audit.jsonl"
    app = create_app(
        str(served["root"]),
        model=query_encoder,
        principals=gateway["folder"] / "principals.toml",
        audit_log=audit,
        audit_queries=True,
    )
    client = TestClient(app)
    query = "What did the Obsidian breach expose?"
    headers = gateway["callers"]["security"].headers
    body = client.post("/retrieve", json={"query": query, "k": 2}, headers=headers).json()
    client.post("/retrieve", json={"query": query, "access": ["restricted"]})  # a 403
    allowed, refused = AuditTail(audit).new()
    assert allowed["query"] == query and allowed["principal"] == "security"
    assert [i["doc_id"] for i in allowed["items"]] == [e["doc_id"] for e in body["evidence"]]
    assert refused["status"] == 403 and refused["query"] == query and "items" not in refused
