import json
import os

import pytest

from evidex import evaluation
from evidex.cli import main
from store.bundles import list_bundles

CORPUS = [
    {
        "_id": "d1",
        "title": "Danube",
        "text": "The Danube flows through ten countries to the Black Sea.",
    },
    {
        "_id": "d2",
        "title": "Etna",
        "text": "Mount Etna on Sicily is one of the most active volcanoes.",
    },
    {
        "_id": "d3",
        "title": "Sourdough",
        "text": "Wild yeast and lactic acid bacteria make sourdough rise.",
    },
    {
        "_id": "d4",
        "title": "Green tea",
        "text": "Green tea is steamed soon after picking to stop oxidation.",
    },
    {
        "_id": "d5",
        "title": "Disc brakes",
        "text": "Disc brakes squeeze a rotor and keep working in the rain.",
    },
]
QUERIES = {
    "q1": "Which river ends in the Black Sea?",
    "q2": "active volcano in Sicily",
    "q3": "why does sourdough bread rise",
}
QRELS = {"q1": "d1", "q2": "d2", "q3": "d3"}


@pytest.fixture
def beir_dir(tmp_path):
    root = tmp_path / "tiny-beir"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in CORPUS) + "\n")
    (root / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": q, "text": t}) for q, t in QUERIES.items()) + "\n"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS.items())
    )
    (root / "questions.jsonl").write_text(
        json.dumps(
            {"_id": "q1", "question": QUERIES["q1"], "supporting_titles": ["Danube", "Etna"]}
        )
        + "\n"
    )
    return root


def test_dataset_loading_and_fingerprint(beir_dir):
    dataset = evaluation.load_dataset(str(beir_dir))
    assert dataset.queries == QUERIES
    assert dataset.qrels == {q: {d: 1} for q, d in QRELS.items()}
    assert dataset.supporting == {"q1": {"d1", "d2"}}
    config = evaluation.IngestConfig(jsonl_title_in_text=True)
    assert evaluation.input_fingerprint(dataset.corpus, config) != evaluation.input_fingerprint(
        dataset.corpus, evaluation.IngestConfig()
    )
    with pytest.raises(FileNotFoundError, match="qrels"):
        evaluation.load_dataset(str(beir_dir), split="dev")


def test_a_relative_directory_names_the_corpus_by_its_absolute_path(beir_dir, monkeypatch):
    monkeypatch.chdir(beir_dir.parent)
    relative = evaluation.load_dataset(beir_dir.name)
    assert relative.corpus == str(beir_dir / "corpus.jsonl")
    assert relative.corpus == evaluation.load_dataset(str(beir_dir)).corpus


def test_scoring_matches_hand_computed_values(beir_dir):
    dataset = evaluation.load_dataset(str(beir_dir))
    perfect = {q: {d: 1.0} for q, d in QRELS.items()}
    scores = evaluation.score_arm(dataset, perfect)
    assert scores["ndcg@10"] == 1.0 and scores["mrr@10"] == 1.0
    second = {q: {"d5": 2.0, d: 1.0} for q, d in QRELS.items()}
    assert evaluation.score_arm(dataset, second)["mrr@10"] == 0.5
    assert evaluation.score_arm(dataset, {"q1": {"d1": 2.0, "d2": 1.0}})["all_supporting@5"] == 1


