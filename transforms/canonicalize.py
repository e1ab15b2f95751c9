"""Canonicalization stage: all mentions + acronym definitions -> ``Entity`` rows, and
every mention with its ``entity_id`` (one global step; the algorithm is in
``algorithms.canonicalize``).

Memory bound: every mention of the corpus on one worker (about 300 bytes each),
plus the embeddings of the names that are candidate spelling variants.
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.shared import Shared

from algorithms.canonicalize import MentionRef, canonicalize
from schemas import Entity, Mention
from store.config import KnowledgeConfig
from transforms.gather import Gather, batched_rows
from transforms.tags import typed

logger = logging.getLogger(__name__)

ENTITIES = "entities"
MENTIONS = "mentions"
ASSIGNMENT = "assignment"
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


class _CanonicalizeFn(beam.DoFn):
    def __init__(self, *, model: str, config: KnowledgeConfig) -> None:
        self._model = model
        self._config = config
        self._shared = Shared()
        self._holder: NameEncoder | None = None

    def setup(self) -> None:
        self._holder = self._shared.acquire(lambda: NameEncoder(self._model))

    def process(self, gathered: dict[str, list[Any]]) -> Iterator[Any]:
        if self._holder is None:
            raise RuntimeError("_CanonicalizeFn.setup() was not called")
        mentions: list[Mention] = batched_rows(gathered["mentions"])
        # Definitions come as (doc_id, chunk_id, short, long) rows: the pair is the last two.
        acronyms = [(row[-2], row[-1]) for row in batched_rows(gathered["acronyms"])]
        refs = [MentionRef(m.mention_id, m.text, m.label, m.norm, m.chunk_id) for m in mentions]
        result = canonicalize(
            refs,
            sorted(acronyms),
            embed=self._holder.embed,
            similarity=self._config.merge_similarity,
            max_block=self._config.max_block_size,
        )
        logger.info(
            "canonicalized %d mentions into %d entities", len(mentions), len(result.entities)
        )
        # Every output is one element: each is read whole by one global step (a table
        # writer, relation aggregation), and a row per element would only be gathered
        # again, at Beam's per-element cost (411,995 rows on SciFact).
        yield result.entities
        assignment = result.assignment
        yield TaggedOutput(
            MENTIONS, [m._replace(entity_id=assignment[m.mention_id]) for m in mentions]
        )
        yield TaggedOutput(ASSIGNMENT, result.assignment)
        yield TaggedOutput(NAMES, {e.entity_id: e.name for e in result.entities})


class CanonicalizeEntities(beam.PTransform):
    """``{mentions, acronyms}`` (lists of rows, as :class:`transforms.extract.ExtractKnowledge`
    emits them) -> ``{entities: one list of Entity, mentions: one list of
    Mention with entity_id, assignment: one {mention_id: entity_id} dict, names: one
    {entity_id: name} dict}``: each output is a single element.

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
        self._fn = _CanonicalizeFn(model=str(model), config=config or KnowledgeConfig())

    def expand(self, inputs: Any) -> Any:
        out = (
            {"mentions": inputs["mentions"], "acronyms": inputs["acronyms"]}
            | "GatherMentions" >> Gather(always=True)  # a corpus without names: empty tables
            | "Canonicalize"
            >> beam.ParDo(self._fn).with_outputs(MENTIONS, ASSIGNMENT, NAMES, main=ENTITIES)
        )
        return {
            ENTITIES: typed(out[ENTITIES], list[Entity]),
            MENTIONS: typed(out[MENTIONS], list[Mention]),
            ASSIGNMENT: out[ASSIGNMENT],
            NAMES: out[NAMES],
        }
