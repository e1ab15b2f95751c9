"""Pure, Beam-free algorithms: the build stages in ``transforms/`` wrap them, and the
read path may call them too.

Each module is named after the stage it serves (``transforms/chunk.py`` runs
``algorithms/chunk.py``, ``transforms/canonicalize.py`` runs ``algorithms/canonicalize.py``, ...);
``normalize``, ``acronyms``, ``attribute_rules`` and ``graph`` serve more than one place or
another algorithm. Nothing here imports ``apache_beam``, ``transforms``, ``pipelines`` or
``query`` (``tests/test_layout.py`` checks it).
"""
