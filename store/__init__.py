"""The bundle layer, evidex's ground floor: bundle layout, manifest read/write and
verification, storage on any Beam filesystem, the ``ACTIVE`` pointer, activation,
history and gc, plus what they and the read path share (configs and defaults, model
resolution, the BM25 tokenizer, the frozen regression suite).

``pipelines``, ``validation``, ``query`` and the ``evidex`` CLI stand on it; it imports
none of them, nor ``transforms`` (``tests/test_layout.py`` checks it).
"""

__version__ = "0.1.0"
