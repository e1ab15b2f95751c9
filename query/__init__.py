"""The thin query module: load the active bundle and retrieve evidence.

Never imports apache_beam; no text generation in the read path. The names below are
imported on first use, so ``import query.ner`` (say) does not load the whole read path,
and ``query`` works without the optional extras (``EvidexRetriever`` needs
``pip install 'evidex[langchain]'``).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from query.admission import Admission, admit
    from query.answers import Answer, answer
    from query.bundle import (
        BundleReader,
        LoadedBundle,
        ModelMismatchError,
        NoActiveBundleError,
        load_bundle,
        open_bundle,
    )
    from query.langchain_retriever import EvidexRetriever
    from query.retrieval import Evidence, retrieve
    from query.router import Route, route

_HOME = {
    "Admission": "query.admission",
    "admit": "query.admission",
    "Answer": "query.answers",
    "answer": "query.answers",
    "BundleReader": "query.bundle",
    "EvidexRetriever": "query.langchain_retriever",
    "LoadedBundle": "query.bundle",
    "ModelMismatchError": "query.bundle",
    "NoActiveBundleError": "query.bundle",
    "load_bundle": "query.bundle",
    "open_bundle": "query.bundle",
    "Evidence": "query.retrieval",
    "retrieve": "query.retrieval",
    "Route": "query.router",
    "route": "query.router",
}

__all__ = [
    "Admission",
    "Answer",
    "BundleReader",
    "Evidence",
    "EvidexRetriever",
    "LoadedBundle",
    "ModelMismatchError",
    "NoActiveBundleError",
    "Route",
    "admit",
    "answer",
    "load_bundle",
    "open_bundle",
    "retrieve",
    "route",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'query' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
