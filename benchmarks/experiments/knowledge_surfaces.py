"""Experiment (issue 34): do the relation-summary and community-report surfaces pay for
themselves? The router default with each vector surface on and off, on one dataset.

Usage:
    python -m benchmarks.experiments.knowledge_surfaces --data ../shared/data/scifact \\
        --root /tmp/sf

Runs ``query.answer`` (the router default) over the dataset's queries four times: with both
surfaces, without the relation summaries' vectors, without the community reports' vectors,
and without either (a surface without its vector index proposes nothing, as in a bundle
built without it). Prints each run's scores (``evidex eval``'s scorer), how many queries
the router sent to each surface, and how many queries' top 10 changed.
"""

import argparse
import json
from collections.abc import Sequence

from evidex.evaluation import CHUNK_DEPTH, document_run, load_dataset, score_arm
from query import answer, load_bundle


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--root", required=True, help="the root `evidex eval` built into")
    args = parser.parse_args(argv)
    from store.bundles import list_bundles

    dataset = load_dataset(args.data)
    bundle = load_bundle(args.root, bundle_id=list_bundles(args.root)[-1])
    layer = bundle.knowledge
    if layer is None:
        raise SystemExit("the bundle has no knowledge layer")
    indexes = {"relations": layer.relations.index, "communities": layer.communities.index}
    queries = sorted(dataset.queries.items())
    routed = {"relations": 0, "communities": 0}
    report: dict[str, object] = {"dataset": dataset.name, "queries": len(queries), "runs": {}}
    tops: dict[str, dict[str, list[str]]] = {}
    for name, off in (
        ("both surfaces", ()),
        ("no relation summaries", ("relations",)),
        ("no community reports", ("communities",)),
        ("neither", ("relations", "communities")),
    ):
        layer.relations.index = None if "relations" in off else indexes["relations"]
        layer.communities.index = None if "communities" in off else indexes["communities"]
        runs, tops[name] = {}, {}
        for qid, text in queries:
            result = answer(bundle, text, k=CHUNK_DEPTH)
            if not off:
                for surface in routed:
                    routed[surface] += surface in result.route.surfaces
            runs[qid] = document_run(result.evidence)
            tops[name][qid] = [e.chunk_id for e in result.evidence[:10]]
        scores = score_arm(dataset, runs)
        changed = sum(tops[name][q] != tops["both surfaces"][q] for q, _ in queries)
        report["runs"][name] = {**scores, "queries_with_a_different_top10": changed}
    report["queries_routed_to"] = routed
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
