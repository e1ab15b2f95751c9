"""Admission: close a query's obligations against retrieved evidence.

Retrieval says what *might* be useful; admission says what may be cited.
Obligations, each reported with a machine-readable code:

- ``time_window``: an item's ``valid_from``/``valid_to`` must cover the query's
  date (a ``YYYY-MM-DD`` or year in the query, else today);
- ``source_role``: an item's source role must be one the caller allows;
- ``anchor``: every anchor of the query (explicit, see :mod:`query.anchors`, or a
  rare term, see :mod:`query.vocabulary`) must appear in an admitted item: the exact
  token (word boundaries, so ``zipfile`` never closes ``zipfile2``; a dotted
  ``mod.name`` also by ``name`` in a passage of ``mod``'s document), or, through
  ``resolves``, a canonical alias of the same entity. ``anchor_absent`` reports an anchor
  that occurs in nothing the caller may see (no evidence can ever close it; the same
  reason whether it is missing or only in others' documents), ``anchor_unresolved`` one
  that the admitted evidence does not mention;
- ``contradiction``: admitted evidence must not state two different values for
  one subject and functional predicate (e.g. two per-transaction limits); checked
  through the bundle's relations, reported as not checked without them.

Status: ``PASS`` when evidence is admitted and every anchor is resolved;
``FAIL`` when evidence was found but none of it may be admitted; ``UNKNOWN``
when the obligations cannot be closed (nothing found, out of scope, an anchor
no admitted evidence mentions, or an unresolved contradiction).
"""

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")


class Reason(NamedTuple):
    """Why an obligation held, failed or could not be checked."""

    code: str
    detail: str


class Admission(NamedTuple):
    """The admitted evidence packet and the verdict."""

    status: str
    reasons: tuple[Reason, ...]
    admitted: tuple[Any, ...]
    rejected: tuple[tuple[Any, Reason], ...]
    window: tuple[str, str]


def query_window(query: str, *, today: dt.date) -> tuple[str, str]:
    """The date interval a query is about: a day, a year, or today."""
    day = _DAY.search(query)
    if day:
        value = dt.date(int(day.group(1)), int(day.group(2)), int(day.group(3))).isoformat()
        return value, value
    year = _YEAR.search(query)
    if year:
        return f"{year.group(1)}-01-01", f"{year.group(1)}-12-31"
    return today.isoformat(), today.isoformat()


_NUMBER_WITH_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s?(\S+)")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@lru_cache(maxsize=4096)
def anchor_pattern(anchor: str) -> re.Pattern[str]:
    """The pattern a passage must match to mention ``anchor`` as a whole token.

    Case and whitespace are free; a call's ``()`` is optional; a number and its unit may
    be apart or together; a word may take a plural ``s``. The token must not continue
    into a longer one: ``zipfile`` does not match ``zipfile2``, ``--all`` not ``--all-files``.
    """
    core = " ".join(anchor.split())
    if core.endswith("()"):
        core = core[:-2]
    unit = _NUMBER_WITH_UNIT.fullmatch(core)
    if unit and not core.replace(".", "").isdigit():
        body = re.escape(unit.group(1)) + r"\s?" + re.escape(unit.group(2))
    else:
        body = r"\s+".join(re.escape(part) for part in core.split(" "))
    lead = r"(?<![\w-])" if core[:1] == "-" else r"(?<!\w)" if re.match(r"\w", core) else ""
    if core[:1] == "-":
        tail = r"(?![\w-])"
    elif core[-1:].isalpha():
        tail = r"(?:e?s)?(?!\w)"
    else:
        tail = r"(?!\w)" if re.match(r"\w", core[-1:]) else ""
    return re.compile(lead + body + tail, re.I)


def mentions_anchor(anchor: str, item: Any) -> bool:
    """Whether evidence ``item`` mentions ``anchor`` (see :func:`anchor_pattern`).

    A dotted name (``heapq.heappush``) is also mentioned by a passage that names its
    last part (``heappush(heap, item)``) when every earlier part appears in the
    passage, its title, heading path or document id (the ``heapq`` module's page).
    """
    text = f"{item.title}\n{item.text}"
    if anchor_pattern(anchor).search(text):
        return True
    core = anchor.strip().removesuffix("()")
    parts = core.split(".")
    if len(parts) < 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        return False
    if not anchor_pattern(parts[-1]).search(item.text):
        return False
    context = f"{text}\n{getattr(item, 'heading_path', '')}\n{item.doc_id.replace('/', ' ')}"
    return all(anchor_pattern(p).search(context) for p in parts[:-1])


