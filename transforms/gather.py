"""Gather: PCollections -> one element holding each of them as a list.

The input of every global step (table writers, index builders, canonicalization,
relation aggregation, Louvain). Both transforms are a ``CoGroupByKey`` on one
constant key, never a side input: a Beam worker measures the deep size of every
side input it caches (``objsize`` over every object), which on mention-sized
collections cost more than the steps themselves (80 s of an 880 s profiled
build of 1,000 SciFact abstracts). ``beam.combiners.ToList()`` is such a side
input in disguise: ``CombineGlobally`` hands the combined list to one to inject
its empty default, so :class:`CollectAll` replaces it.
"""

from typing import Any

import apache_beam as beam

_ONE_KEY = b""


def _key(element: Any) -> tuple[bytes, Any]:
    return _ONE_KEY, element


def _lists(item: tuple[bytes, dict[str, Any]]) -> dict[str, list[Any]]:
    _, grouped = item
    return {name: list(values) for name, values in grouped.items()}


def single(values: list[Any], empty: Any) -> Any:
    """The one element a gathered input holds, e.g. a map a global step emitted whole;
    ``empty`` when the input had none.

    Raises:
        ValueError: more than one element.
    """
    if len(values) > 1:
        raise ValueError(f"expected one element, got {len(values)}")
    return values[0] if values else empty


class Gather(beam.PTransform):
    """``{name: PCollection}`` -> ``PCollection`` of one ``{name: list}`` element.

    Empty inputs give empty lists; when every input is empty there is no element,
    so the step after it does not run at all.

    Example:
        >>> gathered = {"statements": s, "assignment": a} | Gather()
        >>> gathered | beam.FlatMap(lambda g: aggregate(g["statements"], g["assignment"]))
    """

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        if not inputs:
            raise ValueError("Gather needs at least one named PCollection")
        keyed = {
            name: pcoll
            | f"Key{name}"
            >> beam.Map(_key).with_output_types(tuple[bytes, pcoll.element_type or Any])
            for name, pcoll in inputs.items()
        }
        return keyed | "GroupAll" >> beam.CoGroupByKey() | "AsLists" >> beam.Map(_lists)


class CollectAll(beam.PTransform):
    """``PCollection`` -> exactly one element: the list of all its elements, in no
    particular order (``[]`` when there are none), like ``beam.combiners.ToList()``
    without its side input.

    Example:
        >>> rows | CollectAll() | beam.ParDo(WriteSortedTable())
    """

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        once = pcoll.pipeline | "Once" >> beam.Create([None])
        return (
            {"items": pcoll, "once": once}
            | "GatherItems" >> Gather()
            | "Items" >> beam.Map(lambda gathered: gathered["items"])
        )
