"""Routing rules of :mod:`query.router` that the other query tests do not cover."""

import pytest

from query.router import route


@pytest.mark.parametrize(
    "question",
    [
        # issue 58: "more than one line" is a bound on a quantity, not two compared things.
        "How do I read more than one line from a file?",
        "Can a job hold more than two locks at once?",
        "Why does the parser reject fewer than three arguments?",
        "Is it safe to retry more than twice?",
    ],
)
def test_a_quantity_after_than_compares_nothing(question):
    decision = route(question)
    assert decision.operation != "comparison", decision.reasons


@pytest.mark.parametrize(
    "question",
    [
        "Is gzip faster than bzip2?",
        "Is reading a file line by line slower than reading it whole?",
        "Are cats more common than ferrets as pets?",
        "Is the one-pass parser better than the two-pass one?",
    ],
)
def test_two_things_after_than_still_compare(question):
    assert route(question).operation == "comparison"
