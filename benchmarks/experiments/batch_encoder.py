"""Would ONNX Runtime embed a build's batches faster than PyTorch, as it does single queries?

Usage:
    python -m benchmarks.experiments.batch_encoder --bundle /tmp/bc/root/bundles/<id> [--texts 640]

Takes ``--texts`` chunk texts of a built bundle (a seeded sample), sorts them by
length as the build does, and embeds them in batches of the build's size twice
per pass: by the model's own ``SentenceTransformer.encode`` (PyTorch, what a
build runs) and by the bundle's model exported to ONNX Runtime
(``query.encoder``, the query path). Prints both times, their ratio and the
largest difference between the two sets of vectors.
"""

import argparse
import os
import time
from collections.abc import Sequence

import numpy as np
import pyarrow.parquet as pq


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--texts", type=int, default=640, help="chunk texts to embed")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes")
    args = parser.parse_args(argv)

    from query import open_bundle
    from query.encoder import QueryEncoder
    from store import bundles
    from store.config import DEFAULT_EMBED_BATCH
    from store.models import force_offline

    force_offline()
    bundle = open_bundle(args.bundle, encoder="torch")
    onnx = QueryEncoder.load(bundle.model, "onnx")
    every = (
        pq.read_table(os.path.join(args.bundle, bundles.CHUNKS), columns=["text"])
        .column("text")
        .to_pylist()
    )
    picks = np.random.default_rng(0).choice(len(every), min(args.texts, len(every)), replace=False)
    texts = sorted((every[i] for i in picks), key=len)
    size = DEFAULT_EMBED_BATCH
    print(f"{len(texts)} chunk texts, batches of {size}")
    for run in range(1, args.repeat + 1):
        started = time.perf_counter()
        torch_vectors = bundle.model.encode(
            texts, batch_size=size, normalize_embeddings=True, convert_to_numpy=True
        )
        torch_seconds = time.perf_counter() - started
        started = time.perf_counter()
        onnx_vectors = np.vstack(
            [onnx.encode_batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        )
        onnx_seconds = time.perf_counter() - started
        print(
            f"pass {run}: PyTorch {torch_seconds:.1f} s "
            f"({len(texts) / torch_seconds:.1f} texts/s), ONNX Runtime {onnx_seconds:.1f} s "
            f"({len(texts) / onnx_seconds:.1f} texts/s), "
            f"ratio {onnx_seconds / torch_seconds:.3f}, "
            f"largest difference {np.abs(onnx_vectors - torch_vectors).max():.1e}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
