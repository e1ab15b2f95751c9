"""The thin query module: load the active bundle and retrieve evidence.

Never imports apache_beam; no text generation in the read path.
"""

from query.admission import Admission, admit
from query.answer import Answer, answer
from query.bundle import (
    BundleReader,
    LoadedBundle,
    ModelMismatchError,
    NoActiveBundleError,
    load_bundle,
    open_bundle,
)
from query.retrieve import Evidence, retrieve
from query.router import Route, route

__all__ = [
    "Admission",
    "Answer",
    "BundleReader",
    "Evidence",
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
