"""The optional cross-encoder stage: off by default, loads only local folders, reorders only.

No trained re-ranker ships offline. The ordering test therefore builds a real
sentence-transformers ``CrossEncoder`` from the bundled MiniLM encoder, whose
one-logit head is freshly initialised (seeded): its scores carry no relevance, so
the test checks what the stage promises whatever the model — the same evidence,
ordered by that model's own scores, ranks renumbered, admission run on the result.
"""

import pytest
import torch

from evidex.cli import main as evidex_main
from query import answer, load_bundle
from query.rerank import Reranker, RerankerNotAvailableError

QUERY = "Which river reaches the Black Sea?"


@pytest.fixture(scope="module")
def bundle(validated_root, query_encoder):
    return load_bundle(str(validated_root), model=query_encoder)


@pytest.fixture(scope="module")
def reranker(model_path):
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(model_path, device="cpu", num_labels=1, local_files_only=True)
    return Reranker(model, model_path)


def test_reranking_is_off_by_default(bundle):
    result = answer(bundle, QUERY, k=5)
    assert result.evidence and all(e.rerank_score is None for e in result.evidence)


def test_the_reranker_reorders_the_same_evidence_by_its_own_scores(bundle, reranker):
    plain = answer(bundle, QUERY, k=5)
    reranked = answer(bundle, QUERY, k=5, reranker=reranker)
    assert {e.chunk_id for e in reranked.evidence} == {e.chunk_id for e in plain.evidence}
    assert [e.rank for e in reranked.evidence] == list(range(1, len(plain.evidence) + 1))
    scores = reranker.scores(QUERY, [e.text for e in reranked.evidence])
    assert [e.rerank_score for e in reranked.evidence] == [round(s, 6) for s in scores]
    assert scores == sorted(scores, reverse=True)
    fused = {e.chunk_id: e.score for e in plain.evidence}
    assert all(e.score == fused[e.chunk_id] for e in reranked.evidence)  # fusion score kept
    assert reranked.status in {"PASS", "FAIL", "UNKNOWN"}
    assert {e.chunk_id for e in reranked.admission.admitted} <= {
        e.chunk_id for e in reranked.evidence
    }


def test_a_missing_reranker_is_a_clear_error(tmp_path, validated_root, capsys):
    with pytest.raises(RerankerNotAvailableError, match="cannot load cross-encoder"):
        Reranker.load(str(tmp_path / "no-such-model"))
    code = evidex_main(
        ["query", "rivers", "--root", str(validated_root), "--rerank", str(tmp_path / "nope")]
    )
    assert code == 1
    assert "cannot load cross-encoder" in capsys.readouterr().err
