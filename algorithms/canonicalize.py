"""Entity canonicalization: mentions -> entities with aliases (pure, deterministic).

Contract: the same mentions and acronym definitions, in any order, give the same
entities, ids and assignment. Nothing is compared all-pairs:

1. *Units* are ``(normalized form, type class)``; units whose forms agree once
   spaces are removed (``micro RNA`` / ``microRNA``) and whose types are
   compatible merge.
2. *Acronyms* merge with the expansion the corpus itself states for them
   ("body mass index (BMI)"), when one expansion dominates (two thirds of the
   definitions); an ambiguous short form stays on its own.
3. *Spelling variants* (``tumour`` / ``tumor``) are found by blocking on
   one-character-deletion keys of a single word, other words fixed; a block
   larger than ``max_block`` is skipped. A candidate pair merges only if the
   differing words are digit-free, at least five letters, share their first
   letter, and the two names' embeddings are at least ``similarity`` apart in
   cosine. Names that differ in a word ("UPI" / "UPI Lite") or a number
   ("IL-6" / "IL-10") are never candidates.

Clusters come from union-find; each gets its most frequent surface as name.
"""

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import NamedTuple

import numpy as np

from algorithms.normalize import normalize_surface, squashed
from schemas import Entity, stable_id

_PLACE = frozenset({"GPE", "LOC", "FAC"})
_MIN_VARIANT_WORD = 5
_ACRONYM_DOMINANCE = 2 / 3

Embed = Callable[[list[str]], np.ndarray]


class MentionRef(NamedTuple):
    """What canonicalization needs of a mention."""

    mention_id: str
    text: str
    label: str
    norm: str
    chunk_id: str


class Canonicalized(NamedTuple):
    """Entities sorted by id, and each mention id's entity id."""

    entities: list[Entity]
    assignment: dict[str, str]


def type_class(label: str) -> str:
    """Coarse type: ``person``, ``place`` or ``thing`` (everything else)."""
    if label == "PERSON":
        return "person"
    return "place" if label in _PLACE else "thing"


class UnionFind:
    """Union-find whose root is always the smallest member: order-independent."""

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self.parent = {item: item for item in items}

    def find(self, item: tuple[str, str]) -> tuple[str, str]:
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            low, high = sorted((ra, rb))
            self.parent[high] = low


def merge_compatible(uf: UnionFind, units: list[tuple[str, str]], counts: Counter) -> None:
    """Merge units that are the same name; ``thing`` joins the larger of person/place."""
    by_class: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for unit in sorted(units):
        by_class[unit[1]].append(unit)
    for members in by_class.values():
        for other in members[1:]:
            uf.union(members[0], other)
    typed = [c for c in ("person", "place") if c in by_class]
    if "thing" in by_class and typed:
        best = max(typed, key=lambda c: (sum(counts[u] for u in by_class[c]), c))
        uf.union(by_class["thing"][0], by_class[best][0])


