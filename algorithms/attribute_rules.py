"""Attribute rules: a spaCy ``attribute_ruler``'s patterns matched by lookup, not by Matcher.

The ruler sets POS, morphology and a few lemmas from the tagger's tags. Its Matcher
tries every pattern at every token: 33 microseconds a token for the 179 patterns of
``en_core_web_sm`` over SciFact's chunks, 13% of the extraction parse. The patterns
are all short sequences of exact token tests, so :class:`CompiledRules` looks up
the ones that can start at a token by its lower-cased form or tag and tests only
those (9 microseconds a token; ``benchmarks/experiments/attribute_rules.py``).
It returns the matches in the ruler's own format, and the ruler sets the attributes
itself (``AttributeRuler.set_annotations``), so the result is the same.

Only plain patterns are compiled: per token, equality with a string or boolean,
``IN`` / ``NOT_IN`` a list or a ``REGEX``, on TAG, POS, DEP, LOWER, ORTH, NORM or
IS_SPACE, with no operators. A ruler with any other pattern keeps its Matcher
(:func:`use_compiled_rules` returns False).
"""

import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from spacy.attrs import DEP, IS_SPACE, LOWER, NORM, ORTH, POS, TAG
from spacy.language import Language
from spacy.tokens import Doc

logger = logging.getLogger(__name__)

FACTORY = "evidex_attribute_rules"

# Pattern key -> (column of Doc.to_array, whether its values are strings).
_COLUMNS = {
    "TAG": (0, True),
    "LOWER": (1, True),
    "DEP": (2, True),
    "IS_SPACE": (3, False),
    "POS": (4, True),
    "ORTH": (5, True),
    "TEXT": (5, True),  # the Matcher's name for ORTH
    "NORM": (6, True),
}
_ARRAY = [TAG, LOWER, DEP, IS_SPACE, POS, ORTH, NORM]
_PREFERENCE = [1, 5, 6, 0, 2, 4, 3]  # LOWER, ORTH, NORM, TAG, DEP, POS, IS_SPACE

# One token test: (column, kind, wanted value ids or a compiled regular expression).
_Test = tuple[int, int, Any]
_IN, _NOT_IN, _REGEX = 0, 1, 2


class UnsupportedPattern(ValueError):
    """A ruler pattern uses something :class:`CompiledRules` does not compile."""


def _value_id(vocab: Any, value: Any, is_string: bool) -> int:
    if is_string:
        if not isinstance(value, str):
            raise UnsupportedPattern(f"expected a string, got {value!r}")
        return int(vocab.strings.add(value))
    if not isinstance(value, bool):
        raise UnsupportedPattern(f"expected a boolean, got {value!r}")
    return int(value)


def _token_tests(vocab: Any, spec: dict[str, Any]) -> list[_Test]:
    tests: list[_Test] = []
    for key, value in spec.items():
        if key not in _COLUMNS:
            raise UnsupportedPattern(f"token attribute {key!r}")
        column, is_string = _COLUMNS[key]
        if not isinstance(value, dict):
            tests.append((column, _IN, frozenset([_value_id(vocab, value, is_string)])))
            continue
        if len(value) != 1:
            raise UnsupportedPattern(f"predicate {value!r}")
        ((op, operand),) = value.items()
        if op == "REGEX" and is_string and isinstance(operand, str):
            # The Matcher's REGEX: re.search on the attribute's string.
            tests.append((column, _REGEX, re.compile(operand)))
        elif op in ("IN", "NOT_IN") and isinstance(operand, list):
            ids = frozenset(_value_id(vocab, v, is_string) for v in operand)
            tests.append((column, _IN if op == "IN" else _NOT_IN, ids))
        else:
            raise UnsupportedPattern(f"predicate {value!r}")
    return tests


def _passes(row: tuple[int, ...], tests: list[_Test], strings: Any) -> bool:
    for column, kind, operand in tests:
        value = row[column]
        if kind == _IN:
            if value not in operand:
                return False
        elif kind == _NOT_IN:
            if value in operand:
                return False
        elif not operand.search(strings[value]):
            return False
    return True


