"""A synthetic knowledge workload fitted to SciFact's real knowledge layer (no model).

Contract: ``generate(docs, seed=...)`` yields, document by document, the extraction rows
the spaCy stage would hand the knowledge steps (``Mention``, ``Statement`` and acronym
definitions ``(doc_id, chunk_id, short, long)``), with the same shapes and the same
distributions as the SciFact bundle's (5,183 documents, 14,437 chunks, 60,219 mentions,
28,168 statements, 14,519 entities with the entity rules of 2026-12-07; ``TARGETS``,
measured by ``fit`` on its tables; the layer before those rules, 285,711 mentions into
126,207 entities, was eight times denser in entities). The same ``docs`` and ``seed``
give the same rows, byte for byte.

How the rows are drawn:

- chunks per document from SciFact's histogram; mentions and statements per chunk from
  its quantiles (inverse CDF);
- entities by a Pitman-Yor process over (document, entity) pairs, so entity frequencies
  are Zipf-like and the number of distinct entities grows as SciFact's does when its
  documents are subsampled (Heaps exponent 0.80); a share of the draws reuses an entity
  of the document's topic (one topic per ~25 documents), which gives the entity graph
  the community structure of real text, and a drawn entity is mentioned again in its
  document as often as in SciFact (2.2 times on average; an established entity often, a
  new one seldom, so over half of the entities are mentioned once, as in SciFact);
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

# Fitted on SciFact's bundle built with the entity rules of 2026-12-07 (5,183 documents):
# `python -m benchmarks.knowledge_workload fit BUNDLE` prints every constant below.
CHUNKS_PER_DOC = (0, 311, 2008, 1827, 741, 204, 50, 21, 10, 4, 2, 2, 1, 0, 2)
# Chunks with 0, 1, 2, ... mentions; chunks with two mentions or more, and with one, that
# have 0, 1, 2, ... statements (a statement's subject is a mention; none where there is none).
# fmt: off
MENTIONS_PER_CHUNK = (
    2408, 1749, 1717, 1531, 1453, 1206, 979, 821, 673, 528, 364, 300, 227, 160, 111, 61, 51, 36,
    27, 14, 7, 3, 8, 2, 0, 0, 1,
)
STATEMENTS_PER_CHUNK = (
    2495, 2363, 1647, 1212, 753, 495, 341, 215, 165, 146, 100, 69, 57, 36, 24, 25, 24, 25,
    13, 6, 4, 16, 6, 6, 3, 2, 2, 4, 2, 4, 6, 4, 2, 2, 0, 1,
    1, 0, 1, 2, 1,
)
STATEMENTS_PER_ONE_MENTION_CHUNK = (1248, 405, 77, 14, 3, 2)
# fmt: on
LABELS = {
    "NOUN_CHUNK": 0.4977,
    "ORG": 0.3124,
    "PERSON": 0.0519,
    "GPE": 0.0391,
    "TERM": 0.0375,
    "PRODUCT": 0.0209,
    "NORP": 0.0197,
    "OTHER_ENT": 0.0208,
}
WORDS_PER_NAME = (0.723, 0.167, 0.059, 0.027, 0.011, 0.014)
CATEGORIES = {
    "co-occurrence": 0.4926,
    "process": 0.2186,
    "definition": 0.1326,
    "attribute": 0.0966,
    "part-of": 0.0453,
    "compliance": 0.0076,
    "temporal": 0.0066,
    "limit": 0.0001,
}
PREDICATES = ("is_a", "in", "of", "associate_with", "with", "have", "for", "induce", "require_for")
CONFIDENCES = ((0.5, 0.6, 0.7, 0.8), (0.2464, 0.4341, 0.2639, 0.0556))
TARGETS = {
    "chunks_per_doc": 2.7855,
    "mentions_per_chunk": 4.1712,
    "statements_per_chunk": 1.9511,
    "mentions_per_doc_entity": 2.2323,
    "heaps_exponent": 0.802,
    "entities_at_scifact": 14_519,
    "singleton_entity_share": 0.5388,
    "multi_alias_entity_share": 0.089,
    "noun_chunk_share": 0.4977,
    "cooccurrence_share": 0.4817,
}
SCIFACT_DOCS = 5_183
# Pitman-Yor discount and concentration, topic reuse, and how a document names an entity
# again (AGAIN: the chance a mention is of one it has to name again; REPEAT / REPEAT_NEW:
# the chance an established / a new entity is to be named again): chosen so that the
# workload at SciFact's size meets TARGETS (`python -m benchmarks.knowledge_workload
# check`; tests/benchmarks/test_knowledge_scale.py).
DISCOUNT = 0.83
CONCENTRATION = 420.0
TOPIC_REUSE = 0.1
DOCS_PER_TOPIC = 25
REPEAT = 0.88
REPEAT_NEW = 0.37
AGAIN = 0.72
# Of the statements other than co-occurrences, the share whose object is a literal phrase
# (no mention): SciFact's.
LITERAL_OBJECTS = 0.7855
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
    mentioned: dict[int, int] = field(default_factory=dict)  # mentions per entity

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
            in_chunk = self._chunk_mentions(chunk_id, 1000 * i, count, pending)
            if len(in_chunk) >= 2:
                stated = rng.choices(_STATEMENT_COUNTS, cum_weights=_STATEMENT_CDF)[0]
            elif in_chunk:
                stated = rng.choices(_LONE_COUNTS, cum_weights=_LONE_CDF)[0]
            else:
                stated = 0
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
        if pending and self.rng.random() < AGAIN:
            entity = pending.pop()
        else:
            entity = self.process.draw(self.topic)
        # Said again in the document, and again: an established entity often, a new one
        # seldom (SciFact's documents name an entity 2.1 times, yet over half of its
        # entities are mentioned once).
        repeat = REPEAT if self.process.counts[entity] > 1 else REPEAT_NEW
        if self.rng.random() < repeat:
            pending.append(entity)
        return entity

    def _chunk_mentions(
        self, chunk_id: str, offset: int, count: int, pending: list[int]
    ) -> list[Mention]:
        out = []
        for j in range(count):
            entity = self._entity(pending)
            self.seen.add(entity)
            self.process.mentioned[entity] = self.process.mentioned.get(entity, 0) + 1
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
        if not mentions:
            return  # a statement's subject is a mention
        rng = self.rng
        for n in range(count):
            category = rng.choices(_CATEGORY_NAMES, cum_weights=_CATEGORY_CDF)[0]
            while category == "co-occurrence" and len(mentions) < 2:
                category = rng.choices(_CATEGORY_NAMES, cum_weights=_CATEGORY_CDF)[0]
            if len(mentions) >= 2:
                a, b = rng.sample(range(len(mentions)), 2)
            else:
                a = b = 0
            subject, obj = mentions[a], mentions[b]
            if category == "co-occurrence":
                predicate, confidence = "co_occurs_with", 0.2
            else:
                predicate = _predicate(rng)
                confidence = rng.choices(CONFIDENCES[0], weights=CONFIDENCES[1])[0]
            literal = category != "co-occurrence" and (
                len(mentions) < 2 or rng.random() < LITERAL_OBJECTS
            )
            start = subject.start - subject.start % 200
            self.statements.append(
                Statement(
                    statement_id=stable_id("statement", chunk_id, start, subject.mention_id, n),
                    chunk_id=chunk_id,
                    doc_id=self.doc_id,
                    subject_mention_id=subject.mention_id,
                    predicate=predicate,
                    object_mention_id=None if literal else obj.mention_id,
                    object_text=f"{_word(n, 2)} value" if literal else obj.text,
                    category=category,
                    confidence=confidence,
                    sentence_start=start,
                    sentence_end=max(start + 200, obj.end, subject.end),
                )
            )


_CHUNK_CDF = list(itertools.accumulate(CHUNKS_PER_DOC))
_MENTION_CDF = list(itertools.accumulate(MENTIONS_PER_CHUNK))
_STATEMENT_COUNTS = range(len(STATEMENTS_PER_CHUNK))
_STATEMENT_CDF = list(itertools.accumulate(STATEMENTS_PER_CHUNK))
_LONE_COUNTS = range(len(STATEMENTS_PER_ONE_MENTION_CHUNK))
_LONE_CDF = list(itertools.accumulate(STATEMENTS_PER_ONE_MENTION_CHUNK))
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


def _histogram(sizes: Any, *, cap: int | None = None) -> tuple[int, ...]:
    """Counts of 0, 1, 2, ... in ``sizes`` (an integer array), up to its largest value."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if cap is not None:
        sizes = np.minimum(sizes, cap)
    return tuple(int(n) for n in np.bincount(sizes))


