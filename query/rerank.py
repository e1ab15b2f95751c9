"""Optional cross-encoder re-ranking of retrieved evidence (off unless a model is given).

No re-ranker ships offline, so this stage runs only when the caller names a local
sentence-transformers ``CrossEncoder`` folder (``evidex query --rerank PATH``,
``evidex serve --rerank PATH``, ``answer(..., reranker=Reranker.load(PATH))``).

It reorders the ``k`` items that fusion returned and never adds or drops one, so
every fusion invariant (the dense reservation, access filtering inside each arm)
still holds for the set; only the order and ``rank`` change. Ties in the
cross-encoder score keep the fused order.
"""

from collections.abc import Sequence
from typing import Any

from query.retrieval import Evidence


class RerankerNotAvailableError(RuntimeError):
    """The re-ranker path is not a loadable local cross-encoder."""


class Reranker:
    """A cross-encoder that scores (query, evidence text) pairs.

    Example:
        >>> reranker = Reranker.load("/models/ms-marco-MiniLM-L-6-v2")
        >>> reordered = reranker.rerank("upi lite limit", evidence)
    """

    def __init__(self, model: Any, name: str) -> None:
        self.model = model
        self.name = name

    @classmethod
    def load(cls, path: str) -> "Reranker":
        """Load a ``CrossEncoder`` from a local folder, offline.

        Raises:
            RerankerNotAvailableError: the folder is missing or not a loadable model.
        """
        from store.models import force_offline

        force_offline()
        from sentence_transformers import CrossEncoder

        try:
            model = CrossEncoder(str(path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise RerankerNotAvailableError(
                f"cannot load cross-encoder {path!r} offline: {exc}. "
                "Pass a local sentence-transformers CrossEncoder folder."
            ) from exc
        return cls(model, str(path))

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text (higher is more relevant)."""
        if not texts:
            return []
        raw = self.model.predict([(query, t) for t in texts], convert_to_numpy=True)
        return [float(s) for s in raw.reshape(len(texts), -1)[:, 0]]

    def rerank(self, query: str, evidence: Sequence[Evidence]) -> tuple[Evidence, ...]:
        """The same evidence, ordered by cross-encoder score, ranks renumbered from 1."""
        scores = self.scores(query, [e.text for e in evidence])
        order = sorted(range(len(evidence)), key=lambda i: (-scores[i], evidence[i].rank))
        return tuple(
            evidence[i]._replace(rank=new, rerank_score=round(scores[i], 6))
            for new, i in enumerate(order, start=1)
        )
