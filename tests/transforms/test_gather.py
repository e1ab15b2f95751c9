import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from transforms.gather import CollectAll, Gather, single


def _sorted_lists(gathered: dict) -> dict:
    return {name: sorted(values, key=repr) for name, values in gathered.items()}


def test_collect_all_gives_one_list_even_when_empty():
    with TestPipeline() as p:
        full = p | "Full" >> beam.Create([3, 1, 2]) | "CollectFull" >> CollectAll()
        empty = p | "Empty" >> beam.Create([]) | "CollectEmpty" >> CollectAll()
        assert_that(full | "Sort" >> beam.Map(sorted), equal_to([[1, 2, 3]]), label="Full")
        assert_that(empty, equal_to([[]]), label="Empty")


def test_gather_gives_one_element_with_every_input_as_a_list():
    with TestPipeline() as p:
        letters = p | "Letters" >> beam.Create(["b", "a"])
        maps = p | "Maps" >> beam.Create([{"x": 1}])
        none = p | "None" >> beam.Create([])
        gathered = {"letters": letters, "maps": maps, "none": none} | Gather()
        assert_that(
            gathered | beam.Map(_sorted_lists),
            equal_to([{"letters": ["a", "b"], "maps": [{"x": 1}], "none": []}]),
        )
    with TestPipeline() as p:
        nothing = {"a": p | beam.Create([])} | Gather()
        assert_that(nothing, equal_to([]))
    with TestPipeline() as p:  # ... unless it must always give its element
        empties = {"a": p | "A" >> beam.Create([]), "b": p | "B" >> beam.Create([])}
        assert_that(empties | Gather(always=True), equal_to([{"a": [], "b": []}]))


def test_single_and_empty_gather_are_clear():
    assert single([{"a": 1}], {}) == {"a": 1}
    assert single([], {}) == {}
    with pytest.raises(ValueError, match="one element"):
        single([1, 2], None)
    with pytest.raises(ValueError, match="at least one"):
        Gather().expand({})