def _shares(values: list[str], keep: int) -> dict[str, float]:
    """The ``keep`` most common values' shares, the rest under ``OTHER_ENT``."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    total = len(values) or 1
    out = {k: round(n / total, 4) for k, n in ranked[:keep]}
    rest = sum(n for _, n in ranked[keep:])
    if rest:
        out["OTHER_ENT"] = round(rest / total, 4)
    return out


def heaps_exponent(doc_entities: list[set[str]], *, seed: int = 0) -> float:
    """How distinct entities grow with documents: the slope of log(distinct entities)
    against log(documents) between a quarter of the documents and all of them, averaged
    over four random orders."""
    rng = random.Random(seed)
    slopes = []
    for _ in range(4):
        order = list(range(len(doc_entities)))
        rng.shuffle(order)
        quarter = len(order) // 4
        seen: set[str] = set()
        for i in order[:quarter]:
            seen |= doc_entities[i]
        at_quarter = len(seen)
        for i in order[quarter:]:
            seen |= doc_entities[i]
        slopes.append(float(np.log(len(seen) / at_quarter) / np.log(len(order) / quarter)))
    return round(float(np.mean(slopes)), 3)


def fit(bundle: str) -> dict[str, Any]:
    """Every shape this workload copies, measured on a built bundle's tables: the
    histograms and mixes above and ``TARGETS`` (how the constants of this module were
    set; the Pitman-Yor parameters are then chosen so ``generate`` meets the targets)."""
    import pyarrow.parquet as pq

    chunks = pq.read_table(f"{bundle}/chunks.parquet", columns=["chunk_id", "doc_id"])
    mentions = pq.read_table(
        f"{bundle}/mentions.parquet", columns=["chunk_id", "doc_id", "entity_id", "label"]
    )
    statements = pq.read_table(
        f"{bundle}/extraction/statements.parquet",
        columns=["chunk_id", "category", "predicate", "confidence", "object_mention_id"],
    )
    entities = pq.read_table(f"{bundle}/entities.parquet", columns=["name"])
    chunk_ids = chunks["chunk_id"].to_pylist()
    index = {c: i for i, c in enumerate(chunk_ids)}

    def per_chunk(table: Any) -> Any:
        sizes = np.zeros(len(chunk_ids), dtype=np.int64)
        for c in table["chunk_id"].to_pylist():
            sizes[index[c]] += 1
        return sizes

    named = per_chunk(mentions)
    docs: dict[str, int] = {}
    for d in chunks["doc_id"].to_pylist():
        docs[d] = docs.get(d, 0) + 1
    doc_entities: dict[str, set[str]] = {d: set() for d in docs}
    for d, e in zip(mentions["doc_id"].to_pylist(), mentions["entity_id"].to_pylist(), strict=True):
        doc_entities[d].add(e)
    words = [min(len(n.split()), len(WORDS_PER_NAME)) for n in entities["name"].to_pylist()]
    predicates = [
        p
        for p, c in zip(
            statements["predicate"].to_pylist(), statements["category"].to_pylist(), strict=True
        )
        if c != "co-occurrence"
    ]
    confidences = [
        round(float(x), 1)
        for x, c in zip(
            statements["confidence"].to_pylist(), statements["category"].to_pylist(), strict=True
        )
        if c != "co-occurrence"
    ]
    shape = {
        "chunks_per_doc": _histogram(list(docs.values())),
        "mentions_per_chunk": _histogram(per_chunk(mentions)),
        "statements_per_chunk": _histogram(per_chunk(statements)[named >= 2]),
        "statements_per_one_mention_chunk": _histogram(per_chunk(statements)[named == 1]),
        "labels": _shares(mentions["label"].to_pylist(), 7),
        "words_per_name": tuple(
            round(words.count(n) / len(words), 3) for n in range(1, len(WORDS_PER_NAME) + 1)
        ),
        # Where a chunk has two mentions or more (a co-occurrence needs two); a chunk
        # with one draws from the same mix without co-occurrences.
        "categories": _shares(
            [
                c
                for c, k in zip(
                    statements["category"].to_pylist(),
                    statements["chunk_id"].to_pylist(),
                    strict=True,
                )
                if named[index[k]] >= 2
            ],
            20,
        ),
        "predicates": tuple(list(_shares(predicates, len(PREDICATES)))[: len(PREDICATES)]),
        "confidences": _shares([str(c) for c in confidences], 4),
        "literal_objects": round(
            sum(
                o is None and c != "co-occurrence"
                for o, c in zip(
                    statements["object_mention_id"].to_pylist(),
                    statements["category"].to_pylist(),
                    strict=True,
                )
            )
            / max(1, len(predicates)),
            4,
        ),
    }
    targets = fit_targets(bundle)
    labels = mentions["label"].to_pylist()
    categories = statements["category"].to_pylist()
    targets.update(
        heaps_exponent=heaps_exponent(list(doc_entities.values())),
        entities_at_scifact=targets.pop("entities"),
        noun_chunk_share=round(labels.count("NOUN_CHUNK") / len(labels), 4),
        cooccurrence_share=round(categories.count("co-occurrence") / len(categories), 4),
    )
    return {"docs": len(docs), "shape": shape, "targets": targets}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.knowledge_workload fit BUNDLE``: print what :func:`fit`
    measures; ``... check --docs N --seed S``: what :func:`generate` draws at N documents."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="benchmarks.knowledge_workload")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fit").add_argument("bundle")
    check = sub.add_parser("check")
    check.add_argument("--docs", type=int, default=SCIFACT_DOCS)
    check.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "fit":
        print(json.dumps(fit(args.bundle), indent=1))
    else:
        print(json.dumps(drawn_shape(args.docs, seed=args.seed), indent=1))
    return 0


def drawn_shape(docs: int, *, seed: int) -> dict[str, Any]:
    """The ``TARGETS`` figures of the workload :func:`generate` draws at ``docs``."""
    process = _Process(random.Random(seed))
    topics = max(1, docs // DOCS_PER_TOPIC)
    chunks = statements = mentions = nouns = doc_entities = 0
    for index in range(docs):
        rows = _Document(index, process, topics).build()
        chunks += len(rows.chunk_ids)
        statements += len(rows.statements)
        mentions += len(rows.mentions)
        nouns += sum(m.label == "NOUN_CHUNK" for m in rows.mentions)
        doc_entities += rows.doc_entities
    counts = np.asarray(list(process.mentioned.values()))
    return {
        "chunks_per_doc": round(chunks / docs, 3),
        "mentions_per_chunk": round(mentions / chunks, 3),
        "statements_per_chunk": round(statements / chunks, 3),
        "mentions_per_doc_entity": round(mentions / doc_entities, 3),
        "entities": len(counts),
        "singleton_entity_share": round(float((counts == 1).mean()), 4),
        "noun_chunk_share": round(nouns / mentions, 4),
    }


if __name__ == "__main__":
    import sys

    sys.exit(main())