def test_supporting_ids_are_read_and_recall_at_k_is_the_share_found(beir_dir):
    # MuSiQue names supporting documents by corpus id (its titles repeat).
    (beir_dir / "questions.jsonl").write_text(
        json.dumps({"_id": "q1", "supporting_ids": ["d1", "d4"], "supporting_titles": ["Etna"]})
        + "\n"
        + json.dumps({"_id": "q2", "supporting_titles": ["Etna", "Sourdough"]})
        + "\n"
    )
    dataset = evaluation.load_dataset(str(beir_dir))
    assert dataset.supporting == {"q1": {"d1", "d4"}, "q2": {"d2", "d3"}}
    runs = {
        "q1": {"d1": 5.0, "d5": 4.0, "d4": 3.0},  # both found, the second at rank 3
        "q2": {"d5": 5.0, "d2": 4.0},  # one of two found, at rank 2
    }
    scores = evaluation.score_arm(dataset, runs)
    assert scores["recall@2"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert scores["recall@5"] == pytest.approx((2 / 2 + 1 / 2) / 2)
    assert scores["all_supporting@5"] == 0.5


def test_question_types_are_scored_apart(beir_dir):
    # HotpotQA's questions carry a type; comparison questions are reported on their own.
    (beir_dir / "questions.jsonl").write_text(
        json.dumps({"_id": "q1", "type": "comparison", "supporting_titles": ["Danube", "Etna"]})
        + "\n"
        + json.dumps({"_id": "q2", "type": "bridge", "supporting_titles": ["Etna"]})
        + "\n"
    )
    dataset = evaluation.load_dataset(str(beir_dir))
    assert dataset.types == {"q1": "comparison", "q2": "bridge"}
    runs = {"q1": {"d1": 2.0, "d5": 1.0}, "q2": {"d2": 1.0}}
    found = evaluation.scores_by_type(dataset, {"router": runs})
    assert found["comparison"]["questions"] == 1 and found["bridge"]["questions"] == 1
    assert found["comparison"]["arms"]["router"]["all_supporting@5"] == 0.0
    assert found["bridge"]["arms"]["router"]["all_supporting@5"] == 1.0
    row = {**evaluation.score_arm(dataset, runs), "p50_ms": 1.0, "p95_ms": 2.0}
    report = {"dataset": "x", "queries": 2, "bundle_id": "b", "arms": {"router": row}}
    table = evaluation.format_table({**report, "by_type": found})
    assert "type comparison (1 questions):" in table


def test_paired_gains_of_a_run_that_finds_more_supporting_documents(beir_dir):
    (beir_dir / "questions.jsonl").write_text(
        json.dumps({"_id": "q1", "supporting_ids": ["d1", "d4"]})
        + "\n"
        + json.dumps({"_id": "q2", "supporting_titles": ["Etna", "Sourdough"]})
        + "\n"
    )
    dataset = evaluation.load_dataset(str(beir_dir))
    baseline = {"q1": {"d5": 2.0, "d1": 1.0}, "q2": {"d5": 2.0, "d2": 1.0}}
    better = {"q1": {"d1": 3.0, "d4": 2.0}, "q2": {"d2": 3.0, "d3": 2.0}}
    gains = evaluation.paired_gains(dataset, better, baseline)
    assert gains["recall@5"]["gain"] == pytest.approx(0.5)
    assert gains["all_supporting@8"]["interval"] == [1.0, 1.0]  # every question gains 1
    assert gains["ndcg@10"]["gain"] > 0 and gains["ndcg@10"]["interval"][0] > 0
    same = evaluation.paired_gains(dataset, baseline, baseline)
    assert all(g["gain"] == 0 and g["interval"] == [0, 0] for g in same.values())


def test_a_supporting_id_the_corpus_lacks_is_an_error(beir_dir):
    (beir_dir / "questions.jsonl").write_text(
        json.dumps({"_id": "q1", "supporting_ids": ["d1", "nope"]}) + "\n"
    )
    with pytest.raises(ValueError, match="q1 names supporting ids the corpus lacks: nope"):
        evaluation.load_dataset(str(beir_dir))


@pytest.mark.slow
def test_eval_command_end_to_end_and_reuse(beir_dir, tmp_path, capsys):
    root, out = str(tmp_path / "root"), str(tmp_path / "out")
    assert main(["eval", str(beir_dir), "--root", root, "--out", out, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    arms = report["arms"]
    assert set(arms) == {
        "dense", "lexical", "fusion_w1.0", "fusion_w0.1", "router", "router+graph", "graph"
    }  # fmt: skip
    for name in ("dense", "fusion_w1.0", "router", "router+graph", "graph"):
        assert arms[name]["ndcg@10"] >= 0.9, (name, arms[name])
        assert arms[name]["p95_ms"] > 0
    assert "all_supporting@5" in arms["dense"]
    assert "ndcg@10" in report["router_vs_fusion"]
    assert os.path.getsize(os.path.join(out, "arms.png")) > 1000
    assert len(list_bundles(root)) == 1
    assert main(["eval", str(beir_dir), "--root", root, "--out", out, "--json"]) == 0
    assert len(list_bundles(root)) == 1  # reused by fingerprint, not rebuilt
