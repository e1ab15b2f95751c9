"""Canonicalization stage: mentions + acronym definitions -> ``Entity`` rows, and every
mention with its ``entity_id``, keyed so that no step holds every mention (the steps are
in ``algorithms.canonical_blocks``, the rules in ``algorithms.canonicalize``).

Memory bound: a worker holds the mentions of the squashed forms, and then of the
entities, it is given; the edges between blocks (one per acronym or spelling-variant
merge) meet on one worker, with no mention.
"""

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.shared import Shared

from algorithms.canonical_blocks import (
    block_of,
    cluster_entity,
    cluster_key,
    components,
    distinct_ids,
    dominant_expansion,
    head_contexts,
    variant_edges,
)
from algorithms.normalize import squashed
from schemas import Entity, Mention
from store.config import KnowledgeConfig
from transforms.gather import CollectAll
from transforms.tags import typed

ENTITIES = "entities"
MENTIONS = "mentions"
ENTITY_OF = "entity_of"
NAMES = "names"


class NameEncoder:
    """The model that compares names: ``Shared`` keeps one per worker (weak-referenceable)."""

    def __init__(self, model: str) -> None:
        from store.models import load_sentence_transformer

        self.model = load_sentence_transformer(model)

    def embed(self, names: list[str]) -> np.ndarray:
        return np.asarray(
            self.model.encode(
                names, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            ),
            dtype=np.float32,
        )


class _VariantEdgesFn(beam.DoFn):
    """One context's heads -> the block pairs that are spelling variants (the name
    encoder is loaded only when a context has a candidate pair)."""

    def __init__(self, *, model: str, config: KnowledgeConfig) -> None:
        self._model = model
        self._config = config
        self._shared = Shared()
        self._holder: NameEncoder | None = None

    def _embed(self, names: list[str]) -> np.ndarray:
        if self._holder is None:
            self._holder = self._shared.acquire(lambda: NameEncoder(self._model))
        return self._holder.embed(names)

    def process(self, item: tuple[Any, Any]) -> Iterator[tuple[str, str]]:
        _, entries = item
        yield from variant_edges(
            entries,
            embed=self._embed,
            similarity=self._config.merge_similarity,
            max_block=self._config.max_block_size,
        )


