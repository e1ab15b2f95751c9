"""A synthetic knowledge workload fitted to SciFact's real knowledge layer (no model).

Contract: ``generate(docs, seed=...)`` yields, document by document, the extraction rows
the spaCy stage would hand the knowledge steps (``Mention``, ``Statement`` and acronym
definitions ``(doc_id, chunk_id, short, long)``), with the same shapes and the same
distributions as the SciFact bundle's (5,183 documents, 14,439 chunks, 285,711 mentions,
136,588 statements, 126,207 entities; ``TARGETS``, measured by ``fit_targets`` on its
tables). The same ``docs`` and ``seed`` give the same rows, byte for byte.

How the rows are drawn:

- chunks per document from SciFact's histogram; mentions and statements per chunk from
  its quantiles (inverse CDF);
- entities by a Pitman-Yor process over (document, entity) pairs, so entity frequencies
  are Zipf-like and the number of distinct entities grows as SciFact's does when its
  documents are subsampled (Heaps exponent 0.86); a share of the draws reuses an entity
  of the document's topic (one topic per ~25 documents), which gives the entity graph
  the community structure of real text, and a drawn entity is mentioned again in its
  document as often as in SciFact (1.29 times on average);
- each entity has a name of 1-6 words (SciFact's word-count mix; the last word encodes
  the entity, so two entities never share a name) and a label (SciFact's mix);
- each mention is the name or an alias variant of it: case, plural, punctuation (a
  hyphen for a space) or, for entities of several words, the acronym of its initials,
  defined in the document the first time it is used (``long (SHORT)``);
- statements link two mentions of one chunk with SciFact's category mix, predicates
  and confidences.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from algorithms.normalize import normalize_surface
from schemas import Mention, Statement, stable_id

# Fitted on /tmp/movedbench/fresh (SciFact, 5,183 documents), see fit_targets.
CHUNKS_PER_DOC = (0, 311, 2007, 1827, 742, 204, 50, 21, 10, 4, 2, 2, 0, 0, 3)
# Chunks with 0, 1, 2, ... mentions (statements).
# fmt: off
MENTIONS_PER_CHUNK = (
    4, 12, 45, 126, 163, 220, 234, 246, 244, 231, 252, 301, 307, 359, 408, 484, 548, 646, 698,
    757, 795, 897, 883, 907, 812, 787, 685, 584, 494, 367, 274, 216, 152, 107, 76, 46, 23, 18,
    12, 9, 2, 3, 1, 0, 3, 0, 0, 0, 1
)
STATEMENTS_PER_CHUNK = (
    166, 369, 562, 686, 788, 924, 955, 1147, 1134, 1234, 1130, 1052, 831, 762, 600, 432, 335,
    285, 211, 185, 137, 83, 65, 54, 53, 51, 45, 22, 21, 21, 10, 14, 12, 12, 10, 5, 3, 1, 9, 8, 3,
    2, 3, 0, 1, 0, 0, 1, 2, 0, 0, 1, 0, 0, 0, 1
)
# fmt: on
LABELS = {
    "NOUN_CHUNK": 0.858,
    "ORG": 0.0864,
    "PERSON": 0.021,
    "GPE": 0.0164,
    "NORP": 0.0078,
    "PRODUCT": 0.0054,
    "LOC": 0.0016,
    "OTHER_ENT": 0.0034,
}
WORDS_PER_NAME = (0.384, 0.350, 0.155, 0.065, 0.026, 0.020)
CATEGORIES = {
    "attribute": 0.3658,
    "process": 0.2289,
    "co-occurrence": 0.1683,
    "definition": 0.1299,
    "part-of": 0.0918,
    "temporal": 0.0091,
    "compliance": 0.0062,
}
PREDICATES = ("of", "is_a", "in", "for", "with", "to", "on", "associate_with", "from")
CONFIDENCES = ((0.5, 0.6, 0.7, 0.8), (0.531, 0.279, 0.164, 0.026))
TARGETS = {
    "chunks_per_doc": 2.786,
    "mentions_per_chunk": 19.79,
    "statements_per_chunk": 9.46,
    "mentions_per_doc_entity": 1.285,
    "heaps_exponent": 0.863,
    "entities_at_scifact": 126_207,
    "singleton_entity_share": 0.771,
    "multi_alias_entity_share": 0.0926,
    "noun_chunk_share": 0.858,
    "cooccurrence_share": 0.168,
}
SCIFACT_DOCS = 5_183
# Pitman-Yor discount and concentration, topic reuse and repeat rate: chosen so that
# the workload at SciFact's size meets TARGETS (tests/benchmarks/test_knowledge_scale.py).
DISCOUNT = 0.87
CONCENTRATION = 1400.0
TOPIC_REUSE = 0.1
DOCS_PER_TOPIC = 25
REPEAT = 0.6
VARIANTS = {"case": 0.07, "plural": 0.06, "punct": 0.025, "acronym": 0.04}
_SYLLABLES = tuple(a + b for a in "bcdfgklmnprstvz" for b in "aeiou")  # 75


class DocumentRows(NamedTuple):
    """One document's extraction rows."""

    doc_id: str
    chunk_ids: list[str]
    mentions: list[Mention]
    statements: list[Statement]
    acronyms: list[tuple[str, str, str, str]]
    doc_entities: int  # distinct entities the document mentions
    drawn_entities: int  # distinct entities drawn so far in the corpus


