"""Compiled attribute rules against spaCy's attribute ruler: same annotations, less time.

Usage:
    python -m benchmarks.experiments.attribute_rules --bundle /tmp/bc/root/bundles/<id> [--chunks N]

Parses the first ``--chunks`` chunk texts of a built bundle (0: all of them) twice:
with the pipeline as extraction loaded it before (spaCy's ``attribute_ruler``,
lemmatizer on demand) and as ``transforms.extract.load_parser`` loads it now
(compiled rules). It counts the chunks whose tokens differ in any of tag, POS,
morphology, lemma, dependency, head or entity, and prints both parse times and
the time of the matching alone (the ruler's Matcher against the lookup) over the
same parsed texts. ``--repeat`` times the matching again.
"""

import argparse
import time
from collections.abc import Iterable, Sequence
from typing import Any

ANNOTATIONS = ["TAG", "POS", "MORPH", "LEMMA", "DEP", "HEAD", "ENT_IOB", "ENT_TYPE"]


def differing(ours: Iterable[Any], theirs: Iterable[Any]) -> tuple[int, int]:
    """(documents, tokens) whose annotations differ between two parses of the same texts."""
    from spacy.attrs import IDS

    columns = [IDS[name] for name in ANNOTATIONS]
    documents = tokens = 0
    for a, b in zip(ours, theirs, strict=True):
        if len(a) != len(b):
            documents, tokens = documents + 1, tokens + max(len(a), len(b))
            continue
        rows = (a.to_array(columns) != b.to_array(columns)).any(axis=1).sum()
        documents += bool(rows)
        tokens += int(rows)
    return documents, tokens


def _timed_parse(nlp: Any, texts: Sequence[str], batch_size: int) -> tuple[list[Any], float]:
    started = time.perf_counter()
    docs = list(nlp.pipe(texts, batch_size=batch_size))
    return docs, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, help="a built bundle directory")
    parser.add_argument("--chunks", type=int, default=2000, help="chunk texts to parse (0: all)")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes of the matching")
    args = parser.parse_args(argv)

    from algorithms.attribute_rules import FACTORY
    from benchmarks.experiments.parse_components import parse_inputs
    from transforms.extract import load_parser, load_spacy

    try:
        pipeline, size, texts = parse_inputs(args.bundle, args.chunks)
    except ValueError as exc:
        parser.error(str(exc))

    compiled_nlp = load_parser(pipeline).nlp
    if FACTORY not in compiled_nlp.pipe_names:
        parser.error(f"{pipeline}'s attribute ruler has patterns the compiled rules do not cover")
    ruler_nlp = load_spacy(pipeline)
    if "lemmatizer" in ruler_nlp.pipe_names:
        ruler_nlp.disable_pipe("lemmatizer")  # as extraction runs it: lemmas on demand
    print(f"{pipeline}: {len(texts)} chunks")
    theirs, ruler_seconds = _timed_parse(ruler_nlp, texts, size)
    ours, compiled_seconds = _timed_parse(compiled_nlp, texts, size)
    documents, tokens = differing(ours, theirs)
    print(
        f"parse with the ruler {ruler_seconds:.1f} s, with compiled rules "
        f"{compiled_seconds:.1f} s (x{compiled_seconds / ruler_seconds:.3f}); "
        f"chunks differing: {documents} of {len(texts)} ({tokens} tokens)"
    )

    ruler = ruler_nlp.get_pipe("attribute_ruler")
    compiled = compiled_nlp.get_pipe(FACTORY)
    with ruler_nlp.select_pipes(disable=["attribute_ruler", "ner"]):
        bare = list(ruler_nlp.pipe(texts, batch_size=size))
    n_tokens = sum(len(doc) for doc in bare)
    for run in range(1, args.repeat + 1):
        started = time.perf_counter()
        for doc in bare:
            ruler.match(doc)
        matcher = time.perf_counter() - started
        started = time.perf_counter()
        for doc in bare:
            compiled.match(doc)
        lookup = time.perf_counter() - started
        print(
            f"matching pass {run}: ruler {matcher:.2f} s ({matcher / n_tokens * 1e6:.1f} us a "
            f"token), compiled {lookup:.2f} s ({lookup / n_tokens * 1e6:.1f} us a token)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
