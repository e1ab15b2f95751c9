"""One Great Expectations suite per table.

Each function returns a ``gx.ExpectationSuite``; :mod:`validation.gate` runs it
on the frame from :mod:`validation.frames`.
"""

from collections.abc import Iterable

import great_expectations as gx
from great_expectations import expectations as gxe

_SHA256 = r"^[0-9a-f]{64}$"
_DATE = r"^\d{4}-\d{2}-\d{2}$"


def documents_suite(
    *, access_classes: Iterable[str], source_roles: Iterable[str]
) -> gx.ExpectationSuite:
    """Documents: unique non-null ids, sha256 revisions, non-empty text, declared access
    classes and source roles, well-formed and ordered validity intervals."""
    suite = gx.ExpectationSuite(name="documents")
    for column in ("doc_id", "revision", "title", "text", "access_class", "source_role"):
        suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=column))
    suite.add_expectation(gxe.ExpectColumnValuesToBeUnique(column="doc_id"))
    suite.add_expectation(gxe.ExpectColumnValuesToMatchRegex(column="revision", regex=_SHA256))
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="text_length", min_value=1))
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeInSet(column="access_class", value_set=sorted(access_classes))
    )
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeInSet(column="source_role", value_set=sorted(source_roles))
    )
    for column in ("valid_from", "valid_to"):
        suite.add_expectation(gxe.ExpectColumnValuesToMatchRegex(column=column, regex=_DATE))
    suite.add_expectation(
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="valid_to",
            column_B="valid_from",
            or_equal=True,
            ignore_row_if="either_value_is_missing",
        )
    )
    return suite


def chunks_suite(
    *, dimension: int, max_tokens: int, access_classes: Iterable[str]
) -> gx.ExpectationSuite:
    """Chunks: ids, spans within and matching their document, references, vectors."""
    suite = gx.ExpectationSuite(name="chunks")
    for column in ("chunk_id", "doc_id", "revision", "text", "ann_key"):
        suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=column))
    suite.add_expectation(gxe.ExpectColumnValuesToBeUnique(column="chunk_id"))
    suite.add_expectation(gxe.ExpectColumnValuesToBeUnique(column="ann_key"))
    suite.add_expectation(gxe.ExpectColumnValuesToMatchRegex(column="chunk_id", regex=_SHA256))
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="start", min_value=0))
    suite.add_expectation(
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="end", column_B="start")
    )
    suite.add_expectation(
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="doc_length", column_B="end", or_equal=True
        )
    )
    for flag in ("doc_found", "span_text_matches", "pages_ordered", "embedding_finite"):
        suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column=flag, value_set=[True]))
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeBetween(column="n_tokens", min_value=1, max_value=max_tokens)
    )
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeBetween(
            column="embedding_dim", min_value=dimension, max_value=dimension
        )
    )
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeBetween(column="embedding_norm", min_value=0.999, max_value=1.001)
    )
    suite.add_expectation(
        gxe.ExpectColumnValuesToBeInSet(column="access_class", value_set=sorted(access_classes))
    )
    return suite


def failures_suite(stage: str) -> gx.ExpectationSuite:
    """Dead letters: every row names its stage, record, error type and message."""
    suite = gx.ExpectationSuite(name=f"failures_{stage}")
    for column in ("stage", "record_id", "error_type", "message"):
        suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=column))
    suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column="stage", value_set=[stage]))
    return suite