def _absent_reason(anchor: str, suggestion: str | None) -> Reason:
    hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    return Reason("anchor_absent", f"{anchor!r} occurs in no document this caller may see{hint}")


def _in_window(item: Any, window: tuple[str, str]) -> bool:
    start, end = window
    return (item.valid_from is None or item.valid_from <= end) and (
        item.valid_to is None or item.valid_to >= start
    )


def admit(
    query: str,
    evidence: Sequence[Any],
    *,
    anchors: Iterable[str],
    operation: str,
    allowed_roles: Iterable[str] | None = None,
    today: dt.date | None = None,
    contradictions: Callable[[set[str]], list[dict[str, Any]]] | None = None,
    notes: Sequence[Reason] = (),
    absent: Mapping[str, str | None] | None = None,
    resolves: Callable[[str, Any], bool] = mentions_anchor,
) -> Admission:
    """Decide which evidence may be cited for ``query`` and whether it closes the query.

    Args:
        query: the query text (its dates set the time window).
        evidence: retrieved items (``query.Evidence``), best first.
        anchors: explicit anchors from the router.
        operation: the router's operation (``out_of_scope`` is never admitted).
        allowed_roles: source roles the caller accepts; ``None`` accepts all.
        today: the clock for queries without a date (injected in tests).
        contradictions: admitted chunk ids -> contradicting relations (from the
            bundle's knowledge layer); ``None`` when the bundle has none.
        notes: reasons from earlier steps to report (e.g. blocked graph expansion).
        absent: anchors that occur in nothing the caller may see, each with a "did you
            mean" suggestion or ``None`` (see :class:`query.vocabulary.CorpusVocabulary`).
        resolves: whether an item closes an anchor (default :func:`mentions_anchor`;
            :func:`query.answers.answer` adds the knowledge layer's aliases).
    """
    absent = absent or {}
    window = query_window(query, today=today or dt.date.today())
    if operation == "out_of_scope":
        reason = Reason("out_of_scope", "the query names nothing to look up")
        return Admission("UNKNOWN", (reason,), (), (), window)
    roles = set(allowed_roles) if allowed_roles is not None else None
    admitted, rejected = [], []
    for item in evidence:
        if not _in_window(item, window):
            rejected.append(
                (
                    item,
                    Reason(
                        "time_window",
                        f"valid {item.valid_from}..{item.valid_to}"
                        f" does not cover {window[0]}..{window[1]}",
                    ),
                )
            )
        elif roles is not None and item.source_role not in roles:
            rejected.append(
                (item, Reason("source_role", f"role {item.source_role!r} not in {sorted(roles)}"))
            )
        else:
            admitted.append(item)
    reasons: list[Reason] = list(notes)
    anchors = list(anchors)
    missing = [_absent_reason(a, absent[a]) for a in anchors if a in absent]
    if not evidence:
        reasons += missing
        reasons.append(Reason("no_evidence", "retrieval found nothing the caller may see"))
        return Admission("UNKNOWN", tuple(reasons), (), (), window)
    if not admitted:
        reasons.append(
            Reason("none_admissible", f"all {len(rejected)} retrieved items violate an obligation")
        )
        return Admission("FAIL", tuple(reasons), (), tuple(rejected), window)
    reasons += missing
    unresolved = [a for a in anchors if a in absent or not any(resolves(a, e) for e in admitted)]
    for anchor in unresolved:
        if anchor not in absent:
            reasons.append(Reason("anchor_unresolved", f"no admitted evidence mentions {anchor!r}"))
    conflicts = contradictions({e.chunk_id for e in admitted}) if contradictions else []
    if contradictions is None:
        reasons.append(Reason("contradiction_not_checked", "the bundle has no relation layer"))
    for c in conflicts:
        values = " vs ".join(c["objects"])
        reasons.append(Reason("contradiction", f"{c['subject']} {c['predicate']}: {values}"))
    status = "UNKNOWN" if unresolved or conflicts else "PASS"
    if status == "PASS":
        reasons.insert(0, Reason("admitted", f"{len(admitted)} item(s) admitted"))
    return Admission(status, tuple(reasons), tuple(admitted), tuple(rejected), window)
