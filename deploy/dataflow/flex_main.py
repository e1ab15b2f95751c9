"""Dataflow Flex Template entry point of the evidex build.

The Flex Template launcher runs this file with every template parameter as
``--name=value`` plus the Dataflow options of the launch. Two things differ from
``python -m pipelines.build_index``:

* options that argparse declares as presence flags (``store_true``, such as
  ``--title_in_text``) reject ``=value``, so ``--flag=true`` becomes ``--flag`` and
  ``--flag=false`` is dropped;
* the runner defaults to ``DataflowRunner`` when the launch names none.

Everything else goes to :func:`pipelines.build_index.main` unchanged.
"""

import argparse
import sys
from collections.abc import Sequence

from pipelines.build_index import EvidexBuildOptions, main

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no", ""})


def presence_flags() -> frozenset[str]:
    """The ``--option`` strings of evidex build options that take no value."""
    parser = argparse.ArgumentParser(add_help=False)
    EvidexBuildOptions._add_argparse_args(parser)
    flags = (action for action in parser._actions if action.nargs == 0)
    return frozenset(option for action in flags for option in action.option_strings)


def template_argv(argv: Sequence[str]) -> list[str]:
    """Launcher arguments -> arguments ``pipelines.build_index`` accepts.

    Raises:
        ValueError: a presence flag was given a value other than true or false.
    """
    flags = presence_flags()
    out: list[str] = []
    for arg in argv:
        name, has_value, value = arg.partition("=")
        if not (has_value and name in flags):
            out.append(arg)
            continue
        if value.strip().lower() in _TRUE:
            out.append(name)
        elif value.strip().lower() not in _FALSE:
            raise ValueError(f"{name} takes true or false, got {value!r}")
    if not any(a == "--runner" or a.startswith("--runner=") for a in out):
        out.append("--runner=DataflowRunner")
    return out


if __name__ == "__main__":
    sys.exit(main(template_argv(sys.argv[1:])))
