"""Ingestion + chunking throughput (no embedding) on a corpus, with the real transforms.

Usage:
    python -m benchmarks.ingest --input ../shared/data/scifact/corpus.jsonl

Runs ReadDocuments -> ChunkDocuments on the DirectRunner and prints documents/s,
MB/s of input and chunks produced. Together with a full build's wall time on the
same input it bounds the share of the build spent outside embedding.
"""

import argparse
import json
import os
import time
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter

from schemas import register_coders
from store.config import ChunkConfig, IngestConfig
from store.models import force_offline, resolve_model
from transforms.chunk import ChunkDocuments
from transforms.ingest import ReadDocuments, pattern_and_root
from transforms.tags import GOOD


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="file, directory or glob")
    parser.add_argument("--target-tokens", type=int, default=160)
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="semantic chunking: sentences of sections over the target are embedded",
    )
    args = parser.parse_args(argv)
    force_offline()
    register_coders()
    pattern, root = pattern_and_root(args.input)
    size = os.path.getsize(args.input) if os.path.isfile(args.input) else 0
    started = time.perf_counter()
    pipeline = beam.Pipeline()
    docs = pipeline | ReadDocuments(pattern, root=root, config=IngestConfig())
    _ = docs[GOOD] | ChunkDocuments(
        model=resolve_model(None),
        config=ChunkConfig(target_tokens=args.target_tokens, semantic=args.semantic),
        max_tokens=254,
    )
    result = pipeline.run()
    result.wait_until_finish()
    seconds = time.perf_counter() - started

    def counter(name: str) -> int:
        found = result.metrics().query(MetricsFilter().with_name(name))["counters"]
        return int(sum(c.committed or 0 for c in found))

    documents, chunks = counter("documents"), counter("chunks")
    sentences = counter("sentences_embedded")
    print(
        json.dumps(
            {
                "input": args.input,
                "seconds": round(seconds, 1),
                "documents": documents,
                "chunks": chunks,
                "semantic": args.semantic,
                "sentences_embedded": sentences,
                "documents_per_s": round(documents / seconds, 1),
                "mb_per_s": round(size / 1e6 / seconds, 2) if size else None,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
