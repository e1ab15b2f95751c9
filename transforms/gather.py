"""Gather: PCollections -> one element holding each of them as a list.

The input of every global step (table writers, index builders, canonicalization,
relation aggregation, Louvain). Both transforms group on one constant key: tag
each input, ``Flatten``, ``GroupByKey`` (``CoGroupByKey``'s own scheme in fewer
steps: 8 instead of 13 for a ``CollectAll``). Never a side input: a Beam worker
measures the deep size of every side input it caches (``objsize`` over every
object), which on mention-sized collections cost more than the steps themselves
(80 s of an 880 s profiled build of 1,000 SciFact abstracts).
``beam.combiners.ToList()`` is such a side input in disguise: ``CombineGlobally``
hands the combined list to one to inject its empty default, so :class:`CollectAll`
replaces it.
"""

from typing import Any

import apache_beam as beam

_ONE_KEY = b""
_ONCE = "\x00once"
"""The tag of :class:`CollectAll`'s marker; input names are identifiers, so never this."""


class _Tag(beam.DoFn):
    """``element`` -> ``(one key, (tag, element))``: every gathered input meets under one key."""

    def __init__(self, tag: str) -> None:
        self._tag = tag

    def process(self, element: Any) -> Any:
        yield _ONE_KEY, (self._tag, element)


def _lists(names: tuple[str, ...]) -> Any:
    def lists(item: tuple[bytes, Any]) -> dict[str, list[Any]]:
        grouped: dict[str, list[Any]] = {name: [] for name in names}
        for tag, value in item[1]:
            if tag != _ONCE:
                grouped[tag].append(value)
        return grouped

    return lists


def _only_items(item: tuple[bytes, Any]) -> list[Any]:
    return [value for tag, value in item[1] if tag != _ONCE]


def _group(inputs: dict[str, beam.PCollection], *, once: bool) -> beam.PCollection:
    """One tagging step per input, a ``Flatten`` and a ``GroupByKey`` on one key: what
    ``CoGroupByKey`` does, in fewer steps (each costs Beam graph and bundle set-up time,
    a fixed cost of every build). With ``once``, a one-element ``Create`` adds a marker,
    so the result has its one element even when every input is empty."""
    pipeline = next(iter(inputs.values())).pipeline
    tagged = [
        pcoll
        | f"Tag[{name}]"
        >> beam.ParDo(_Tag(name)).with_output_types(
            tuple[bytes, tuple[str, pcoll.element_type or Any]]
        )
        for name, pcoll in inputs.items()
    ]
    if once:
        tagged.append(
            pipeline
            # Create rather than the bare Impulse under it: the Dask runner translates
            # only Create as a root. No reshuffle: there is one element.
            | "Once" >> beam.Create([b""], reshuffle=False)
            | "Tag[once]"
            >> beam.ParDo(_Tag(_ONCE)).with_output_types(tuple[bytes, tuple[str, bytes]])
        )
    return tagged | "FlattenTagged" >> beam.Flatten() | "GroupAll" >> beam.GroupByKey()


def single(values: list[Any], empty: Any) -> Any:
    """The one element a gathered input holds, e.g. a map a global step emitted whole;
    ``empty`` when the input had none.

    Raises:
        ValueError: more than one element.
    """
    if len(values) > 1:
        raise ValueError(f"expected one element, got {len(values)}")
    return values[0] if values else empty


def batched_rows(batches: list[list[Any]]) -> list[Any]:
    """The rows of a gathered input whose elements are lists of rows (a step that
    emits its rows in bulk, e.g. one list per batch of chunks), in one list."""
    return [row for batch in batches for row in batch]


class Gather(beam.PTransform):
    """``{name: PCollection}`` -> ``PCollection`` of one ``{name: list}`` element.

    Empty inputs give empty lists; when every input is empty there is no element,
    so the step after it does not run at all, unless ``always`` is set.

    Example:
        >>> gathered = {"statements": s, "assignment": a} | Gather()
        >>> gathered | beam.FlatMap(lambda g: aggregate(g["statements"], g["assignment"]))

    Args:
        always: emit the one element even when every input is empty (all lists ``[]``).
    """

    def __init__(self, *, always: bool = False) -> None:
        super().__init__()
        self._always = always

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        if not inputs:
            raise ValueError("Gather needs at least one named PCollection")
        grouped = _group(dict(inputs), once=self._always)
        return grouped | "AsLists" >> beam.Map(_lists(tuple(inputs)))


class CollectAll(beam.PTransform):
    """``PCollection`` -> exactly one element: the list of all its elements, in no
    particular order (``[]`` when there are none), like ``beam.combiners.ToList()``
    without its side input.

    Example:
        >>> rows | CollectAll() | beam.ParDo(WriteSortedTable())
    """

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        return _group({"items": pcoll}, once=True) | "AsList" >> beam.Map(_only_items)
