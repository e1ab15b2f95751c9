"""The fixed cost of a build: Beam graph size and time for a build with almost no data.

Usage:
    python -m benchmarks.experiments.fixed_cost --root /tmp/fixed [--input PATH] [--builds 3]

Builds the same small input several times in one process (default: three
one-paragraph documents it writes itself) and prints, for the pipeline the build assembles, how many
transforms it has (all, leaf, ``ParDo``), how long assembling the graph and
translating it for the runner take, and each build's wall time. The first build
also loads the models; the later ones show the cost every build pays whatever
its size: graph construction, runner set-up of every stage, model and spaCy
loads in the workers. Incremental builds of a few changed documents and every
test that builds a bundle pay it.
"""

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

from store.models import force_offline

SMALL_CORPUS = {
    "kettle.md": "# Kettles\n\nAn electric kettle switches off when a bimetallic strip "
    "under the spout bends in the steam.",
    "ferns.txt": "Ferns reproduce by spores released from sori on the underside of their "
    "fronds, not by seeds.",
    "lighthouse.md": "# Lighthouses\n\nThe Fresnel lens lets a lighthouse beam carry "
    "far out to sea from a small lamp.",
}


def graph_figures(argv: list[str]) -> dict[str, float]:
    """Transform counts and graph times of the pipeline a build with ``argv`` assembles."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.build_index import EvidexBuildOptions, assemble, config_from_options
    from store.models import fingerprint, load_sentence_transformer, resolve_model

    options = PipelineOptions(argv)
    config = config_from_options(options.view_as(EvidexBuildOptions))
    model = fingerprint(
        load_sentence_transformer(resolve_model(config.embed.model)),
        config.embed.model,
        spacy_pipeline=config.spacy_pipeline,
    )
    started = time.perf_counter()
    pipeline = beam.Pipeline(options=options)
    assemble(pipeline, config=config, model=model, staging="/nonexistent/staging")
    assembled = time.perf_counter()
    proto = pipeline.to_runner_api()
    translated = time.perf_counter()
    transforms = proto.components.transforms.values()
    leaves = [t for t in transforms if not t.subtransforms]
    return {
        "transforms": len(proto.components.transforms),
        "leaf transforms": len(leaves),
        "ParDo": sum(1 for t in leaves if t.spec.urn.endswith(":pardo:v1")),
        "GroupByKey": sum(1 for t in leaves if t.spec.urn.endswith(":group_by_key:v1")),
        "assemble s": assembled - started,
        "to_runner_api s": translated - assembled,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="scratch bundle root (emptied first)")
    parser.add_argument("--input", default=None, help="corpus (default: three short documents)")
    parser.add_argument("--builds", type=int, default=3, help="builds in this process")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    force_offline()
    corpus = args.input
    if corpus is None:
        corpus = tempfile.mkdtemp(prefix="evidex-fixed-")
        for name, text in SMALL_CORPUS.items():
            with open(os.path.join(corpus, name), "w", encoding="utf-8") as handle:
                handle.write(text)
    build_argv = ["--input", corpus, "--root", args.root]

    from pipelines.build_index import run

    times = []
    for i in range(args.builds):
        shutil.rmtree(args.root, ignore_errors=True)
        started = time.perf_counter()
        run(build_argv, bundle_id=f"b{i}")
        times.append(time.perf_counter() - started)
        print(f"build {i + 1}: {times[-1]:.2f} s", flush=True)
    for name, value in graph_figures(build_argv).items():
        print(f"{name}: {value:.2f}" if name.endswith(" s") else f"{name}: {value:.0f}")
    later = times[1:] or times
    print(f"later builds, median: {statistics.median(later):.2f} s")
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
