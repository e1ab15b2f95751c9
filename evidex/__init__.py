"""evidex: grounded-retrieval bundles built with Apache Beam, queried for admitted evidence."""

from store import __version__

__all__ = ["__version__"]
