"""Issue 56: ``EvidexRetriever`` inside real LangChain runnable chains (no mocks).

The session's tiny bundle (``validated_root``: six public documents) is read through
the retriever: its documents quote exactly ``[start, end)`` of their revision, carry
the verdict, and ``require_pass`` returns nothing for an UNKNOWN answer; the async
path gives what the sync path gives; a new activation is followed.
"""

import asyncio
import importlib
import shutil
import sys
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from query import EvidexRetriever, open_bundle
from store.activation import activate

PASSING = "Which sea does the Danube reach?"
ABSENT = "What does the Zambezi delta hold?"  # no document names the Zambezi


def cite(documents: list[Document]) -> list[dict[str, Any]]:
    """What an application hands its model: quotes with their citations."""
    return [
        {
            "cite": f"{d.metadata['doc_id']}@{d.metadata['revision'][:12]}"
            f"[{d.metadata['start']}:{d.metadata['end']})",
            "quote": d.page_content,
            "metadata": d.metadata,
        }
        for d in documents
    ]


def chain_of(retriever: EvidexRetriever) -> Any:
    """``{question, evidence}`` -> a prompt-like dict, the way a RAG chain is wired."""
    gather = RunnableParallel(
        question=RunnablePassthrough(), evidence=retriever | RunnableLambda(cite)
    )
    return gather | RunnableLambda(
        lambda x: {
            "question": x["question"],
            "evidence": x["evidence"],
            "verdicts": sorted({e["metadata"]["verdict"] for e in x["evidence"]}),
        }
    )


@pytest.fixture(scope="module")
def texts(validated_root) -> dict[str, dict[str, Any]]:
    return open_bundle(str(validated_root / "bundles" / "b1"), verify=False).documents


def test_documents_carry_span_revision_score_source_and_verdict(validated_root, texts):
    retriever = EvidexRetriever(root=str(validated_root), k=3)
    out = chain_of(retriever).invoke(PASSING)
    assert out["question"] == PASSING and out["verdicts"] == ["PASS"]
    assert len(out["evidence"]) == 3
    top = out["evidence"][0]["metadata"]
    assert top["doc_id"] == "river.md" and top["admitted"] and top["rank"] == 1
    for entry in out["evidence"]:
        meta = entry["metadata"]
        document = texts[meta["doc_id"]]
        assert meta["revision"] == document["revision"]
        assert entry["quote"] == document["text"][meta["start"] : meta["end"]]
        assert meta["span"] == [meta["start"], meta["end"]]
        assert isinstance(meta["score"], float) and meta["score"] > 0
        assert meta["source_uri"].endswith(meta["doc_id"])
        assert meta["bundle_id"] == "b1" and meta["reasons"][0]["code"] == "admitted"
    assert len({id(e["metadata"]["reasons"]) for e in out["evidence"]}) == 3  # not shared


def test_require_pass_returns_nothing_unless_the_verdict_is_pass(validated_root):
    loose = EvidexRetriever(root=str(validated_root), k=2)
    strict = EvidexRetriever(root=str(validated_root), k=2, require_pass=True)
    unknown = loose.invoke(ABSENT)
    assert unknown and {d.metadata["verdict"] for d in unknown} == {"UNKNOWN"}
    codes = {r["code"] for r in unknown[0].metadata["reasons"]}
    assert "anchor_absent" in codes
    assert chain_of(strict).invoke(ABSENT)["evidence"] == []
    passing = strict.invoke(PASSING)
    assert passing and all(d.metadata["admitted"] for d in passing)
    assert [d.id for d in passing] == [
        d.id for d in loose.invoke(PASSING) if d.metadata["admitted"]
    ]


def test_async_gives_what_sync_gives(validated_root):
    retriever = EvidexRetriever(root=str(validated_root), k=3)
    chain = chain_of(retriever)
    queries = [PASSING, ABSENT, "How does sourdough bread rise?"]

    async def both() -> tuple[Any, list[Any]]:
        one = await chain.ainvoke(PASSING)
        many = await chain.abatch(queries)
        return one, many

    one, many = asyncio.run(both())
    assert one == chain.invoke(PASSING)
    assert many == chain.batch(queries)
    assert many[2]["evidence"][0]["metadata"]["doc_id"] == "bread.txt"
    strict = EvidexRetriever(root=str(validated_root), require_pass=True)
    assert asyncio.run(strict.ainvoke(ABSENT)) == []


def test_the_retriever_follows_active(two_bundle_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(two_bundle_root, root)
    retriever = EvidexRetriever(root=str(root), k=1)
    assert retriever.invoke("How is glass made?")[0].metadata["bundle_id"] == "b1"
    activate(str(root), "b2")
    (found,) = retriever.invoke("How is glass made?")
    assert found.metadata["bundle_id"] == "b2" and found.metadata["doc_id"] == "glass.txt"


def test_without_the_extra_the_import_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core.retrievers", None)  # not installed
    monkeypatch.delitem(sys.modules, "query.langchain_retriever", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'evidex\[langchain\]'"):
        importlib.import_module("query.langchain_retriever")
    monkeypatch.undo()
    assert importlib.import_module("query.langchain_retriever").EvidexRetriever