def _word(number: int, width: int = 0) -> str:
    """A pronounceable word that encodes ``number`` (at least ``width`` syllables)."""
    out: list[str] = []
    while number or len(out) < max(width, 1):
        number, rest = divmod(number, len(_SYLLABLES))
        out.append(_SYLLABLES[rest])
    return "".join(out)


class _Names:
    """Each entity number's canonical name and label, derived from its hash, memoized."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.labels: list[str] = []
        self._label_cdf = list(itertools.accumulate(LABELS.values()))
        self._word_cdf = list(itertools.accumulate(WORDS_PER_NAME))

    def of(self, entity: int) -> tuple[str, str]:
        while len(self.names) <= entity:
            self._add(len(self.names))
        return self.names[entity], self.labels[entity]

    def _add(self, entity: int) -> None:
        digest = hashlib.blake2b(entity.to_bytes(8, "little"), digest_size=16).digest()
        pick = int.from_bytes(digest[:8], "little")
        point = (pick % 10_000) / 10_000 * self._word_cdf[-1]
        count = min(bisect.bisect_right(self._word_cdf, point) + 1, len(WORDS_PER_NAME))
        lead = [_word((pick >> (8 * i)) % 600, 2) for i in range(1, count)]
        self.names.append(" ".join([*lead, _word(entity, 3)]))
        point = int.from_bytes(digest[8:], "little") / 2**64 * self._label_cdf[-1]
        labels = list(LABELS)
        self.labels.append(
            labels[min(bisect.bisect_right(self._label_cdf, point), len(labels) - 1)]
        )


@dataclass
class _Process:
    """Pitman-Yor state over entities, with per-topic histories."""

    rng: random.Random
    counts: list[int] = field(default_factory=list)
    draws: list[int] = field(default_factory=list)
    topics: dict[int, list[int]] = field(default_factory=dict)
    names: _Names = field(default_factory=_Names)

    def draw(self, topic: int) -> int:
        history = self.topics.setdefault(topic, [])
        if history and self.rng.random() < TOPIC_REUSE:
            entity = history[self.rng.randrange(len(history))]
        else:
            entity = self._global()
        history.append(entity)
        return entity

    def _global(self) -> int:
        n, k = len(self.draws), len(self.counts)
        if self.rng.random() * (CONCENTRATION + n) < CONCENTRATION + DISCOUNT * k:
            self.counts.append(1)
            self.draws.append(k)
            return k
        while True:  # an earlier draw's entity, kept with probability (c - d) / c
            entity = self.draws[self.rng.randrange(n)]
            if self.rng.random() * self.counts[entity] < self.counts[entity] - DISCOUNT:
                break
        self.counts[entity] += 1
        self.draws.append(entity)
        return entity


def _acronym(name: str) -> str:
    return "".join(w[0] for w in name.split()).upper()


def _variant(point: float) -> str:
    for kind, share in VARIANTS.items():
        if point < share:
            return kind
        point -= share
    return "name"


def _surface(name: str, point: float) -> tuple[str, bool]:
    """The surface of ``name`` that ``point`` (uniform in [0, 1)) picks, and whether it
    is its acronym."""
    kind = _variant(point)
    multiword = " " in name
    if kind == "case":
        return name.title() if name.islower() else name.lower(), False
    if kind == "plural":
        return name + "s", False
    if kind == "punct" and multiword:
        return name.replace(" ", "-", 1), False
    if kind == "acronym" and multiword:
        return _acronym(name), True
    return name, False


class _Document:
    """Builds one document's rows from the shared process."""

    def __init__(self, index: int, process: _Process, topics: int) -> None:
        self.doc_id = f"doc{index:08d}"
        self.topic = index % topics
        self.process = process
        self.rng = process.rng
        self.mentions: list[Mention] = []
        self.statements: list[Statement] = []
        self.acronyms: list[tuple[str, str, str, str]] = []
        self.defined: set[str] = set()
        self.seen: set[int] = set()

    def build(self) -> DocumentRows:
        rng = self.rng
        chunks = rng.choices(range(len(CHUNKS_PER_DOC)), cum_weights=_CHUNK_CDF)[0]
        chunk_ids = [stable_id("chunk", self.doc_id, i) for i in range(chunks)]
        pending: list[int] = []
        for i, chunk_id in enumerate(chunk_ids):
            count = rng.choices(range(len(MENTIONS_PER_CHUNK)), cum_weights=_MENTION_CDF)[0]
            stated = rng.choices(range(len(STATEMENTS_PER_CHUNK)), cum_weights=_STATEMENT_CDF)[0]
            in_chunk = self._chunk_mentions(chunk_id, 1000 * i, count, pending)
            self._chunk_statements(chunk_id, in_chunk, stated)
        return DocumentRows(
            self.doc_id,
            chunk_ids,
            self.mentions,
            self.statements,
            self.acronyms,
            len(self.seen),
            len(self.process.counts),
        )

    def _entity(self, pending: list[int]) -> int:
        if pending and self.rng.random() < 0.5:
            return pending.pop()
        entity = self.process.draw(self.topic)
        # Repeated in the document: the established entities (a rare name is rarely
        # said twice; SciFact's singletons are three quarters of its entities).
        if self.process.counts[entity] > 1 and self.rng.random() < REPEAT:
            pending.append(entity)
        return entity

    def _chunk_mentions(
        self, chunk_id: str, offset: int, count: int, pending: list[int]
    ) -> list[Mention]:
        out = []
        for j in range(count):
            entity = self._entity(pending)
            self.seen.add(entity)
            name, label = self.process.names.of(entity)
            text, short = _surface(name, self.rng.random())
            if short and text not in self.defined:
                self.defined.add(text)
                self.acronyms.append((self.doc_id, chunk_id, text, name))
            start = offset + 40 * j
            out.append(
                Mention(
                    mention_id=stable_id("mention", chunk_id, start, label),
                    chunk_id=chunk_id,
                    doc_id=self.doc_id,
                    start=start,
                    end=start + len(text),
                    text=text,
                    label=label,
                    norm=_norm(text),
                )
            )
        self.mentions.extend(out)
        return out

    def _chunk_statements(self, chunk_id: str, mentions: list[Mention], count: int) -> None:
        if len(mentions) < 2:
            return
        rng = self.rng
        for n in range(count):
            a, b = rng.sample(range(len(mentions)), 2)
            subject, obj = mentions[a], mentions[b]
            category = rng.choices(_CATEGORY_NAMES, cum_weights=_CATEGORY_CDF)[0]
            if category == "co-occurrence":
                predicate, confidence = "co_occurs_with", 0.2
            else:
                predicate = _predicate(rng)
                confidence = rng.choices(CONFIDENCES[0], weights=CONFIDENCES[1])[0]
            start = subject.start - subject.start % 200
            self.statements.append(
                Statement(
                    statement_id=stable_id("statement", chunk_id, start, subject.mention_id, n),
                    chunk_id=chunk_id,
                    doc_id=self.doc_id,
                    subject_mention_id=subject.mention_id,
                    predicate=predicate,
                    object_mention_id=obj.mention_id,
                    object_text=obj.text,
                    category=category,
                    confidence=confidence,
                    sentence_start=start,
                    sentence_end=max(start + 200, obj.end, subject.end),
                )
            )


