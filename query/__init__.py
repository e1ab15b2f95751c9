"""The thin query module: load the active bundle and retrieve evidence.

Never imports apache_beam; no text generation in the read path.
"""

from query.bundle import LoadedBundle, ModelMismatchError, NoActiveBundleError, load_bundle
from query.retrieve import Evidence, retrieve

__all__ = [
    "Evidence",
    "LoadedBundle",
    "ModelMismatchError",
    "NoActiveBundleError",
    "load_bundle",
    "retrieve",
]
