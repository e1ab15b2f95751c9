"""Issue 56: ``evidex mcp``, driven by the official MCP SDK's own clients.

One bundle of four documents in three access classes is built once for the module.
Over stdio (``mcp.client.stdio``) the local user sees every class: the test lists the
tools, calls each one and checks every returned span against the document text; a
second stdio session follows ``ACTIVE`` to a new bundle, where the old revision of an
edited document is a tool error. Over streamable HTTP (``mcp.client.streamable_http``)
the server authenticates like ``evidex serve``: a principal's token sees its classes,
an anonymous caller public rows only, a wider ``roles`` is refused, a wrong token is a
401, and each tool call leaves an audit line naming what it returned.
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from query import open_bundle
from query.credentials import hash_token, new_token
from tests.conftest import free_port, validate_and_activate, write_corpus

pytestmark = pytest.mark.slow  # one real build for the module, then real server processes

CORPUS = {
    "handbook.md": "# Handbook\n\nNorthwind Bank operates the Lumen payment network for its "
    "member banks.",
    "faq.md": "# FAQ\n\nThe Harbor Authority supervises the Lumen payment network and Northwind "
    "Bank.",
    "roadmap.md": "# Roadmap\n\nNorthwind Bank plans the Quillfeather upgrade of the Lumen "
    "payment network.",
    "salaries.md": "# Salaries\n\nThe Saffronel salary band for staff engineers at Northwind "
    "Bank is capped at Rs 9000 per month.",
}
CLASS = {
    "handbook.md": "public",
    "faq.md": "public",
    "roadmap.md": "internal",
    "salaries.md": "confidential",
}
ROLE = {"handbook.md": "guide", "faq.md": "faq", "roadmap.md": "note", "salaries.md": "policy"}
PRINCIPALS = {  # id -> (access, roles)
    "staff": (["public", "internal"], None),
    "guide-bot": (["public", "internal", "confidential"], ["guide", "faq"]),
}
SECRETS = {"roadmap.md": "plans", "salaries.md": "9000"}  # words only that document holds
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "false"}
TOOLS = {"search_evidence", "read_span", "bundle_status"}


def build(base: Path, corpus: dict[str, str], bundle_id: str, root: Path) -> None:
    """Build ``corpus`` (with the module's classes and roles) into ``root`` and activate it."""
    from pipelines.build_index import run

    folder = write_corpus(base / f"corpus-{bundle_id}", corpus)
    sidecar = base / f"meta-{bundle_id}.jsonl"
    rows = [{"source_id": d, "access_class": CLASS[d], "source_role": ROLE[d]} for d in corpus]
    sidecar.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    run(
        ["--input", str(folder), "--root", str(root), "--metadata", str(sidecar)],
        bundle_id=bundle_id,
    )
    validate_and_activate(str(root), bundle_id)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundle ``m1``, built and activated once; each document's text and revision."""
    base = tmp_path_factory.mktemp("mcp")
    root = base / "root"
    build(base, CORPUS, "m1", root)
    bundle = open_bundle(str(root / "bundles" / "m1"), verify=False)
    documents = {d: bundle.documents[d] for d in CORPUS}
    chunks = {c: 0 for c in CLASS.values()}
    for chunk_class in bundle.access_classes.tolist():
        chunks[chunk_class] += 1
    return {"root": root, "base": base, "documents": documents, "chunks": chunks}


def check_span(item: dict[str, Any], documents: dict[str, dict[str, Any]]) -> None:
    """The item quotes exactly ``[start, end)`` of the live revision of its document."""
    document = documents[item["doc_id"]]
    assert item["revision"] == document["revision"]
    assert item["text"] == document["text"][item["start"] : item["end"]]
    assert item["source_uri"].endswith(item["doc_id"])


@asynccontextmanager
async def stdio_session(root: Path, log: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """``evidex mcp --root ROOT`` started by the SDK's stdio client, its session open."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "evidex.cli", "mcp", "--root", str(root), *extra],
        env=ENV,
    )
    with open(log, "w", encoding="utf-8") as errors:
        async with (
            stdio_client(params, errlog=errors) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A successful tool call's structured result (its text content is the same JSON)."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A refused tool call's message."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


def test_stdio_lists_the_tools_and_every_span_is_the_documents_text(served, tmp_path):
    documents = served["documents"]

    async def scenario() -> None:
        async with stdio_session(served["root"], tmp_path / "stderr.log") as session:
            listed = (await session.list_tools()).tools
            assert {t.name for t in listed} == TOOLS
            for tool in listed:
                assert len(tool.description or "") > 150 and tool.output_schema
                assert tool.annotations is not None and tool.annotations.read_only_hint
            search = next(t for t in listed if t.name == "search_evidence")
            assert search.input_schema["required"] == ["query"]
            assert {"query", "k", "roles"} == set(search.input_schema["properties"])

            found = await call(session, "search_evidence", query="What is the Saffronel band?")
            assert found["verdict"] == "PASS" and found["bundle_id"] == "m1"
            assert found["items"][0]["doc_id"] == "salaries.md"  # the local user sees all
            assert found["items"][0]["admitted"]
            wide = await call(session, "search_evidence", query="Northwind Bank", k=4)
            assert {i["doc_id"] for i in wide["items"]} == set(CORPUS)
            for item in found["items"] + wide["items"]:
                check_span(item, documents)
                span = await call(
                    session,
                    "read_span",
                    doc_id=item["doc_id"],
                    revision=item["revision"],
                    start=item["start"],
                    end=item["end"],
                    context_chars=12,
                )
                text = documents[item["doc_id"]]["text"]
                assert span["text"] == item["text"] == text[span["start"] : span["end"]]
                assert span["context_before"] == text[max(0, item["start"] - 12) : item["start"]]
                assert span["context_after"] == text[item["end"] : item["end"] + 12]
                assert span["document_chars"] == len(text)

            typo = await call(session, "search_evidence", query="What is the Quillfeathr upgrade?")
            assert typo["verdict"] == "UNKNOWN"
            (absent,) = [r for r in typo["reasons"] if r["code"] == "anchor_absent"]
            assert "'Quillfeathr'" in absent["detail"]
            assert "did you mean 'quillfeather'" in absent["detail"].lower()

            status = await call(session, "bundle_status")
            assert status["bundle_id"] == "m1" and status["activated_at"]
            assert status["row_counts"]["documents"] == len(CORPUS)
            assert status["caller"]["principal"] == "local"

            message = await error(
                session, "read_span", doc_id="faq.md", revision="0" * 64, start=0, end=5
            )
            assert "no longer live" in message
            text = documents["faq.md"]["text"]
            message = await error(
                session,
                "read_span",
                doc_id="faq.md",
                revision=documents["faq.md"]["revision"],
                start=0,
                end=len(text) + 1,
            )
            assert f"has {len(text)} characters" in message
            assert "blank" in await error(session, "search_evidence", query="   ")

    anyio.run(scenario)


def test_stdio_access_narrows_what_the_local_user_sees_and_each_call_is_audited(served, tmp_path):
    audit = tmp_path / "audit.jsonl"
    flags = ["--access", "public", "--audit-log", str(audit)]

    async def scenario() -> dict[str, Any]:
        async with stdio_session(served["root"], tmp_path / "stderr.log", *flags) as session:
            found = await call(session, "search_evidence", query="Northwind Bank", k=4)
            assert {i["doc_id"] for i in found["items"]} == {"handbook.md", "faq.md"}
            roadmap = served["documents"]["roadmap.md"]
            span = {"doc_id": "roadmap.md", "revision": roadmap["revision"], "start": 0, "end": 5}
            message = await error(session, "read_span", **span)
            assert "no document 'roadmap.md' is visible" in message
            return found

    found = anyio.run(scenario)
    searched, refused = audit_lines(audit)
    assert searched["route"] == "search_evidence" and searched["principal"] == "local"
    assert searched["access"] == ["public"] and "query" not in searched
    assert searched["items"] == [
        {k: item[k] for k in ("doc_id", "revision", "start", "end")} for item in found["items"]
    ]
    assert refused["route"] == "read_span" and "is visible" in refused["error"]


def test_stdio_follows_active_and_refuses_a_revision_no_longer_live(served, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(served["root"], root)
    edited = {**CORPUS, "faq.md": CORPUS["faq.md"].replace("supervises", "audits")}

    async def scenario() -> None:
        async with stdio_session(root, tmp_path / "stderr.log") as session:
            before = await call(
                session, "search_evidence", query="Who supervises the Lumen network?"
            )
            (old,) = [i for i in before["items"] if i["doc_id"] == "faq.md"][:1]
            await anyio.to_thread.run_sync(build, tmp_path, edited, "m2", root)
            assert (await call(session, "bundle_status"))["bundle_id"] == "m2"
            span = {k: old[k] for k in ("doc_id", "revision", "start", "end")}
            message = await error(session, "read_span", **span)
            assert "no longer live" in message and old["revision"] in message
            after = await call(session, "search_evidence", query="Who audits the Lumen network?")
            assert after["bundle_id"] == "m2"
            (new,) = [i for i in after["items"] if i["doc_id"] == "faq.md"][:1]
            assert new["revision"] != old["revision"] and "audits" in new["text"]
            span = {k: new[k] for k in ("doc_id", "revision", "start", "end")}
            assert (await call(session, "read_span", **span))["text"] == new["text"]

    anyio.run(scenario)


class HttpServer:
    """``evidex mcp --transport http`` in a real process, its log read on a thread."""

    def __init__(self, root: Path, port: int, *extra: str) -> None:
        command = [sys.executable, "-m", "evidex.cli", "mcp", "--transport", "http"]
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.process = subprocess.Popen(
            [*command, "--root", str(root), "--port", str(port), *extra],
            env={**os.environ, **ENV},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(120):
            self.stop()
            raise AssertionError("server not ready:\n" + "".join(self.lines))

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            if "serving MCP over streamable HTTP" in line:
                self.ready.set()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


@asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """A session of the SDK's streamable-HTTP client sending ``headers`` on every request."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def audited(path: Path, keep: Any, count: int, wait: float = 10.0) -> list[dict[str, Any]]:
    """The audit lines ``keep`` accepts, once there are ``count`` of them (the server
    writes a line after it has answered, so a caller can read the file first), or what
    there is after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            found = [line for line in audit_lines(path) if keep(line)]
        except json.JSONDecodeError:  # a line being written
            found = []
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


QUERIES = [
    "Northwind Bank",
    "What is the Quillfeather upgrade?",
    "What is the Saffronel salary band?",
    "Who supervises the Lumen payment network?",
]


def test_http_principals_see_their_classes_and_anonymous_callers_public_only(served, tmp_path):
    tokens = {pid: new_token(pid) for pid in PRINCIPALS}
    lines = []
    for pid, (access, roles) in PRINCIPALS.items():
        lines += ["[[principals]]", f'id = "{pid}"', f'secret_hash = "{hash_token(tokens[pid])}"']
        lines.append(f"access = {json.dumps(access)}")
        lines += [f"roles = {json.dumps(roles)}"] if roles else []
    principals = tmp_path / "principals.toml"
    principals.write_text("\n".join(lines) + "\n", encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    flags = ["--principals", str(principals), "--audit-log", str(audit)]
    server = HttpServer(served["root"], free_port(), *flags)
    try:
        _http_scenario(server, tokens, served, audit)
    finally:
        server.stop()


def _http_scenario(
    server: HttpServer, tokens: dict[str, str], served: dict[str, Any], audit: Path
) -> None:
    documents = served["documents"]

    def visible(access: list[str], roles: list[str] | None) -> set[str]:
        return {d for d in CORPUS if CLASS[d] in access and (roles is None or ROLE[d] in roles)}

    callers: dict[str, tuple[dict[str, str], set[str]]] = {
        "anonymous": ({}, visible(["public"], None))
    }
    for pid, (access, roles) in PRINCIPALS.items():
        callers[pid] = ({"Authorization": f"Bearer {tokens[pid]}"}, visible(access, roles))

    async def as_caller(headers: dict[str, str], allowed: set[str]) -> list[dict[str, Any]]:
        returned = []
        async with http_session(server.url, headers) as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            for query in QUERIES:
                found = await call(session, "search_evidence", query=query, k=4)
                shown = json.dumps(found)
                for doc in set(CORPUS) - allowed:  # not its id, revision or its words
                    assert doc not in shown and documents[doc]["revision"] not in shown
                    assert SECRETS.get(doc, doc) not in shown
                assert {i["doc_id"] for i in found["items"]} == allowed  # filled from what it sees
                for item in found["items"]:
                    check_span(item, documents)
                returned.append(found)
            for doc in set(CORPUS) - allowed:  # a span it was never shown is not read either
                doc_revision = documents[doc]["revision"]
                message = await error(
                    session, "read_span", doc_id=doc, revision=doc_revision, start=0, end=5
                )
                assert f"no document {doc!r} is visible" in message
            status = await call(session, "bundle_status")
            chunks = sum(
                n for c, n in served["chunks"].items() if any(CLASS[d] == c for d in allowed)
            )
            assert status["row_counts"]["chunks"] == chunks
        return returned

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        seen = {}
        for name, (headers, allowed) in callers.items():
            seen[name] = await as_caller(headers, allowed)
        assert seen["anonymous"][1]["verdict"] == "UNKNOWN"  # Quillfeather: internal only
        assert seen["staff"][1]["verdict"] == "PASS"
        headers = callers["guide-bot"][0]
        async with http_session(server.url, headers) as session:
            message = await error(
                session, "search_evidence", query="Northwind Bank", roles=["policy"]
            )
            assert "not granted" in message and "'policy'" in message
            narrowed = await call(session, "search_evidence", query="Northwind Bank", roles=["faq"])
            assert narrowed["items"]
        return seen

    seen = anyio.run(scenario)

    wrong = httpx.post(
        server.url,
        headers={"Authorization": "Bearer staff.wrong", "Accept": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")

    expected = [found for name in callers for found in seen[name]]
    calls = audited(audit, lambda line: line.get("tool") == "search_evidence", len(expected))
    assert len(calls) >= len(expected)
    for line, found in zip(calls, expected, strict=False):
        assert line["route"] == "/mcp" and line["status"] == 200
        assert line["items"] == [
            {k: item[k] for k in ("doc_id", "revision", "start", "end")} for item in found["items"]
        ]
    principals = [line["principal"] for line in calls[: len(expected)]]
    assert principals == [None] * 4 + ["staff"] * 4 + ["guide-bot"] * 4
    # The refused call is audited, the only 401: not necessarily the last line, since a
    # closing session's request may be logged after the response it was answered with,
    # nor necessarily written yet when the 401 arrives.
    refused = audited(audit, lambda line: line["status"] == 401, 1)
    assert len(refused) == 1 and refused[0].get("principal") is None


def test_stdio_refuses_http_only_flags(served):
    command = [sys.executable, "-m", "evidex.cli", "mcp", "--root", str(served["root"])]
    done = subprocess.run(
        [*command, "--principals", "x.toml"],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV},
    )
    assert (
        done.returncode == 1
        and "--principals and --anonymous apply to --transport http" in done.stderr
    )