_CHUNK_CDF = list(itertools.accumulate(CHUNKS_PER_DOC))
_MENTION_CDF = list(itertools.accumulate(MENTIONS_PER_CHUNK))
_STATEMENT_CDF = list(itertools.accumulate(STATEMENTS_PER_CHUNK))
_CATEGORY_NAMES = list(CATEGORIES)
_CATEGORY_CDF = list(itertools.accumulate(CATEGORIES.values()))
# Predicate ranks beyond the named ones: a Zipf tail (SciFact has 4,617 predicates).
_PREDICATE_CDF = list(itertools.accumulate(1.0 / r**1.6 for r in range(1, 4_618)))
_NORMS: dict[str, str] = {}


def _norm(text: str) -> str:
    norm = _NORMS.get(text)
    if norm is None:
        norm = _NORMS[text] = normalize_surface(text)
    return norm


def _predicate(rng: random.Random) -> str:
    rank = bisect.bisect_right(_PREDICATE_CDF, rng.random() * _PREDICATE_CDF[-1]) + 1
    return PREDICATES[rank - 1] if rank <= len(PREDICATES) else f"verb{rank}_prep"


def generate(docs: int, *, seed: int) -> Iterator[DocumentRows]:
    """The workload's ``docs`` documents, then one more (the window's), in order.

    Args:
        docs: corpus size in documents.
        seed: everything drawn depends on it and ``docs`` only.

    Yields:
        ``docs + 1`` documents; the last is the one-document window's.
    """
    process = _Process(random.Random(seed))
    topics = max(1, docs // DOCS_PER_TOPIC)
    for index in range(docs + 1):
        yield _Document(index, process, topics).build()


def fit_targets(bundle: str) -> dict[str, Any]:
    """The ``TARGETS`` figures measured on a built bundle's knowledge tables (SciFact)."""
    import pyarrow.parquet as pq

    mentions = pq.read_table(f"{bundle}/mentions.parquet", columns=["doc_id", "entity_id"])
    chunks = pq.read_table(f"{bundle}/chunks.parquet", columns=["chunk_id", "doc_id"])
    statements = pq.read_table(f"{bundle}/extraction/statements.parquet", columns=["category"])
    entities = pq.read_table(f"{bundle}/entities.parquet", columns=["mention_count", "aliases"])
    frame = mentions.to_pandas()
    counts = np.asarray(entities["mention_count"].to_pylist())
    aliases = np.asarray([len(a) for a in entities["aliases"].to_pylist()])
    return {
        "chunks_per_doc": chunks.num_rows / len(set(chunks["doc_id"].to_pylist())),
        "mentions_per_chunk": mentions.num_rows / chunks.num_rows,
        "statements_per_chunk": statements.num_rows / chunks.num_rows,
        "mentions_per_doc_entity": float(frame.groupby(["doc_id", "entity_id"]).size().mean()),
        "entities": entities.num_rows,
        "singleton_entity_share": float((counts == 1).mean()),
        "multi_alias_entity_share": float((aliases > 1).mean()),
    }
