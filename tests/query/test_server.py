import shutil

import pytest
from fastapi.testclient import TestClient

from query.server import create_app
from store.activation import activate


@pytest.fixture
def served(two_bundle_root, tmp_path, query_encoder):
    root = tmp_path / "r"
    shutil.copytree(two_bundle_root, root)
    return str(root), TestClient(create_app(str(root), model=query_encoder))


def test_health_bundle_and_openapi(served):
    _, client = served
    assert client.get("/health").json() == {"status": "ok", "bundle_id": "b1"}
    assert client.get("/bundle").json()["row_counts"]["documents"] == 7
    assert client.get("/bundle").json()["query_encoder"] == "onnx"
    assert "/retrieve" in client.get("/openapi.json").json()["paths"]


def test_retrieve_returns_admitted_evidence(served):
    _, client = served
    body = client.post("/retrieve", json={"query": "Which volcano is on Sicily?", "k": 2}).json()
    assert body["status"] in {"PASS", "UNKNOWN"}
    top = body["evidence"][0]
    assert top["doc_id"] == "volcano.txt"
    assert {"start", "end", "text", "content_sha256", "arms", "fallback"} <= set(top)
    assert body["route"]["operation"] == "entity" and body["route"]["anchors"] == ["Sicily"]
    assert body["status"] == "PASS"


def test_a_term_the_corpus_lacks_comes_back_as_anchor_absent(served):
    _, client = served
    query = {"query": "Which volcano does volcano.zorbulate() watch on Sicily?", "k": 2}
    body = client.post("/retrieve", json=query).json()
    assert body["status"] == "UNKNOWN"
    absent = [r for r in body["reasons"] if r["code"] == "anchor_absent"]
    assert [r["detail"].split("'")[1] for r in absent] == ["volcano.zorbulate()"]


def test_bad_requests_are_rejected_with_422(served):
    _, client = served
    assert client.post("/retrieve", json={"query": ""}).status_code == 422
    assert client.post("/retrieve", json={"query": "x", "k": 0}).status_code == 422
    assert client.post("/retrieve", json={"query": "x", "bogus": 1}).status_code == 422


def test_the_server_picks_up_a_new_activation(served):
    root, client = served
    activate(root, "b2")
    assert client.get("/health").json()["bundle_id"] == "b2"
    body = client.post("/retrieve", json={"query": "How is glass made?", "k": 1}).json()
    assert body["bundle_id"] == "b2" and body["evidence"][0]["doc_id"] == "glass.txt"
