"""The thin query module: load the active bundle and retrieve evidence.

Never imports apache_beam; no text generation in the read path.
"""

from query.bundle import (
    BundleReader,
    LoadedBundle,
    ModelMismatchError,
    NoActiveBundleError,
    load_bundle,
    open_bundle,
)
from query.retrieve import Evidence, retrieve

__all__ = [
    "BundleReader",
    "Evidence",
    "LoadedBundle",
    "ModelMismatchError",
    "NoActiveBundleError",
    "load_bundle",
    "open_bundle",
    "retrieve",
]
