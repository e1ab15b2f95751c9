"""Communities stage: relations -> ``Community`` rows (one global step; the graph,
the community engine and the extractive reports are in ``algorithms.communities``).

With the default engine (``KnowledgeConfig.community_engine`` ``leiden``) the graph is
clustered one connected component (or pack of small ones) at a time in igraph, not as
one networkx graph (``algorithms.leiden``).
"""

import logging
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from algorithms.communities import detect_communities
from schemas import Community
from store.config import KnowledgeConfig
from transforms.gather import Gather
from transforms.tags import typed

logger = logging.getLogger(__name__)


class _CommunitiesFn(beam.DoFn):
    def __init__(self, *, config: KnowledgeConfig, seed: int) -> None:
        self._config = config
        self._seed = seed

    def process(self, gathered: dict[str, list[Any]]) -> Iterator[Community]:
        ordered = sorted(gathered["relations"], key=lambda r: r.relation_id)
        names = dict(gathered["names"])
        communities = detect_communities(ordered, names, config=self._config, seed=self._seed)
        logger.info("found %d communities", len(communities))
        yield from communities


class DetectCommunities(beam.PTransform):
    """``{relations, names}`` -> ``PCollection[Community]`` (global step, seeded).

    ``names`` holds ``(entity_id, name)`` pairs.

    Example:
        >>> communities = {"relations": r, "names": n} | DetectCommunities(seed=17)

    Memory bound: every relation on one worker, plus the entity graph as a plain
    adjacency (about 150 bytes an edge) and, with ``leiden``, one part of it at a time
    in igraph (a few machine words an edge); ``python-louvain`` holds it in networkx.
    """

    def __init__(self, *, config: KnowledgeConfig | None = None, seed: int) -> None:
        super().__init__()
        self._fn = _CommunitiesFn(config=config or KnowledgeConfig(), seed=seed)

    def expand(self, inputs: Any) -> beam.PCollection:  # {name: PCollection}
        communities = (
            {"relations": inputs["relations"], "names": inputs["names"]}
            | "GatherRelations" >> Gather()
            | "Louvain" >> beam.ParDo(self._fn)
        )
        return typed(communities, Community)
