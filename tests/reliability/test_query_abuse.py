"""Query-side abuse (issue 9, item 7) through the Python API and the HTTP API.

Python API contract (``query.retrieve`` / ``query.answer``): ``k`` < 1, a blank
query and an unknown access class raise ``ValueError`` naming the
problem; a 100 KB query and control characters are answered (the work is bounded:
the model reads 256 tokens, BM25 one pass); ``k = 10**6`` costs what ``k = n`` costs.
HTTP contract (``POST /retrieve``): every one of those requests is a 422 with a
readable ``detail`` (limits: ``MAX_QUERY_CHARS``, ``MAX_K``), a body over
``MAX_BODY_BYTES`` (the 100 KB query) is a 413 and an unsized one a 411, before it is
read; never a 5xx, and the server keeps answering ordinary requests in between.
"""

import time
import tracemalloc
import typing

import pytest
from fastapi.testclient import TestClient

from query import answer, load_bundle, retrieve
from query.server import MAX_BODY_BYTES, MAX_K, MAX_QUERY_CHARS, AccessClass, create_app
from store.config import ACCESS_CLASSES

LONG = "gzip " * 20_480  # 100 KiB


@pytest.fixture(scope="module")
def bundle(validated_root, query_encoder):
    return load_bundle(str(validated_root), model=query_encoder)


@pytest.fixture(scope="module")
def client(validated_root, query_encoder):
    return TestClient(create_app(str(validated_root), model=query_encoder))


@pytest.mark.parametrize("call", [retrieve, answer])
@pytest.mark.parametrize(
    ("query", "kwargs", "message"),
    [
        ("tea", {"k": 0}, "k must be positive"),
        ("tea", {"k": -3}, "k must be positive"),
        ("tea", {"access": ["public", "secret"]}, r"unknown access class\(es\) \['secret'\]"),
    ],
)
def test_python_api_rejects_bad_arguments_clearly(bundle, call, query, kwargs, message):
    with pytest.raises(ValueError, match=message):
        call(bundle, query, **kwargs)


@pytest.mark.parametrize("call", [retrieve, answer])
def test_a_blank_query_is_an_error(bundle, call):
    with pytest.raises(ValueError, match="query is empty"):
        call(bundle, " \n\t")


@pytest.mark.parametrize("query", [LONG, "tea\x00\x07\x1b[2J oxidised", "\u202etea\u200b"])
def test_long_and_odd_queries_are_answered_within_bounds(bundle, query):
    tracemalloc.start()
    started = time.monotonic()
    result = answer(bundle, query, k=3)
    elapsed = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.status in {"PASS", "FAIL", "UNKNOWN"}
    assert len(result.evidence) <= 3
    assert peak < 64 * 2**20 and elapsed < 30


def test_a_huge_k_costs_no_more_than_the_eligible_universe(bundle):
    n = len(bundle.chunk_ids)
    peaks = []
    for k in (n, 10**6):
        tracemalloc.start()
        hits = retrieve(bundle, "tea oxidation", k=k)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(hits) == n and len({h.chunk_id for h in hits}) == n
    assert peaks[1] < peaks[0] * 2 + 2**20
    assert len(answer(bundle, "tea oxidation", k=10**6).evidence) == n


def test_http_access_classes_match_the_declared_ones():
    assert set(typing.get_args(AccessClass)) == set(ACCESS_CLASSES)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, f"at most {MAX_QUERY_CHARS} characters"),
        ({"query": "x" * 60_000}, f"at most {MAX_QUERY_CHARS} characters"),
        ({"query": ""}, "at least 1 character"),
        ({"query": "   "}, "query is blank"),
        ({"query": "tea\x00 leaves"}, "control characters"),
        ({"query": "tea \x1b[2J"}, "control characters"),
        ({"query": "tea", "k": 0}, "greater than or equal to 1"),
        ({"query": "tea", "k": 10**6}, f"less than or equal to {MAX_K}"),
        ({"query": "tea", "k": 10**30}, "less than or equal to"),
        ({"query": "tea", "access": ["secret"]}, "public"),
        ({"query": "tea", "access": "public"}, "valid list"),
        ({"query": "tea", "lexical_weight": -1}, "greater than or equal to 0"),
        ({"query": "tea", "surprise": 1}, "Extra inputs are not permitted"),
    ],
)
def test_http_rejects_abuse_with_a_4xx_and_keeps_serving(client, body, detail):
    response = client.post("/retrieve", json=body)
    assert response.status_code == 422, response.text
    assert detail in response.text
    ok = client.post("/retrieve", json={"query": "How is green tea made?", "k": 2})
    assert ok.status_code == 200 and len(ok.json()["evidence"]) == 2


def test_http_rejects_malformed_json_with_a_4xx(client):
    response = client.post(
        "/retrieve", content=b'{"query": "tea", ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert client.get("/health").status_code == 200


def test_http_accepts_the_limits_themselves(client):
    response = client.post("/retrieve", json={"query": "tea " * (MAX_QUERY_CHARS // 4), "k": MAX_K})
    assert response.status_code == 200
    assert len(response.json()["evidence"]) <= MAX_K


def test_http_refuses_an_oversized_or_unsized_body_before_reading_it(client):
    big = b'{"query": "' + LONG.encode() + b'"}'
    assert len(big) > MAX_BODY_BYTES
    response = client.post("/retrieve", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "request body over" in response.json()["detail"]

    def chunked():
        yield b'{"query": "tea"}'

    response = client.post(
        "/retrieve", content=chunked(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 411
    assert client.get("/health").status_code == 200
    assert client.post("/retrieve", json={"query": "tea", "k": 1}).status_code == 200
