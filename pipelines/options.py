"""The options of ``evidex build``, in one table that the Beam options class and the
command line's ``--help`` share. No Beam import: the CLI builds its parser from it on
every command.
"""

from typing import Any

from store.config import (
    DEFAULT_MAX_BAD_RATIO,
    DEFAULT_SPACY_PIPELINE,
    DEFAULT_TARGET_TOKENS,
    STDLIB_CORPUS,
    AnnConfig,
    IngestConfig,
    LexicalConfig,
)


def on_unless_false(value: str) -> bool:
    """A boolean option that is on unless given as 0, false or no (``--delta=false``)."""
    return value.lower() not in ("0", "false", "no")


def add_build_arguments(parser: Any, *, skip: frozenset[str] = frozenset()) -> None:
    """Add the options of ``evidex build`` (Beam spelling, ``--name``) to ``parser``.

    Args:
        parser: an ``argparse`` parser or argument group.
        skip: option names (without dashes) that the caller defines itself.
    """

    def add(flag: str, *aliases: str, **kwargs: Any) -> None:
        if flag.lstrip("-") not in skip:
            parser.add_argument(flag, *aliases, **kwargs)

    add(
        "--input",
        default=STDLIB_CORPUS,
        help="file, directory or glob of .txt/.md/.jsonl files (any Beam filesystem); "
        "'stdlib:' (the default) builds the embedded Python-documentation corpus",
    )
    add("--root", default=None, help="bundle root (default $EVIDEX_HOME or ./.evidex)")
    add(
        "--model",
        default=None,
        help="sentence-transformers model name or local path "
        "(default: the bundled all-MiniLM-L6-v2)",
    )
    add(
        "--target_tokens",
        type=int,
        default=DEFAULT_TARGET_TOKENS,
        help="preferred chunk size in model tokens",
    )
    add(
        "--semantic_chunking",
        action="store_true",
        help="also end chunks where adjacent sentences' embeddings grow apart "
        "(embeds the sentences of sections larger than --target_tokens: slower builds)",
    )
    add(
        "--lexical_context",
        type=int,
        default=LexicalConfig().context_chunks,
        help="BM25 scores each chunk together with this many neighbouring chunks of its "
        "document on each side; hits still quote the chunk alone (default %(default)s; "
        "0: the chunk alone)",
    )
    add(
        "--ann_partition_min_rows",
        type=int,
        default=AnnConfig().partition_min_rows,
        help="give each access class with more chunks than this its own HNSW file, "
        "searched for callers restricted to some classes (default %(default)s; smaller "
        "classes are searched exactly)",
    )
    add(
        "--max_bad_ratio",
        type=float,
        default=DEFAULT_MAX_BAD_RATIO,
        help="fail the build when dead letters exceed this share of inputs",
    )
    add(
        "--max_document_bytes",
        type=int,
        default=IngestConfig().max_document_bytes,
        help="files (and JSONL records) larger than this go to the dead letters, "
        "unread (default %(default)s)",
    )
    add(
        "--access_class",
        default=IngestConfig().access_class,
        help="access class given to every document",
    )
    add(
        "--source_role",
        default=IngestConfig().source_role,
        help="source role given to every document",
    )
    add(
        "--metadata",
        default=None,
        help="sidecar JSONL or CSV keyed by source_id: access_class, source_role, "
        "language, valid_from, valid_to, title (overrides front matter and defaults)",
    )
    add(
        "--delta",
        default=True,
        type=on_unless_false,
        help="reuse the active bundle's rows and vectors for unchanged documents "
        "(default true; --delta=false forces a full build)",
    )
    add(
        "--id_field",
        default=None,
        help="comma-separated fields holding a document's own id, tried in order: in each "
        "JSONL record (default _id,id,doc_id) and, when given, in a file's front matter or "
        "--metadata row. Without it a file's id is its path under --input, so a renamed or "
        "moved file is a new document; with it, a moved file keeps its id and its rows",
    )
    add(
        "--title_in_text",
        action="store_true",
        help="JSONL: make each record's title the first paragraph of its text",
    )
    add(
        "--knowledge",
        default=True,
        type=on_unless_false,
        help="build the knowledge layer: spaCy mentions and relations, canonical "
        "entities, Louvain communities, relation/community vectors (default true)",
    )
    add(
        "--surface_vectors",
        default=False,
        nargs="?",
        const=True,
        type=on_unless_false,
        help="embed relation summaries and community reports, so synthesis and comparison "
        "questions search them (default false: they changed no result on any data set "
        "measured, and they are most of a build's embedding; see docs/benchmarks.md)",
    )
    add(
        "--recluster_share",
        default=0.1,
        type=float,
        help="a refresh keeps its parent's communities (pruned to what is live, their "
        "reports and vectors reused) until this share of the entities has had an edge "
        "added or removed since the communities were clustered; then it clusters again "
        "(default 0.1; compaction always clusters again)",
    )
    add(
        "--fold_share",
        default=0.1,
        type=float,
        help="a refresh or stream window writes its knowledge tables (mentions, entities, "
        "relations, communities) as its parent's base (a hard link on a local root) and the "
        "rows changed since it, so it writes what changed, not the corpus; once the change "
        "passes this share of the base's rows it writes them whole, and that is the next "
        "base (default 0.1; compaction always writes them whole)",
    )
    add(
        "--community_engine",
        default="leiden",
        choices=("leiden", "python-louvain"),
        help="community detection engine: 'leiden' (Louvain levels by leidenalg's C++ "
        "local moving, one connected component or pack of small ones at a time) or "
        "'python-louvain' (the reference); same modularity within 0.01, see "
        "docs/benchmarks.md (default leiden)",
    )
    add(
        "--query_encoder_artifact",
        default=True,
        type=on_unless_false,
        help="store the embedding model in the bundle as an ONNX graph plus its tokenizer "
        "(about 90 MB for the default model), checked against PyTorch, so queries are "
        "answered without PyTorch (default true)",
    )
    add(
        "--spacy_pipeline",
        default=DEFAULT_SPACY_PIPELINE,
        help="installed spaCy pipeline (name or path) for the knowledge layer",
    )
    add(
        "--spacy_processes",
        default="auto",
        help="spaCy parsers per worker, the worker included: 1 parses in the worker "
        "alone; 'auto' (default) uses every core when the pipeline runs in one "
        "in-process DirectRunner worker and 1 otherwise (other runners already run "
        "a worker per core). Speed only: the bundle is the same",
    )
    add(
        "--segments",
        default="auto",
        help="segments a full build writes, each built on its own (its chunk table, HNSW "
        "file and BM25 index), so no worker holds every chunk: a positive number, or "
        "'auto' (default): one per 128 MiB of input. A refresh always writes one",
    )
    add(
        "--limit",
        type=int,
        default=None,
        help="embedded corpus only: keep the first N documents",
    )
    add(
        "--keep_failed",
        "--keep-failed",
        action="store_true",
        help="when the build fails, keep its staging folder's failures/ (the dead letters "
        "with their reasons) instead of deleting the whole staging folder",
    )
