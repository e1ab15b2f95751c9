"""The frozen regression suite of a bundle root: queries with the documents they must find.

Stored as ``<root>/regression.jsonl``, one case per line::

    {"query": "How do I read a gzip file?", "expect": ["python/modules/gzip"], "k": 5}

Every case must pass (each expected document among the top ``k``) before a
bundle built under that root can be activated.
"""

import json

from pydantic import BaseModel, ConfigDict, Field

from store import storage

REGRESSION_FILE = "regression.jsonl"


class RegressionCase(BaseModel):
    """One frozen query and the document ids it must retrieve."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str = Field(min_length=1)
    expect: tuple[str, ...] = Field(min_length=1, description="doc ids that must be in the top k")
    k: int = Field(5, gt=0)


def regression_path(root: str) -> str:
    return storage.join(root, REGRESSION_FILE)


def read_cases(root: str) -> list[RegressionCase]:
    """All cases of the root's suite (empty when there is none).

    Raises:
        ValueError: a line is not a valid case, naming the line.
    """
    path = regression_path(root)
    try:
        text = storage.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        return []
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(RegressionCase.model_validate_json(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not a regression case: {exc}") from exc
    return cases


def add_case(root: str, case: RegressionCase) -> None:
    """Append a case to the root's suite."""
    line = json.dumps(case.model_dump(mode="json"), sort_keys=True) + "\n"
    storage.append_bytes(regression_path(root), line.encode("utf-8"))
