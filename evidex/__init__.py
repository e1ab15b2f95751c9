"""evidex: grounded-retrieval bundles built with Apache Beam, queried for admitted evidence."""

__version__ = "0.1.0"
