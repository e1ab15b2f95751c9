"""Build cost against the model's own limit: a full build vs a bare ``encode`` of its texts.

Usage:
    python -m benchmarks.build_cost --input ../shared/data/scifact/corpus.jsonl \\
        --root /tmp/cost -- --title_in_text --target_tokens 254 \\
        --direct_running_mode multi_processing --direct_num_workers 2

Runs, in one process and one after the other: (1) the full build (every stage,
DirectRunner, any extra build/Beam flags after ``--``), timed end to end; (2) a
bare ``SentenceTransformer.encode`` of exactly the texts that build embedded —
distinct chunk texts, embedded relation summaries and community reports — with
the same model and sentence-transformers' defaults (the issue's baseline);
(3) the same texts encoded in exactly the batches the build forms, the fastest
the build's own batching allows. Prints the times and both ratios; the target is
a build of at most 1.3 times (2).
"""

import argparse
import json
import logging
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence

import pyarrow.parquet as pq

from store import bundles, knowledge_layers
from store.config import DEFAULT_EMBED_BATCH, DEFAULT_EMBED_CHARS
from store.models import force_offline, load_sentence_transformer, resolve_model
from transforms.embed import length_batches, length_bucket, text_key


def embedded_texts(path: str) -> dict[str, list[str]]:
    """The distinct texts a bundle's build embedded, per surface."""
    texts = {
        "chunks": sorted(
            set(
                pq.read_table(os.path.join(path, bundles.CHUNKS), columns=["text"])
                .column("text")
                .to_pylist()
            )
        )
    }
    for surface, filename, column in (
        ("relation summaries", bundles.RELATIONS, "summary"),
        ("community reports", bundles.COMMUNITIES, "report"),
    ):
        if knowledge_layers.has_table(path, filename):
            table = knowledge_layers.read_table(path, filename, [column, "embedding"]).to_pandas()
            texts[surface] = sorted(set(table.loc[table["embedding"].notna(), column]))
    return texts


def build_batches(
    texts: Sequence[str],
    *,
    batch_size: int = DEFAULT_EMBED_BATCH,
    batch_chars: int = DEFAULT_EMBED_CHARS,
) -> list[list[str]]:
    """The batches one ``EmbedTexts`` of the build forms for ``texts`` (distinct texts)."""
    buckets: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for text in set(texts):
        buckets[length_bucket(text)].append((text_key(text), text))
    return [
        [text for _, text in batch]
        for bucket in sorted(buckets)
        for batch in length_batches(
            (bucket, buckets[bucket]), batch_size=batch_size, batch_chars=batch_chars
        )
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra = args_in[args_in.index("--") + 1 :] if "--" in args_in else []
    own = args_in[: args_in.index("--")] if "--" in args_in else args_in
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="corpus to build")
    parser.add_argument("--root", required=True, help="bundle root for the build")
    parser.add_argument("--model", default=None, help="model (default: the bundled MiniLM)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(own)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", force=True)
    force_offline()
    from pipelines.build_index import run

    build_argv = ["--input", args.input, "--root", args.root, "--delta=false", *extra]
    if args.model:
        build_argv += ["--model", args.model]
    started = time.perf_counter()
    result = run(build_argv)
    build_seconds = time.perf_counter() - started

    texts = embedded_texts(result.path)
    model = load_sentence_transformer(resolve_model(args.model))
    all_texts = [t for surface in texts.values() for t in surface]
    started = time.perf_counter()
    model.encode(all_texts, normalize_embeddings=True, show_progress_bar=False)
    encode_seconds = time.perf_counter() - started
    # the build embeds chunk texts in one EmbedTexts, summaries and reports in another
    knowledge = [t for surface, values in texts.items() if surface != "chunks" for t in values]
    batches = build_batches(texts["chunks"]) + build_batches(knowledge)
    started = time.perf_counter()
    for batch in batches:
        model.encode(
            batch, batch_size=len(batch), normalize_embeddings=True, show_progress_bar=False
        )
    batched_seconds = time.perf_counter() - started
    figures = {
        "bundle": result.bundle_id,
        "build_args": extra,
        "texts": {surface: len(values) for surface, values in texts.items()},
        "build_seconds": round(build_seconds, 1),
        "bare_encode_seconds": round(encode_seconds, 1),
        "build_batches_encode_seconds": round(batched_seconds, 1),
        "ratio": round(build_seconds / encode_seconds, 3),
        "ratio_to_build_batches": round(build_seconds / batched_seconds, 3),
        "row_counts": result.manifest.row_counts,
    }
    for surface, n in figures["texts"].items():
        print(f"{surface:>20}: {n} texts")
    print(f"{'full build':>20}: {build_seconds:.1f} s")
    print(f"{'bare encode':>20}: {encode_seconds:.1f} s ({len(all_texts)} texts, defaults)")
    print(f"{'in build batches':>20}: {batched_seconds:.1f} s ({len(batches)} batches)")
    print(f"{'ratio':>20}: {figures['ratio']:.3f} (target <= 1.3)")
    print(f"{'ratio, build batches':>20}: {figures['ratio_to_build_batches']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
