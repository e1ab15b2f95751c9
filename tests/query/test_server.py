import shutil
import threading

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
    assert client.get("/bundle").json()["query_encoder"] == "onnx"  # the model passed in
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


def test_requests_that_arrive_during_a_reload_wait_for_the_new_bundle(served, monkeypatch):
    root, client = served
    reader = client.app.state.reader
    real_reload, loading, go_on = reader.reload, threading.Event(), threading.Event()

    def held_reload() -> bool:  # the real reload, held open until the test lets it finish
        loading.set()
        assert go_on.wait(10)
        return real_reload()

    monkeypatch.setattr(reader, "reload", held_reload)
    activate(root, "b2")
    answers: dict[str, str] = {}

    def health(name: str) -> None:
        answers[name] = client.get("/health").json()["bundle_id"]

    first = threading.Thread(target=health, args=("first",))
    first.start()
    assert loading.wait(10)
    second = threading.Thread(target=health, args=("second",))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # it waits for the reload instead of answering from b1
    go_on.set()
    first.join(10)
    second.join(10)
    assert answers == {"first": "b2", "second": "b2"}


def _samples(text: str) -> dict[str, float]:
    """``name{labels} value`` lines of a Prometheus exposition."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def test_metrics_count_requests_latency_verdicts_and_the_bundle(served):
    _, client = served
    client.get("/health")
    client.post("/retrieve", json={"query": "Which volcano is on Sicily?", "k": 2})
    client.post("/retrieve", json={"query": "   ", "k": 2})
    client.get("/no-such-page")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    assert samples['evidex_http_requests_total{method="GET",path="/health",status="200"}'] == 1
    assert samples['evidex_http_requests_total{method="POST",path="/retrieve",status="200"}'] == 1
    assert samples['evidex_http_requests_total{method="POST",path="/retrieve",status="422"}'] == 1
    assert samples['evidex_http_requests_total{method="GET",path="other",status="404"}'] == 1
    assert (
        samples['evidex_http_request_duration_seconds_count{method="POST",path="/retrieve"}'] == 2
    )
    assert samples['evidex_answers_total{operation="entity",status="PASS"}'] == 1
    assert samples['evidex_bundle_info{bundle_id="b1"}'] == 1
    assert samples["evidex_bundle_age_seconds"] >= 0


def test_docs_work_offline(served):
    _, client = served
    page = client.get("/docs")
    assert page.status_code == 200
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert f"/static/swagger/{asset}" in page.text
        served_asset = client.get(f"/static/swagger/{asset}")
        assert served_asset.status_code == 200 and len(served_asset.content) > 10_000
    assert client.get("/redoc").status_code == 404  # ReDoc would need a CDN: off
