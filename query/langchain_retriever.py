"""``EvidexRetriever``: evidex's admitted evidence as a LangChain retriever.

Needs the optional extra: ``pip install 'evidex[langchain]'`` (``langchain-core``).
It reads a local bundle root through the Python API (:func:`query.answers.answer`),
follows ``ACTIVE`` as ``evidex serve`` does, and returns one LangChain ``Document`` per
evidence item: ``page_content`` is the quoted text, exactly ``document[start:end)``,
and the metadata carry the span, revision, score, source and the answer's verdict.
Like the rest of the Python API it is local and trusted: ``access`` chooses the access
classes searched (default: all).

Example:
    >>> from query.langchain_retriever import EvidexRetriever
    >>> retriever = EvidexRetriever(root="/srv/evidex", k=3, require_pass=True)
    >>> for doc in retriever.invoke("How do I read a gzip-compressed file?"):
    ...     print(doc.metadata["doc_id"], doc.metadata["span"], doc.page_content[:60])
"""

import asyncio
from typing import Any, Literal

from pydantic import Field, PrivateAttr

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(
        "EvidexRetriever needs langchain-core: pip install 'evidex[langchain]'"
    ) from exc

from query.answers import Answer, answer
from query.bundle import BundleReader
from query.server import BundleHolder

AccessClass = Literal["public", "internal", "confidential", "restricted"]


def evidence_documents(result: Answer, *, require_pass: bool = False) -> list[Document]:
    """One ``Document`` per evidence item of ``result``, best first.

    With ``require_pass``, nothing unless the verdict is PASS, and then only the items
    admission admitted (the ones that may be cited).
    """
    if require_pass and result.status != "PASS":
        return []
    admitted = {e.chunk_id for e in result.admission.admitted}
    reasons = [{"code": r.code, "detail": r.detail} for r in result.admission.reasons]
    documents = []
    for e in result.evidence:
        if require_pass and e.chunk_id not in admitted:
            continue
        metadata = {
            "doc_id": e.doc_id,
            "title": e.title,
            "revision": e.revision,
            "start": e.start,
            "end": e.end,
            "span": [e.start, e.end],
            "score": e.score,
            "rank": e.rank,
            "source_uri": e.source_uri,
            "source_role": e.source_role,
            "access_class": e.access_class,
            "heading_path": e.heading_path,
            "chunk_id": e.chunk_id,
            "admitted": e.chunk_id in admitted,
            "verdict": result.status,
            "reasons": [dict(r) for r in reasons],  # a copy each: never shared between outputs
            "bundle_id": result.bundle_id,
        }
        documents.append(Document(id=e.chunk_id, page_content=e.text, metadata=metadata))
    return documents


class EvidexRetriever(BaseRetriever):
    """A LangChain retriever over the active evidex bundle under ``root``.

    Raises:
        NoActiveBundleError: on construction, when nothing is active under ``root``.
    """

    root: str | None = Field(None, description="bundle root (default: $EVIDEX_HOME, ./.evidex)")
    k: int = Field(5, ge=1, le=1000, description="evidence items per query")
    access: list[AccessClass] | None = Field(
        None, description="access classes searched (default: all; the Python API is trusted)"
    )
    roles: list[str] | None = Field(
        None, description="source roles admission accepts (default: all)"
    )
    require_pass: bool = Field(
        False, description="return nothing unless the verdict is PASS, then only admitted items"
    )
    lexical_weight: float = Field(1.0, ge=0, description="weight of the BM25 arm in fusion")
    verify: bool = Field(True, description="check every bundle file's sha256 when loading")
    _holder: BundleHolder = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Open the active bundle now, so a missing one fails here, not on first use."""
        super().model_post_init(context)
        self._holder = BundleHolder(BundleReader(self.root, verify=self.verify))

    @property
    def bundle_id(self) -> str:
        """The bundle answering now."""
        return self._holder.bundle().bundle_id

    def answer(self, query: str) -> Answer:
        """The full routed answer (verdict, reasons, evidence) for ``query``."""
        return answer(
            self._holder.bundle(),
            query,
            k=self.k,
            access=self.access,
            roles=self.roles,
            lexical_weight=self.lexical_weight,
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return evidence_documents(self.answer(query), require_pass=self.require_pass)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        result = await asyncio.to_thread(self.answer, query)  # the read path is synchronous
        return evidence_documents(result, require_pass=self.require_pass)