def dominant_expansions(acronyms: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Short-form key -> long-form key, where one stated expansion dominates."""
    stated: dict[str, Counter] = defaultdict(Counter)
    for short, long in acronyms:
        stated[squashed(short)][squashed(long)] += 1
    dominant = {}
    for short, longs in stated.items():
        (top, n), *rest = sorted(longs.items(), key=lambda kv: (-kv[1], kv[0]))
        if n >= _ACRONYM_DOMINANCE * sum(longs.values()) and (not rest or rest[0][1] < n):
            dominant[short] = top
    return dominant


def variant_contexts(
    norms: Sequence[str],
) -> dict[tuple[int, int, str, str], list[tuple[str, str]]]:
    """``(word count, position, words before, words after)`` -> ``(name, word)`` for
    every name with a candidate word (digit-free, at least five letters) there."""
    contexts: dict[tuple[int, int, str, str], list[tuple[str, str]]] = defaultdict(list)
    for norm in norms:
        words = norm.split(" ")
        for i, word in enumerate(words):
            if len(word) < _MIN_VARIANT_WORD or not word.isalpha():
                continue
            context = (len(words), i, " ".join(words[:i]), " ".join(words[i + 1 :]))
            contexts[context].append((norm, word))
    return contexts


def _one_edit_apart(a: str, b: str) -> bool:
    """Words at Levenshtein distance exactly one, sharing their first letter."""
    if a == b or a[0] != b[0] or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = sorted((a, b), key=len)
    return any(long[:j] + long[j + 1 :] == short for j in range(len(long)))


def _variant_pairs(norms: Sequence[str], max_block: int) -> list[tuple[str, str]]:
    """Candidate spelling-variant pairs: names that differ in one word only, by one
    edit, blocked by one-deletion keys of that word (a block over ``max_block`` names
    is skipped).

    Names are grouped by the context of the word first (the other words and the
    position): a pair shares its context, so a context that one name alone has can give
    no pair and its deletion keys are never made (most names of several words). The
    blocks, and so the pairs, are those of keys made for every name.
    """
    pairs = set()
    for entries in variant_contexts(norms).values():
        pairs.update(context_pairs(entries, max_block))
    return sorted(pairs)


def context_pairs(entries: Sequence[tuple[str, str]], max_block: int) -> list[tuple[str, str]]:
    """The candidate pairs among the ``(name, word)`` entries of one context (see
    :func:`variant_contexts`): blocked by the word's one-deletion keys, a block of more
    than ``max_block`` entries skipped."""
    words = dict(entries)
    if len(words) < 2:
        return []
    blocks: dict[str, list[str]] = defaultdict(list)
    for norm, word in entries:
        for variant in {word, *(word[:j] + word[j + 1 :] for j in range(len(word)))}:
            blocks[variant].append(norm)
    pairs = set()
    for members in blocks.values():
        if len(members) < 2 or len(members) > max_block:
            continue
        for a, b in itertools.combinations(sorted(set(members)), 2):
            if _one_edit_apart(words[a], words[b]):
                pairs.add((a, b))
    return sorted(pairs)


def similar(pairs: list[tuple[str, str]], embed: Embed | None, threshold: float) -> list[bool]:
    if not pairs or embed is None:
        return [False] * len(pairs)
    names = sorted({n for pair in pairs for n in pair})
    vectors = np.asarray(embed(names), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    row = {n: i for i, n in enumerate(names)}
    return [float(vectors[row[a]] @ vectors[row[b]]) >= threshold for a, b in pairs]


def entity_of(members: list[MentionRef], classes: Counter) -> Entity:
    # Names and aliases are whitespace-normalized: a mention's exact text may hold a
    # line break and indentation; its span, not the name, is what quotes it.
    surfaces = Counter(" ".join(m.text.split()) for m in members)
    aliases = sorted(surfaces.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
    name = aliases[0][0]
    label = sorted(Counter(m.label for m in members).items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    tclass = sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    norm = normalize_surface(name) or name.casefold()
    return Entity(
        entity_id=stable_id("entity", norm, tclass),
        name=name,
        label=label,
        norm=norm,
        mention_count=len(members),
        aliases=[surface for surface, _ in aliases],
        alias_counts=[count for _, count in aliases],
        chunk_ids=sorted({m.chunk_id for m in members}),
        alias_norms=_alias_norms([surface for surface, _ in aliases], members),
    )


def _alias_norms(aliases: Sequence[str], members: Sequence[MentionRef]) -> list[str]:
    """Each alias's ``normalize_surface``: a member's own norm where its text is the alias
    as written (the same input, so the same form), computed otherwise."""
    known = {m.text: m.norm for m in members}
    return [known[a] if a in known else normalize_surface(a) for a in aliases]


def canonicalize(
    mentions: Iterable[MentionRef],
    acronyms: Iterable[tuple[str, str]] = (),
    *,
    embed: Embed | None = None,
    similarity: float = 0.85,
    max_block: int = 64,
) -> Canonicalized:
    """Cluster mentions into canonical entities.

    Args:
        mentions: every mention of the corpus (any order).
        acronyms: ``(short_norm, long_norm)`` definitions stated in the corpus.
        embed: names -> vectors (n x d); without it, spelling variants never merge.
        similarity: cosine threshold for merging spelling variants.
        max_block: skip variant blocks larger than this.

    Returns:
        Entities sorted by id and the mention -> entity assignment.
    """
    by_unit: dict[tuple[str, str], list[MentionRef]] = defaultdict(list)
    for m in mentions:
        by_unit[(m.norm, type_class(m.label))].append(m)
    counts = Counter({unit: len(ms) for unit, ms in by_unit.items()})
    uf = UnionFind(sorted(by_unit))
    by_key: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for unit in sorted(by_unit):
        by_key[squashed(unit[0])].append(unit)
    for units in by_key.values():
        merge_compatible(uf, units, counts)
    for short, long in sorted(dominant_expansions(acronyms).items()):
        if short in by_key and long in by_key:
            uf.union(by_key[short][0], by_key[long][0])
    heads = sorted({min(units, key=lambda u: (-counts[u], u))[0] for units in by_key.values()})
    pairs = _variant_pairs(heads, max_block)
    for (a, b), ok in zip(pairs, similar(pairs, embed, similarity), strict=True):
        if ok:
            uf.union(by_key[squashed(a)][0], by_key[squashed(b)][0])
    clusters: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for unit in sorted(by_unit):
        clusters[uf.find(unit)].append(unit)
    entities: dict[str, Entity] = {}
    assignment: dict[str, str] = {}
    for units in clusters.values():
        members = sorted((m for u in units for m in by_unit[u]), key=lambda m: m.mention_id)
        classes = Counter({u[1]: 0 for u in units})
        for u in units:
            classes[u[1]] += counts[u]
        entity = entity_of(members, classes)
        if entity.entity_id in entities:  # a name shared by person and place clusters
            entity = entity._replace(entity_id=stable_id("entity", entity.norm, units[0]))
        entities[entity.entity_id] = entity
        assignment.update((m.mention_id, entity.entity_id) for m in members)
    return Canonicalized([entities[k] for k in sorted(entities)], assignment)


class KnownUnit(NamedTuple):
    """A unit of an existing generation: its entity and how many live mentions it has."""

    entity_id: str
    count: int


def _known_match(unit: tuple[str, str], by_squashed: Mapping[str, dict[str, KnownUnit]]) -> str:
    """The existing entity the full build's unit rules would put ``unit`` in, or ``""``.

    Same squashed form and class: that entity. A ``thing`` joins the larger of the
    person/place entities of its form; a person or place joins a form's ``thing`` entity
    when the form has no entity of the other typed class (person and place never merge).
    """
    classes = by_squashed.get(squashed(unit[0]))
    if not classes:
        return ""
    if unit[1] in classes:
        return classes[unit[1]].entity_id
    typed = [c for c in ("person", "place") if c in classes]
    if unit[1] == "thing" and typed:
        return classes[max(typed, key=lambda c: (classes[c].count, c))].entity_id
    if "thing" in classes and not typed:
        return classes["thing"].entity_id
    return ""


def link_mentions(
    known: Mapping[tuple[str, str], KnownUnit],
    mentions: Iterable[MentionRef],
    acronyms: Iterable[tuple[str, str]] = (),
    *,
    embed: Embed | None = None,
    similarity: float = 0.85,
    max_block: int = 64,
    entity_ids: Set[str] = frozenset(),
) -> Canonicalized:
    """Link new mentions to the entities of an existing generation (incremental refresh).

    A mention whose unit ``(norm, type class)`` the generation knows joins that unit's
    entity; one whose squashed form it knows joins by the unit rules of
    :func:`canonicalize` (see :func:`_known_match`). The rest are clustered among
    themselves by :func:`canonicalize` (acronyms and spelling variants included) into new
    entities; a new entity whose id an existing one already has joins it. Acronym and
    spelling-variant merges *across* old and new entities wait for the next full
    canonicalization (a compaction).

    Args:
        known: the live units of the generation -> entity and live mention count: every
            unit, or at least every one whose squashed form a new mention has (the only
            units the rules consult; a caller with a large generation passes those).
        mentions: the new mentions (any order).
        acronyms: definitions stated in the new chunks.
        entity_ids: ids of the generation's entities beyond those of ``known`` (e.g. one
            whose every mention was in a changed document): a new cluster given one of
            these ids joins that entity, as it does one of ``known``.

    Returns:
        The new entities only (sorted by id) and every new mention's entity id.
    """
    by_squashed: dict[str, dict[str, KnownUnit]] = defaultdict(dict)
    for (norm, tclass), unit in sorted(known.items()):
        by_squashed[squashed(norm)].setdefault(tclass, unit)
    known_ids = {unit.entity_id for unit in known.values()}
    assignment: dict[str, str] = {}
    unmatched: list[MentionRef] = []
    for m in mentions:
        unit = (m.norm, type_class(m.label))
        entity_id = known[unit].entity_id if unit in known else _known_match(unit, by_squashed)
        if entity_id:
            assignment[m.mention_id] = entity_id
        else:
            unmatched.append(m)
    fresh = canonicalize(
        unmatched, acronyms, embed=embed, similarity=similarity, max_block=max_block
    )
    assignment.update(fresh.assignment)
    entities = [
        e for e in fresh.entities if e.entity_id not in known_ids and e.entity_id not in entity_ids
    ]
    return Canonicalized(entities, assignment)


def updated_counts(
    entity: Entity, gained: Sequence[MentionRef], lost: Sequence[MentionRef]
) -> Entity | None:
    """``entity``'s mention count and aliases after its mentions ``lost`` left and
    ``gained`` joined, from its row and the change alone (its chunks as they were);
    ``None`` when no mention is left. Its id, name, label and norm stay."""
    count = entity.mention_count + len(gained) - len(lost)
    if count <= 0:
        return None
    surfaces = Counter(dict(zip(entity.aliases, entity.alias_counts, strict=True)))
    surfaces.subtract(" ".join(m.text.split()) for m in lost)
    surfaces.update(" ".join(m.text.split()) for m in gained)
    aliases = sorted(
        ((s, n) for s, n in surfaces.items() if n > 0), key=lambda kv: (-kv[1], -len(kv[0]), kv[0])
    )
    norms = dict(zip(entity.aliases, entity.alias_norms, strict=True))
    norms.update({m.text: m.norm for m in gained})
    return entity._replace(
        mention_count=count,
        aliases=[surface for surface, _ in aliases],
        alias_counts=[n for _, n in aliases],
        alias_norms=[norms[a] if a in norms else normalize_surface(a) for a, _ in aliases],
    )


def updated_entity(
    entity: Entity, gained: Sequence[MentionRef], lost: Sequence[MentionRef]
) -> Entity | None:
    """``entity`` after its mentions ``lost`` left and ``gained`` joined, from its row and
    the change alone: what :func:`refreshed_entity` makes of every live member, provided
    the lost mentions are every mention of their chunks (a refresh drops whole
    documents); ``None`` when no mention is left.

    Example:
        >>> updated_entity(e, gained=[m_new], lost=[])  # one more alias count, chunk
    """
    counted = updated_counts(entity, gained, lost)
    if counted is None:
        return None
    lost_chunks = {m.chunk_id for m in lost}
    chunks = {c for c in entity.chunk_ids if c not in lost_chunks} | {m.chunk_id for m in gained}
    return counted._replace(chunk_ids=sorted(chunks))


def refreshed_entity(entity: Entity, members: Sequence[MentionRef]) -> Entity:
    """``entity`` with its counts, aliases and chunks recomputed from its live mentions;
    its id, name, label and norm stay (they change at the next full canonicalization)."""
    surfaces = Counter(" ".join(m.text.split()) for m in members)
    aliases = sorted(surfaces.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
    return entity._replace(
        mention_count=len(members),
        aliases=[surface for surface, _ in aliases],
        alias_counts=[count for _, count in aliases],
        chunk_ids=sorted({m.chunk_id for m in members}),
        alias_norms=_alias_norms([surface for surface, _ in aliases], members),
    )