def _clusters(item: tuple[str, dict[str, list[Any]]]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """A block's clusters keyed by where each meets the rest of its entity."""
    _, joined = item
    roots = list(joined["root"])
    for block in joined["block"]:
        for cluster in block.clusters:
            yield cluster_key(block, roots[0] if roots else None, cluster), cluster


def _pending_expansion(item: tuple[str, dict[str, list[Any]]]) -> Iterator[tuple[str, str]]:
    """A short form's dominant expansion, keyed by the long form, when the short form is
    a block."""
    short, joined = item
    if list(joined["block"]):
        for long in joined["expansion"]:
            yield long, short


def _acronym_edge(item: tuple[str, dict[str, list[Any]]]) -> Iterator[tuple[str, str]]:
    """An expansion whose long form is a block too: an edge between the two blocks."""
    long, joined = item
    if list(joined["block"]):
        for short in joined["pending"]:
            yield short, long


class _EntitiesFn(beam.DoFn):
    """The clusters that share an entity id -> entities, mentions with their entity, and
    ``(mention id, (entity id, name))`` and ``(entity id, name)`` pairs."""

    def __init__(self) -> None:
        self._entities = Metrics.counter("canonicalize", "entities")

    def process(self, item: tuple[str, Any]) -> Iterator[Any]:
        _, claims = item
        for entity, members in distinct_ids(claims):
            self._entities.inc()
            yield entity
            entity_id, name = entity.entity_id, entity.name
            yield TaggedOutput(NAMES, (entity_id, name))
            for m in members:
                yield TaggedOutput(MENTIONS, m._replace(entity_id=entity_id))
                yield TaggedOutput(ENTITY_OF, (m.mention_id, (entity_id, name)))


class CanonicalizeEntities(beam.PTransform):
    """``{mentions, acronyms}`` (lists of rows, as :class:`transforms.extract.ExtractKnowledge`
    emits them) -> ``{entities: PCollection[Entity], mentions: PCollection[Mention]`` with
    ``entity_id``, ``entity_of: (mention_id, (entity_id, name))``, ``names: (entity_id,
    name)}``: the entities of ``algorithms.canonicalize.canonicalize`` over every mention.

    Example:
        >>> out = {"mentions": m, "acronyms": a} | CanonicalizeEntities(model=path)

    Args:
        model: sentence-transformers name or path that compares spelling variants.
        config: thresholds and block sizes.
    """

    def __init__(self, *, model: str, config: KnowledgeConfig | None = None) -> None:
        super().__init__()
        if not model:
            raise ValueError("CanonicalizeEntities needs an embedding model")
        self._variants = _VariantEdgesFn(model=str(model), config=config or KnowledgeConfig())

    def expand(self, inputs: Any) -> Any:
        blocks = (
            inputs["mentions"]
            | "EachMention" >> beam.FlatMap(lambda batch: batch)
            | "ByForm" >> beam.Map(lambda m: (squashed(m.norm), m))
            | "GroupForms" >> beam.GroupByKey()
            | "Blocks" >> beam.MapTuple(block_of)
            | "KeyedBlocks" >> beam.Map(lambda block: (block.key, block))
        )
        present = blocks | "BlockKeys" >> beam.Map(lambda kv: (kv[0], None))
        expansions = (
            inputs["acronyms"]
            | "EachDefinition" >> beam.FlatMap(lambda batch: batch)
            # Definitions are (doc_id, chunk_id, short, long) rows: the pair is the last two.
            | "ByShortForm" >> beam.Map(lambda row: (squashed(row[-2]), (row[-2], row[-1])))
            | "GroupShortForms" >> beam.GroupByKey()
            | "Dominant" >> beam.FlatMap(lambda kv: [e for e in [dominant_expansion(kv[1])] if e])
        )
        pending = (
            {"expansion": expansions, "block": present}
            | "JoinShortForms" >> beam.CoGroupByKey()
            | "PendingExpansions" >> beam.FlatMap(_pending_expansion)
        )
        acronym_edges = (
            {"pending": pending, "block": present}
            | "JoinLongForms" >> beam.CoGroupByKey()
            | "AcronymEdges" >> beam.FlatMap(_acronym_edge)
        )
        variant_edges = (
            blocks
            | "HeadContexts" >> beam.FlatMap(lambda kv: head_contexts(kv[1].head))
            | "GroupContexts" >> beam.GroupByKey()
            | "VariantEdges" >> beam.ParDo(self._variants)
        )
        roots = (
            (acronym_edges, variant_edges)
            | "Edges" >> beam.Flatten()
            | "CollectEdges" >> CollectAll()  # one per merge: no mention
            | "Components" >> beam.FlatMap(lambda edges: components(edges).items())
        )
        out = (
            {"block": blocks, "root": roots}
            | "JoinComponents" >> beam.CoGroupByKey()
            | "Clusters" >> beam.FlatMap(_clusters)
            | "GroupClusters" >> beam.GroupByKey()
            | "ClusterEntities" >> beam.MapTuple(lambda _, parts: cluster_entity(parts))
            | "ById" >> beam.Map(lambda claim: (claim[1].entity_id, claim))
            | "GroupIds" >> beam.GroupByKey()
            | "Entities"
            >> beam.ParDo(_EntitiesFn()).with_outputs(MENTIONS, ENTITY_OF, NAMES, main=ENTITIES)
        )
        return {
            ENTITIES: typed(out[ENTITIES], Entity),
            MENTIONS: typed(out[MENTIONS], Mention),
            ENTITY_OF: out[ENTITY_OF],
            NAMES: out[NAMES],
        }
