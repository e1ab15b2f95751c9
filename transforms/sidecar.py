"""Per-document metadata from outside the text: a sidecar file and Markdown front matter.

A sidecar is JSONL (one object per line) or CSV (a header row), keyed by
``source_id``; its values override a document's front matter, which overrides
the build's defaults. Recognised keys are ``title``, ``access_class``,
``source_role``, ``language``, ``valid_from`` and ``valid_to``; any other key
is kept in the document's metadata.
"""

import csv
import io
import json
from typing import Any

import yaml

SIDECAR_ID = "source_id"


class SidecarError(ValueError):
    """The sidecar file cannot be read; the message names the file and line."""


def parse_sidecar(text: str, *, name: str) -> dict[str, dict[str, Any]]:
    """Sidecar contents -> ``{source_id: {key: value}}``.

    Args:
        text: the file's text.
        name: its path, for error messages; ``.csv`` selects CSV, anything else JSONL.

    Raises:
        SidecarError: a malformed line, a missing ``source_id``, or a duplicate id.
    """
    rows: list[tuple[int, dict[str, Any]]] = []
    if name.lower().endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text))
        rows = [
            (n, {k: v for k, v in row.items() if v not in (None, "")})
            for n, row in enumerate(reader, start=2)
        ]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SidecarError(f"{name}:{number}: invalid JSON: {exc.msg}") from exc
            if not isinstance(record, dict):
                raise SidecarError(f"{name}:{number}: not a JSON object")
            rows.append((number, record))
    result: dict[str, dict[str, Any]] = {}
    for number, row in rows:
        source_id = row.pop(SIDECAR_ID, None)
        if not source_id:
            raise SidecarError(f"{name}:{number}: no {SIDECAR_ID!r}")
        if str(source_id) in result:
            raise SidecarError(f"{name}:{number}: duplicate {SIDECAR_ID} {source_id!r}")
        result[str(source_id)] = row
    return result


def read_sidecar(path: str) -> dict[str, dict[str, Any]]:
    """Read a sidecar through Beam ``FileSystems`` (local, ``gs://``, ...)."""
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(path) as handle:
            text = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SidecarError(f"cannot read metadata sidecar {path}: {exc}") from exc
    except Exception as exc:
        raise SidecarError(f"cannot read metadata sidecar {path}: {exc}") from exc
    return parse_sidecar(text, name=path)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """``---`` YAML front matter at the top of Markdown -> (mapping, the rest of the text).

    Text without front matter comes back unchanged with an empty mapping; front
    matter that is not a YAML mapping is left in the text.
    """
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}, text
    try:
        data = yaml.safe_load(text[4:end])
    except yaml.YAMLError:
        return {}, text
    if not isinstance(data, dict):
        return {}, text
    values = {str(k): (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in data.items()}
    return values, text[end + len("\n---\n") :]
