"""Packaging shim for Beam's ``--setup_file``.

Beam builds an sdist from the directory of the file named by ``--setup_file`` and
installs it on every worker, so passing ``--setup_file ./setup.py`` ships evidex (and
its pinned dependencies from ``pyproject.toml``) to Dataflow, Flink or Spark workers
that do not already have it in their container image. All metadata lives in
``pyproject.toml``; this file only gives Beam the entry point it looks for.
"""

from setuptools import setup

setup()
