"""The validation gate: Great Expectations suites on the written Parquet tables, plus
ANN qualification. A bundle whose report does not pass is never activated."""

from validation.gate import CheckResult, ValidationReport, validate_bundle

__all__ = ["CheckResult", "ValidationReport", "validate_bundle"]