def _matches_at(
    tokens: list[list[_Test]], rows: list[tuple[int, ...]], start: int, strings: Any
) -> bool:
    """Whether a pattern's token tests all pass from ``start`` on."""
    if start + len(tokens) > len(rows):
        return False
    return all(_passes(rows[start + i], tests, strings) for i, tests in enumerate(tokens))


class CompiledRules:
    """An attribute ruler's patterns, looked up by a value their first token must have.

    Example:
        >>> rules = CompiledRules(nlp.get_pipe("attribute_ruler"))
        >>> rules(doc)  # sets the attributes the ruler would

    Raises:
        UnsupportedPattern: the ruler has a pattern outside the compiled subset.
    """

    def __init__(self, ruler: Any) -> None:
        self._ruler = ruler
        vocab = ruler.vocab
        # column -> value -> patterns whose first token needs that value there.
        tables: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
        self._anywhere: list[Any] = []  # patterns with no such value (a regex, NOT_IN)
        self._used: set[int] = set()  # the columns any test reads
        for number, entry in enumerate(ruler.patterns):
            key = int(vocab.strings.add(str(number)))  # the ruler's match id
            index = int(entry.get("index", 0))
            for pattern in entry["patterns"]:
                if not isinstance(pattern, list) or not pattern:
                    raise UnsupportedPattern(f"pattern {pattern!r}")
                if not -len(pattern) <= index < len(pattern):
                    raise UnsupportedPattern(f"index {index} outside pattern {pattern!r}")
                tokens = [_token_tests(vocab, spec) for spec in pattern]
                self._used.update(column for tests in tokens for column, _, _ in tests)
                compiled = (number, key, tokens)
                # Look a pattern up by its first token's word where it names one (the
                # most selective), else by its tag, else by any other IN test.
                first = sorted(
                    (_PREFERENCE.index(column), column, ids)
                    for column, kind, ids in tokens[0]
                    if kind == _IN
                )
                if first:
                    _, column, ids = first[0]
                    for value in ids:
                        tables[column][value].append(compiled)
                else:
                    self._anywhere.append(compiled)
        self._tables = [(column, dict(table)) for column, table in sorted(tables.items())]

    def match(self, doc: Doc) -> list[tuple[int, int, int, int]]:
        """The matches ``AttributeRuler.match`` gives: (rule, match id, start, end), sorted."""
        # One column at a time: a multi-column uint64 array is slow to turn into lists.
        filler = [0] * len(doc)
        rows = list(
            zip(
                *(
                    doc.to_array(attr).tolist() if column in self._used else filler
                    for column, attr in enumerate(_ARRAY)
                ),
                strict=True,
            )
        )
        strings = doc.vocab.strings
        matches = set()
        for start, row in enumerate(rows):
            for column, table in self._tables:
                for number, key, tokens in table.get(row[column], ()):
                    if _matches_at(tokens, rows, start, strings):
                        matches.add((number, key, start, start + len(tokens)))
            for number, key, tokens in self._anywhere:
                if _matches_at(tokens, rows, start, strings):
                    matches.add((number, key, start, start + len(tokens)))
        return sorted(matches)

    def __call__(self, doc: Doc) -> Doc:
        self._ruler.set_annotations(doc, self.match(doc))
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterable[Doc]:
        for doc in docs:
            yield self(doc)


@Language.factory(FACTORY, default_config={"ruler": "attribute_ruler"})
def _make_compiled_rules(nlp: Language, name: str, ruler: str) -> CompiledRules:
    return CompiledRules(nlp.get_pipe(ruler))


def use_compiled_rules(nlp: Language, ruler: str = "attribute_ruler") -> bool:
    """Put compiled rules in place of ``nlp``'s ruler (disabled, kept: it sets the attributes).

    Returns False, leaving ``nlp`` unchanged, where there is no such ruler or one of
    its patterns is outside the compiled subset.
    """
    if ruler not in nlp.pipe_names:
        return False
    try:
        nlp.add_pipe(FACTORY, after=ruler, config={"ruler": ruler})
    except UnsupportedPattern as exc:
        logger.info("keeping spaCy's %s: %s", ruler, exc)
        return False
    nlp.disable_pipe(ruler)
    return True
