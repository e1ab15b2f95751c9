"""Where the knowledge layer's spaCy parse spends its time, component by component.

Usage:
    python -m benchmarks.experiments.parse_components --bundle /tmp/bc/root/bundles/<id> \\
        [--chunks 1000]

Runs the bundle's spaCy pipeline, as extraction loads it (``transforms.extract.
load_parser``: lemmatizer off, applied on demand), over the first ``--chunks``
chunk texts of a built bundle, one component at a time over the whole batch,
and prints each component's time and share. ``--repeat`` runs it again (the
first pass includes warm-up). It also prints the batch-size sensitivity of
``nlp.pipe`` over the same texts.
"""

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq


def component_seconds(nlp: Any, texts: Sequence[str], batch_size: int) -> dict[str, float]:
    """Seconds each enabled component of ``nlp`` takes over ``texts``, in pipeline order."""
    docs = [nlp.make_doc(text) for text in texts]
    seconds: dict[str, float] = {}
    for name, component in nlp.pipeline:
        started = time.perf_counter()
        if hasattr(component, "pipe"):
            docs = list(component.pipe(docs, batch_size=batch_size))
        else:
            docs = [component(doc) for doc in docs]
        seconds[name] = time.perf_counter() - started
    return seconds


def parse_inputs(bundle: str, chunks: int) -> tuple[str, int, list[str]]:
    """A built bundle's spaCy pipeline, extraction batch size and first ``chunks`` chunk
    texts (all of them when ``chunks`` is 0 or less).

    Raises:
        ValueError: the bundle was built without the knowledge layer.
    """
    from store import bundles
    from store.config import KnowledgeConfig

    manifest = bundles.read_manifest(bundle)
    pipeline = manifest.model.spacy_pipeline
    if not pipeline:
        raise ValueError(f"{bundle} was built without the knowledge layer")
    knowledge = KnowledgeConfig.model_validate(manifest.config.get("knowledge", {}))
    texts = (
        pq.read_table(os.path.join(bundle, bundles.CHUNKS), columns=["text"])
        .column("text")
        .to_pylist()
    )
    return pipeline, knowledge.spacy_batch_size, texts[:chunks] if chunks > 0 else texts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--chunks", type=int, default=1000, help="how many chunk texts to parse")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes")
    args = parser.parse_args(argv)

    from transforms.extract import load_parser

    try:
        pipeline, batch_size, texts = parse_inputs(args.bundle, args.chunks)
    except ValueError as exc:
        parser.error(str(exc))
    nlp = load_parser(pipeline).nlp
    print(f"{pipeline}: {', '.join(nlp.pipe_names)}; {len(texts)} chunks")
    for run in range(1, args.repeat + 1):
        seconds = component_seconds(nlp, texts, batch_size)
        total = sum(seconds.values())
        shares = ", ".join(f"{name} {s:.1f} s ({s / total:.0%})" for name, s in seconds.items())
        print(f"pass {run}: {total:.1f} s = {shares}")
    for size in (8, 32, 128, 512):
        started = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=size):
            pass
        print(f"nlp.pipe, batch size {size}: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
