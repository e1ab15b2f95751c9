"""Admission against questions the corpus cannot answer: the demo question set and SciFact
claims whose central term is replaced by an invented one.

Usage:
    python -m benchmarks.admission --root /tmp/adm [--scifact ../shared/data/scifact]
        [--docs 1000] [--k 5] [--knowledge] [--no-demo]

Demo: builds the 30 demo-corpus documents of ``tests/data/admission_questions.json``
and reports how many fabricated questions get PASS (should be none) and how many
answerable ones get PASS with their gold document among the evidence.

SciFact: builds a bundle of the gold documents of the first 50 test claims plus the
first ``--docs`` corpus documents (chunks only unless ``--knowledge``), then asks each
claim as written and with its central term replaced
(``benchmarks/data/scifact_invented_terms.jsonl``): the share of PASS on the untouched
claims and of UNKNOWN on the changed ones. PASS rates are deterministic for one bundle,
so the code before and after a change can be compared in separate runs (``PYTHONPATH``
on the other checkout).
"""

import argparse
import glob
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE.parent / "tests" / "data" / "admission_questions.json"
INVENTED = HERE / "data" / "scifact_invented_terms.jsonl"


def _bundle(root: str, corpus: str, *extra: str) -> Any:
    from pipelines.build_index import run
    from query import open_bundle

    built = sorted(glob.glob(os.path.join(root, "bundles", "*")))
    path = built[-1] if built else run(["--input", corpus, "--root", root, *extra]).path
    return open_bundle(path)


def demo_corpus(path: str) -> None:
    """The question set's 30 documents, with the demo corpus' own texts, as JSONL."""
    from transforms.stdlib_corpus import (
        MODULE_PREFIX,
        TOPIC_PREFIX,
        _module_source_path,
        module_text,
        stdlib_dir,
        topic_text,
    )

    with open(path, "w", encoding="utf-8") as out:
        for source_id in json.loads(QUESTIONS.read_text())["sources"]:
            if source_id.startswith(TOPIC_PREFIX):
                title, text = topic_text(source_id[len(TOPIC_PREFIX) :])
            else:
                module = source_id[len(MODULE_PREFIX) :]
                with open(_module_source_path(module, stdlib_dir()), encoding="utf-8") as f:
                    title, text = module_text(module, f.read())
            out.write(json.dumps({"_id": source_id, "title": title, "text": text}) + "\n")


def demo(root: str, k: int) -> dict[str, Any]:
    from query import answer

    os.makedirs(root, exist_ok=True)
    corpus = os.path.join(root, "demo30.jsonl")
    demo_corpus(corpus)
    bundle = _bundle(os.path.join(root, "demo"), corpus)
    data = json.loads(QUESTIONS.read_text())
    fabricated = Counter(answer(bundle, q["question"], k=k).status for q in data["fabricated"])
    answered = 0
    started = time.perf_counter()
    for q in data["answerable"]:
        result = answer(bundle, q["question"], k=k)
        answered += result.status == "PASS" and q["gold"] in {e.doc_id for e in result.evidence}
    return {
        "fabricated": len(data["fabricated"]),
        "fabricated_by_status": dict(sorted(fabricated.items())),
        "answerable": len(data["answerable"]),
        "answerable_pass_with_gold": answered,
        "answerable_ms_mean": round(
            (time.perf_counter() - started) * 1000 / len(data["answerable"]), 1
        ),
    }


def scifact(root: str, data_dir: str, docs: int, k: int, *, knowledge: bool) -> dict[str, Any]:
    from query import answer

    changes = [json.loads(line) for line in INVENTED.read_text().splitlines() if line.strip()]
    with open(os.path.join(data_dir, "queries.jsonl"), encoding="utf-8") as f:
        claims = {q["_id"]: q["text"] for q in map(json.loads, f)}
    gold: dict[str, set[str]] = {}
    with open(os.path.join(data_dir, "qrels", "test.tsv"), encoding="utf-8") as f:
        for line in f.read().splitlines()[1:]:
            qid, did, _score = line.split("\t")
            gold.setdefault(qid, set()).add(did)
    wanted = {d for c in changes for d in gold[c["query_id"]]}
    os.makedirs(root, exist_ok=True)
    corpus = os.path.join(root, f"scifact-{docs}.jsonl")
    if not os.path.exists(corpus):
        with (
            open(os.path.join(data_dir, "corpus.jsonl"), encoding="utf-8") as f,
            open(corpus, "w", encoding="utf-8") as out,
        ):
            for n, line in enumerate(f):
                if n < docs or json.loads(line)["_id"] in wanted:
                    out.write(line)
    layer = "knowledge" if knowledge else "chunks"
    bundle = _bundle(
        os.path.join(root, f"scifact-{docs}-{layer}"),
        corpus,
        "--title_in_text",
        f"--knowledge={str(knowledge).lower()}",
    )
    untouched, changed, untouched_gold = Counter(), Counter(), 0
    for c in changes:
        claim = claims[c["query_id"]]
        if c["term"] not in claim:
            raise ValueError(f"query {c['query_id']}: {c['term']!r} is not in its claim")
        result = answer(bundle, claim, k=k)
        untouched[result.status] += 1
        untouched_gold += result.status == "PASS" and bool(
            gold[c["query_id"]] & {e.doc_id for e in result.evidence}
        )
        changed[answer(bundle, claim.replace(c["term"], c["invented"]), k=k).status] += 1
    n = len(changes)
    return {
        "claims": n,
        "bundle_documents": len(bundle.documents),
        "untouched_pass_rate": round(untouched["PASS"] / n, 3),
        "untouched_pass_with_gold": untouched_gold,
        "untouched_by_status": dict(sorted(untouched.items())),
        "changed_unknown_share": round(changed["UNKNOWN"] / n, 3),
        "changed_by_status": dict(sorted(changed.items())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="folder for the bundles (reused)")
    parser.add_argument("--scifact", default=str(HERE.parents[1] / "shared/data/scifact"))
    parser.add_argument("--docs", type=int, default=1000, help="SciFact documents besides gold")
    parser.add_argument("--k", type=int, default=5, help="evidence items per question")
    parser.add_argument(
        "--knowledge",
        action="store_true",
        help="build SciFact with the knowledge layer (the default build; slower), so acronym "
        "anchors can resolve through canonical aliases",
    )
    parser.add_argument("--no-demo", dest="demo", action="store_false", help="skip the demo set")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = {"demo": demo(args.root, args.k)} if args.demo else {}
    if os.path.isdir(args.scifact):
        report["scifact"] = scifact(
            args.root, args.scifact, args.docs, args.k, knowledge=args.knowledge
        )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
