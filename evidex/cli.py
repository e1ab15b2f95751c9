"""The ``evidex`` command line: build, validate, activate, rollback, status, query, serve,
mcp.

Every subcommand explains itself with ``--help``, prints JSON with ``--json``
where a program reads the output, and exits non-zero with a one-line reason on
failure.
"""

import argparse
import json
import logging
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from evidex import __version__
from store.memory import choose_memory_pool

logger = logging.getLogger("evidex")

_OUR_LOGGERS = ("evidex", "store", "algorithms", "transforms", "pipelines", "validation", "query")
DEMO_QUERIES = (
    "How do I read a gzip-compressed file?",
    "What does the with statement do?",
    "How do I parse command-line arguments?",
)

_DESCRIPTION = """\
evidex builds versioned, validated, atomically activatable retrieval bundles
with Apache Beam, and answers queries with exact, quotable evidence spans.

Typical flow (bundle root: --root, else $EVIDEX_HOME, else ./.evidex):
  evidex build                 build a bundle (default input: the embedded
                               Python-documentation corpus)
  evidex validate              run the Great Expectations gate on the newest bundle
  evidex activate              point ACTIVE at the newest validated bundle
  evidex query "how do I read a gzip file?"
"""


class _DropNoise(logging.Filter):
    """Show our own progress lines and other libraries' warnings only (some libraries set
    their loggers to INFO themselves), and hide an import-time warning Beam emits when
    optional GCP clients are absent."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self._verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("apitools not found"):
            return False
        ours = record.name.split(".")[0] in _OUR_LOGGERS
        return self._verbose or ours or record.levelno >= logging.WARNING


def _configure_logging(verbose: bool, quiet: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("evidex: %(message)s"))
    handler.addFilter(_DropNoise(verbose))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    for name in _OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if quiet else logging.INFO)
    for noisy in ("great_expectations", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # transformers reads this when it is first imported (importing it here would cost a
    # query that never needs it a second of PyTorch).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


def _root_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root", default=None, help="bundle root (default: $EVIDEX_HOME, else ./.evidex)"
    )


def _json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _emit(payload: Any, as_json: bool, human: str) -> None:
    print(json.dumps(payload, indent=2, sort_keys=True, default=str) if as_json else human)


def _newest_bundle(root: str) -> str:
    from store.bundles import BundleError, list_bundles

    found = list_bundles(root)
    if not found:
        raise BundleError(f"no bundles under {root}: run `evidex build` first")
    return found[-1]


def cmd_build(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipelines.build_index import embedding_summary, run

    argv = [
        "--input",
        args.input,
        "--target_tokens",
        str(args.target_tokens),
        "--max_bad_ratio",
        str(args.max_bad_ratio),
        "--access_class",
        args.access_class,
        "--source_role",
        args.source_role,
    ]
    for flag, value in (("--root", args.root), ("--model", args.model), ("--limit", args.limit)):
        if value is not None:
            argv += [flag, str(value)]
    if args.title_in_text:
        argv.append("--title_in_text")
    if args.no_delta:
        argv.append("--delta=false")
    if args.metadata:
        argv += ["--metadata", args.metadata]
    if args.id_field:
        argv += ["--id_field", args.id_field]
    result = run(argv + _pipeline_flags(args) + beam_args)
    m = result.manifest
    payload = {
        "bundle_id": result.bundle_id,
        "path": result.path,
        "seconds": result.seconds,
        "row_counts": m.row_counts,
        "dead_letter_counts": m.dead_letter_counts,
        "delta": m.delta,
    }
    dead = sum(m.dead_letter_counts.values())
    delta = m.delta or {}
    documents = m.row_counts["documents"] + delta.get("unchanged", 0) + delta.get("moved", 0)
    chunks = m.row_counts["chunks"] + delta.get("chunks_reused", 0)
    segments = len(m.segments)
    human = (
        f"built bundle {result.bundle_id}: {documents} documents "
        f"({delta.get('new', 0)} new, {delta.get('changed', 0)} changed, "
        f"{delta.get('moved', 0)} moved, {delta.get('unchanged', 0)} unchanged, "
        f"{delta.get('deleted', 0)} deleted), "
        f"{chunks} chunks in {segments} segment{'s' if segments != 1 else ''}, "
        f"{dead} dead letters, {result.seconds:.0f}s\n"
        f"  {embedding_summary(chunks, delta)}\n"
        f"  {result.path}\n  next: evidex validate {result.bundle_id}"
    )
    _emit(payload, args.json, human)
    return 0


def _pipeline_flags(args: argparse.Namespace) -> list[str]:
    """The "pipeline options" group's values that differ from their defaults, as flags."""
    from pipelines.options import add_build_arguments

    table = argparse.ArgumentParser(add_help=False)
    add_build_arguments(table, skip=_BUILD_OWN)
    flags = []
    for action in table._actions:
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        name = action.option_strings[0]
        if action.nargs == 0:
            flags.append(name)
        elif isinstance(value, bool):
            flags.append(f"{name}={str(value).lower()}")
        else:
            flags.append(f"{name}={value}")
    return flags


def _check_passthrough(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> None:
    """Stop before any work when a flag passed on to the build is unknown (exit 2)."""
    from pipelines.build_index import UnknownOptionError, check_options

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    own = [o for o in sub.choices[command]._option_string_actions if o.startswith("--")]
    try:
        check_options(extra, also_known=own)
    except UnknownOptionError as exc:
        sub.choices[command].error(str(exc))


def cmd_validate(args: argparse.Namespace) -> int:
    from store.bundles import local_bundle, resolve_root, store_validation_report
    from store.regression import read_cases
    from validation import validate_bundle

    root = resolve_root(args.root)
    bundle_id = args.bundle or _newest_bundle(root)
    path = local_bundle(root, bundle_id)  # a cached copy when the root is an object store
    report = validate_bundle(
        path,
        regression=read_cases(root),
        locate=lambda other: local_bundle(root, other),
        every_row=args.every_row,
    )
    store_validation_report(root, bundle_id, path)
    failed = report.failed()
    human = (
        f"bundle {bundle_id}: {'PASSED' if report.passed else 'FAILED'} "
        f"({len(report.checks) - len(failed)}/{len(report.checks)} checks passed)"
    )
    for check in failed:
        human += f"\n  failed: {check.name} observed={json.dumps(check.observed, default=str)}"
    if report.passed:
        human += f"\n  next: evidex activate {bundle_id}"
    _emit(report.model_dump(mode="json"), args.json, human)
    return 0 if report.passed else 1


def cmd_activate(args: argparse.Namespace) -> int:
    from store.activation import activate
    from store.bundles import resolve_root

    root = resolve_root(args.root)
    bundle_id = args.bundle or _newest_bundle(root)
    kwargs = {"expected_previous": args.expect or None} if args.expect is not None else {}
    event = activate(root, bundle_id, **kwargs)
    was = f"was {event['previous']}" if event["previous"] else "first activation"
    _emit(event, args.json, f"active bundle: {bundle_id} ({was})")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from store.activation import rollback
    from store.bundles import resolve_root

    event = rollback(resolve_root(args.root), to=args.to)
    _emit(
        event,
        args.json,
        f"rolled back: active bundle {event['bundle_id']} (was {event['previous']})",
    )
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from store import staging
    from store.activation import gc
    from store.bundles import resolve_root

    root = resolve_root(args.root)
    deleted = [] if args.keep is None else gc(root, keep=args.keep, dry_run=args.dry_run)
    stale = staging.collect(root, older_than_s=args.stale_minutes * 60, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    human = f"{verb} {len(deleted)} bundle(s)" + "".join(f"\n  {b}" for b in deleted)
    human += f"\n{verb} {len(stale)} stale staging folder(s)" + "".join(
        f"\n  staging/{b}" for b in stale
    )
    payload = {"deleted": deleted, "staging_deleted": stale, "dry_run": args.dry_run}
    _emit(payload, args.json, human)
    return 0


def cmd_regression(args: argparse.Namespace) -> int:
    from store.bundles import resolve_root
    from store.regression import RegressionCase, add_case, read_cases

    root = resolve_root(args.root)
    if args.action == "add":
        if not args.query or not args.expect:
            raise ValueError("regression add needs QUERY and at least one --expect DOC_ID")
        case = RegressionCase(query=args.query, expect=tuple(args.expect), k=args.k)
        add_case(root, case)
        _emit(case.model_dump(mode="json"), args.json, f"added: {case.query!r} -> {case.expect}")
        return 0
    cases = read_cases(root)
    lines = [f"{len(cases)} regression case(s) in {root}"]
    lines += [f"  {c.query!r} expects {list(c.expect)} in top {c.k}" for c in cases]
    _emit([c.model_dump(mode="json") for c in cases], args.json, "\n".join(lines))
    return 0


def _bundle_summary(root: str, bundle_id: str) -> dict[str, Any]:
    from store import storage
    from store.bundles import VALIDATION_REPORT, bundle_path, read_manifest

    path = bundle_path(root, bundle_id)
    manifest = read_manifest(path)
    try:
        report = json.loads(storage.read_bytes(storage.join(path, VALIDATION_REPORT)))
        validation = "passed" if report.get("passed") else "failed"
    except FileNotFoundError:
        validation = "not validated"
    from store.segments import segment_refs

    refs = segment_refs(manifest)
    state = manifest.knowledge_state
    return {
        "bundle_id": bundle_id,
        "created_at": manifest.created_at,
        "row_counts": manifest.row_counts,
        "live": {
            "documents": sum(r.documents - len(r.deleted_documents) for r in refs),
            "chunks": sum(r.chunks - len(r.deleted_chunks) for r in refs),
        },
        "segments": [
            {
                "bundle_id": r.bundle_id,
                "part": r.part,
                "documents": r.documents,
                "chunks": r.chunks,
                "deleted_documents": len(r.deleted_documents),
                "deleted_chunks": len(r.deleted_chunks),
            }
            for r in refs
        ],
        "knowledge_state": state.model_dump() if state else None,
        "dead_letter_counts": manifest.dead_letter_counts,
        "validation": validation,
        "model": manifest.model.name,
    }


def _staleness(state: dict[str, Any] | None) -> str:
    if not state:
        return ""
    if state["entities_changed"] == 0:
        return f"; communities fresh (clustered in {state['communities_from']})"
    return (
        f"; communities from {state['communities_from']}, "
        f"{state['entities_changed']:.1%} of entities changed since"
    )


def cmd_compact(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipelines.compact import MergePolicy, run
    from store.activation import activate, read_active
    from store.bundles import local_bundle, read_manifest, resolve_root, store_validation_report
    from store.regression import read_cases
    from validation import validate_bundle

    root = resolve_root(args.root)
    active = read_active(root)
    source = args.source or active
    if source is None:
        raise RuntimeError(f"nothing to compact: no active bundle under {root}")
    merge = None
    if not args.force:
        policy = MergePolicy(max_segments=args.max_segments, max_deleted_share=args.max_deleted)
        manifest = read_manifest(local_bundle(root, source))
        reason = policy.reason(manifest)
        if reason is None:
            _emit(
                {"compacted": False, "source": source},
                args.json,
                f"{source} needs no compaction (at most {args.max_segments} segments and "
                f"{args.max_deleted:.0%} deleted rows); --force compacts anyway",
            )
            return 0
        merge = policy.segments_to_merge(manifest)
        logger.info(
            "compacting %s: %s (%s)",
            source,
            reason,
            f"tiered: segments {', '.join(merge)}" if merge else "whole",
        )
    result = run(beam_args, root=root, source=source, merge=merge)
    path = local_bundle(root, result.bundle_id)
    report = validate_bundle(
        path, regression=read_cases(root), locate=lambda other: local_bundle(root, other)
    )
    store_validation_report(root, result.bundle_id, path)
    payload: dict[str, Any] = {
        "compacted": True,
        "source": source,
        "bundle_id": result.bundle_id,
        "seconds": result.seconds,
        "segments": result.manifest.delta.get("compacted_segments")
        if result.manifest.delta
        else [],
        "tiered": merge is not None,
        "validation": "passed" if report.passed else "failed",
        "activated": False,
    }
    if not report.passed:
        payload["failed_checks"] = [
            {"name": c.name, "observed": c.observed} for c in report.failed()
        ]
        failed = ", ".join(c.name for c in report.failed()[:3])
        _emit(payload, args.json, f"compacted {result.bundle_id}, but validation failed: {failed}")
        return 1
    if source == active and not args.no_activate:
        activate(root, result.bundle_id, expected_previous=active)
        payload["activated"] = True
    merged = len(payload["segments"] or [])
    _emit(
        payload,
        args.json,
        f"compacted {source} ({merged} segments) into {result.bundle_id} in "
        f"{result.seconds:.0f}s: validation passed"
        + (
            ", activated" if payload["activated"] else f"; next: evidex activate {result.bundle_id}"
        ),
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from store.activation import read_active, read_history
    from store.bundles import list_bundles, resolve_root

    root = resolve_root(args.root)
    active = read_active(root)
    summaries = [_bundle_summary(root, b) for b in list_bundles(root)]
    history = read_history(root)
    payload = {"root": root, "active": active, "bundles": summaries, "history": history}
    lines = [f"root:   {root}", f"active: {active or '(none)'}", "bundles:"]
    for s in summaries:
        mark = "*" if s["bundle_id"] == active else " "
        counts = s["row_counts"]
        knowledge = "".join(
            f"{counts[name]} {name}  "
            for name in ("entities", "relations", "communities")
            if name in counts
        )
        live, segments = s["live"], s["segments"]
        deleted = sum(g["deleted_chunks"] for g in segments)
        lines.append(
            f" {mark} {s['bundle_id']}  {live['documents']} docs  "
            f"{live['chunks']} chunks  {knowledge}validation: {s['validation']}"
        )
        lines.append(
            f"     {len(segments)} segment{'s' if len(segments) != 1 else ''}, "
            f"{deleted} deleted chunk rows" + _staleness(s["knowledge_state"])
        )
        if s["bundle_id"] == active and len(segments) > 1:
            for g in segments:
                lines.append(
                    f"       segment {g['bundle_id']}{'/' + g['part'] if g.get('part') else ''}: "
                    f"{g['documents']} docs, {g['chunks']} "
                    f"chunks, {g['deleted_documents']} docs / {g['deleted_chunks']} chunks "
                    "deleted"
                )
    if not summaries:
        lines.append("   (none)")
    lines.append(f"history: {len(history)} events")
    for event in history[-5:]:
        lines.append(f"   {event['time']} {event['action']} {event['bundle_id']}")
    _emit(payload, args.json, "\n".join(lines))
    return 0


def format_evidence(query: str, evidence: Sequence[Any], width: int = 100) -> str:
    """Human-readable evidence list: id, title, span, score and the quoted text."""
    lines = [f"query: {query}"]
    if not evidence:
        lines.append("  (no evidence visible to this caller)")
    for e in evidence:
        flag = "  [fallback]" if getattr(e, "fallback", False) else ""
        lines.append(f"  {e.rank}. {e.doc_id}  [{e.start}:{e.end})  score {e.score:.4f}{flag}")
        section = getattr(e, "heading_path", "")
        first, last = getattr(e, "page_start", None), getattr(e, "page_end", None)
        page = "" if first is None else f"  p. {first}" + (f"-{last}" if last != first else "")
        lines.append(f"     {e.title}" + (f"  §  {section}" if section else "") + page)
        quote = " ".join(e.text.split())
        quote = quote if len(quote) <= 320 else quote[:317] + "..."
        lines += textwrap.wrap(
            f'"{quote}"', width=width, initial_indent="     ", subsequent_indent="     "
        )
    return "\n".join(lines)


def format_answer(result: Any, *, explain: bool) -> str:
    """Verdict, reasons and evidence; with ``explain``, routing and per-arm ranks too."""
    lines = [format_evidence(result.query, result.evidence)]
    reasons = "; ".join(f"{r.code}: {r.detail}" for r in result.admission.reasons)
    lines.append(f"  admission: {result.status} ({reasons})")
    if explain:
        r = result.route
        lines.append(
            f"  route: {r.operation} via {', '.join(r.surfaces) or 'nothing'}; "
            f"anchors: {', '.join(r.anchors) or 'none'}"
        )
        lines += [f"    - {why}" for why in r.reasons]
        lines.append(f"  time window: {result.admission.window[0]}..{result.admission.window[1]}")
        for e in result.evidence:
            lines.append(
                f"  #{e.rank} {e.chunk_id[:12]} dense rank {e.dense_rank} "
                f"(cos {e.dense_score}), lexical rank {e.lexical_rank} "
                f"(bm25 {e.lexical_score}), walk rank {e.walk_rank}, arms {', '.join(e.arms)}, "
                f"fallback {e.fallback}"
            )
        for e, why in result.admission.rejected:
            lines.append(f"  rejected {e.doc_id} [{e.start}:{e.end}): {why.code}: {why.detail}")
        lines += _format_knowledge(result)
    return "\n".join(lines)


_SHORT_ID = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")
"""A chunk id (64 hex digits) in an explanation, shown by its first 12."""


def _format_knowledge(result: Any) -> list[str]:
    lines = []
    for d in getattr(result, "knowledge", ()):
        lines.append(f"  {d.kind}: {d.text[:90]}  ({len(d.chunk_ids)} chunk(s), score {d.score})")
    expansion = getattr(result, "expansion", None)
    if expansion is not None:
        state = "blocked" if expansion.blocked else f"{len(expansion.relations)} relation(s)"
        lines.append(
            f"  graph expansion: {state}; resolved {expansion.resolved}; "
            f"unresolved {list(expansion.unresolved)}"
        )
    walk = getattr(result, "walk", None)
    if walk is not None:
        seeds = [s for s in walk.seeds if s.kind == "entity"]
        lines.append(
            f"  graph walk: {len(seeds)} entity seed(s), "
            f"{len(walk.seeds) - len(seeds)} dense chunk seed(s), {len(walk.hits)} chunk(s) ranked"
        )
        lines += [f"    seed {s.name!r} from {s.surface!r} (weight {s.weight:.3f})" for s in seeds]
        for path in result.walk_paths():
            route = " -> ".join(f"{step['via']} -> {step['node']}" for step in path["steps"])
            start = path["seed"] or "no path within reach"
            route, start = _SHORT_ID.sub(r"\1", route), _SHORT_ID.sub(r"\1", start)
            lines.append(
                f"    {path['chunk_id'][:12]} walk rank {path['walk_rank']}: {start}"
                + (f" -> {route}" if route else " (a seed)")
            )
    return lines


def _bundle_and_pipeline(root: str | None, bundle_id: str | None) -> tuple[str | None, str | None]:
    """The bundle a query will open and its spaCy pipeline, read from its manifest as
    plain JSON (``None`` for the pipeline when unknown here: the bundle loader decides)."""
    from store import storage
    from store.activation import read_active
    from store.bundles import MANIFEST, bundle_path, resolve_root

    resolved = resolve_root(root)
    chosen = bundle_id or read_active(resolved)
    if chosen is None or storage.is_remote(resolved):
        return chosen, None
    try:
        with open(os.path.join(bundle_path(resolved, chosen), MANIFEST), encoding="utf-8") as f:
            pipeline = json.load(f).get("model", {}).get("spacy_pipeline")
    except (OSError, ValueError, AttributeError):
        return chosen, None
    return chosen, pipeline if isinstance(pipeline, str) else None


def cmd_query(args: argparse.Namespace, helper: Any = None) -> int:
    """``helper``: an :class:`query.ner.EarlyHelper` forked as the process started."""
    import datetime as dt

    from query.lean import settle_pandas_probe
    from query.ner import PrefetchedEntities

    settle_pandas_probe()  # a query reads Arrow tables only (query/lean.py)

    chosen, pipeline = _bundle_and_pipeline(args.root, args.bundle)
    # spaCy loads in a helper process while this one opens the bundle (query/ner.py).
    ner = None
    if pipeline and helper is not None:
        ner = helper.ask(pipeline, args.query)
    elif pipeline:
        ner = PrefetchedEntities.start(pipeline, args.query)
    from query import answer, load_bundle

    bundle = load_bundle(
        args.root, bundle_id=chosen, verify=not args.no_verify, encoder=args.query_encoder
    )
    if ner is not None and bundle.manifest.model.spacy_pipeline == pipeline:
        bundle.use_recognizer(ner)
    access = args.access.split(",") if args.access else None
    roles = args.roles.split(",") if args.roles else None
    today = dt.date.fromisoformat(args.today) if args.today else None
    reranker = _reranker(args)
    results = []
    for text in args.query:
        result = answer(
            bundle,
            text,
            k=args.k,
            access=access,
            roles=roles,
            today=today,
            lexical_weight=args.lexical_weight,
            reranker=reranker,
        )
        results.append(result.to_json())
        if not args.json:
            print(format_answer(result, explain=args.explain))
            print()
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
    return 0


def cmd_eval(args: argparse.Namespace, beam_args: list[str]) -> int:
    from evidex import evaluation
    from query import open_bundle
    from store.bundles import resolve_root

    dataset = evaluation.load_dataset(args.data, split=args.split)
    root = args.root or os.path.join(resolve_root(None), "eval", dataset.name)
    build_args = ["--target_tokens", str(args.target_tokens), *beam_args]
    bundle = open_bundle(evaluation.find_or_build(dataset, root=root, build_args=build_args))
    report = evaluation.evaluate(dataset, bundle, limit=args.limit)
    out = args.out or os.path.join("eval-results", dataset.name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
    evaluation.plot(report, os.path.join(out, "arms.png"))
    human = evaluation.format_table(report) + f"\n  written: {out}/report.json, {out}/arms.png"
    _emit(report, args.json, human)
    return 0


def cmd_stream(args: argparse.Namespace, build_args: list[str]) -> int:
    from pipelines.stream import run

    argv = ["--input", args.input, "--window", args.window, "--engine", args.engine]
    if args.root:
        argv += ["--root", args.root]
    if args.poll:
        argv += ["--poll", args.poll]
    if args.stop_after:
        argv += ["--stop_after", args.stop_after]
    argv += ["--max_segments", str(args.max_segments), "--max_deleted", str(args.max_deleted)]
    run(argv + build_args)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import tempfile

    from query.lean import settle_pandas_probe
    from query.workers import default_workers, encoder_threads

    settle_pandas_probe()

    workers = args.workers or default_workers()
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    metrics_dir = None
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Workers add up their counters through files here; set before prometheus_client
        # is first imported (query.server imports it).
        metrics_dir = tempfile.TemporaryDirectory(prefix="evidex-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir.name
    if workers > 1:
        # Loaded once, then forked: a PyTorch or OpenMP pool must not exist yet at the fork.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    from query.server import after_fork, create_app
    from query.workers import serve

    threads = encoder_threads(workers)

    def build() -> Any:
        # One ONNX Runtime thread until the fork (each worker opens its own session).
        return create_app(
            args.root,
            verify=not args.no_verify,
            reranker=_reranker(args),
            encoder=args.query_encoder,
            encoder_threads=threads if workers == 1 else 1,
            principals=args.principals,
            anonymous=args.anonymous,
            audit_log=args.audit_log,
            audit_queries=args.audit_queries,
            audit_max_bytes=int(args.audit_max_mb * 2**20),
            audit_backups=args.audit_backups,
        )

    def ready(sock: Any) -> None:
        host, port = sock.getsockname()[:2]
        logger.info(
            "serving the active bundle on http://%s:%d with %d worker%s "
            "(OpenAPI at /docs, Prometheus metrics at /metrics)",
            host,
            port,
            workers,
            "" if workers == 1 else "s",
        )

    try:
        return serve(
            build,
            host=args.host,
            port=args.port,
            workers=workers,
            ready=ready,
            after_fork=lambda app: after_fork(app, threads),
        )
    finally:
        if metrics_dir is not None:
            metrics_dir.cleanup()


def cmd_mcp(args: argparse.Namespace) -> int:
    from query.lean import settle_pandas_probe

    settle_pandas_probe()
    if args.transport == "stdio":
        if args.principals or args.anonymous != "public":
            raise ValueError(
                "--principals and --anonymous apply to --transport http: over stdio the local "
                "user is trusted (narrow what it sees with --access)"
            )
        from query.mcp_server import serve_stdio

        return serve_stdio(
            args.root,
            access=args.access.split(",") if args.access else None,
            roles=args.roles.split(",") if args.roles else None,
            verify=not args.no_verify,
            encoder=args.query_encoder,
            audit_log=args.audit_log,
            audit_queries=args.audit_queries,
        )
    if args.access or args.roles:
        raise ValueError(
            "--access and --roles apply to --transport stdio: over HTTP what a caller may see "
            "comes from its principal (--principals)"
        )
    from query.mcp_server import serve_http

    return serve_http(
        args.root,
        host=args.host,
        port=args.port,
        principals=args.principals,
        anonymous=args.anonymous,
        audit_log=args.audit_log,
        audit_queries=args.audit_queries,
        audit_max_bytes=int(args.audit_max_mb * 2**20),
        audit_backups=args.audit_backups,
        verify=not args.no_verify,
        encoder=args.query_encoder,
    )


def _add_mcp(sub: Any) -> None:
    p = sub.add_parser(
        "mcp",
        help="MCP server (tools for agents) over the active bundle",
        description="Serve the active bundle to agents over the Model Context Protocol "
        "(official mcp SDK) with three tools: search_evidence (the routed answer: each item's "
        "doc id, title, revision, exact [start, end) span, quoted text, score and source, "
        "plus the PASS / FAIL / UNKNOWN verdict and its reasons), read_span (the exact text "
        "of a span of a live revision) and bundle_status. Follows ACTIVE like evidex serve. "
        "--transport stdio (default): for an agent that starts this command itself; the "
        "local user is trusted and sees every access class unless --access narrows it. "
        "--transport http: streamable HTTP at http://HOST:PORT/mcp; callers are "
        "authenticated as by evidex serve (--principals: bearer tokens and JWTs; without "
        "credentials, public rows only).",
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or http (streamable HTTP)",
    )
    p.add_argument("--host", default="127.0.0.1", help="http: bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8766, help="http: port (default 8766)")
    p.add_argument(
        "--access",
        default=None,
        help="stdio: comma-separated access classes the local user's tools see (default: all)",
    )
    p.add_argument(
        "--roles",
        default=None,
        help="stdio: comma-separated source roles the local user's tools see (default: all)",
    )
    p.add_argument("--no-verify", action="store_true", help="skip sha256 checks on load")
    _serve_access_args(p)
    _encoder_arg(p, default="auto")
    _root_arg(p)


def _serve_access_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--principals",
        metavar="FILE",
        default=None,
        help="principals file (TOML or YAML): who may call with which bearer token or JWT, "
        "the access classes and source roles each may see, and request rates; re-read "
        "when it changes (README, docs/reliability.md). Without it every caller is "
        "anonymous and sees public rows only",
    )
    p.add_argument(
        "--anonymous",
        choices=("public", "none"),
        default="public",
        help="callers without credentials: see public rows (default), or are refused "
        "with 401 (none; /health and /docs stay open)",
    )
    p.add_argument(
        "--audit-log",
        dest="audit_log",
        metavar="PATH",
        default=None,
        help="append one JSON line per request (time, principal, route, status, bundle, "
        "the doc id, revision and span of every item returned); rotated by size",
    )
    p.add_argument(
        "--audit-queries",
        dest="audit_queries",
        action="store_true",
        help="also write each query's text into the audit log (off by default)",
    )
    p.add_argument(
        "--audit-max-mb",
        dest="audit_max_mb",
        type=float,
        default=10.0,
        help="rotate the audit log past this size (default %(default)g MiB)",
    )
    p.add_argument(
        "--audit-backups",
        dest="audit_backups",
        type=int,
        default=5,
        help="rotated audit logs kept, PATH.1 ... PATH.N (default %(default)s)",
    )


def _add_principals(sub: Any) -> None:
    p = sub.add_parser(
        "principals",
        help="make bearer tokens and check principals files for evidex serve",
        description="Tokens for `evidex serve --principals FILE`. `token ID` prints a new "
        "random token for principal ID (give it to the caller, once) and the salted scrypt "
        "hash to put in the file as secret_hash; `hash` reads a token on standard input and "
        "prints its hash; `check FILE` validates a principals file and its key file.",
    )
    p.add_argument("action", choices=("token", "hash", "check"))
    p.add_argument("name", nargs="?", help="the principal id (token) or the file (check)")
    _json_arg(p)


def cmd_principals(args: argparse.Namespace) -> int:
    from query.credentials import hash_token, new_token, split_token

    if args.action == "check":
        from pathlib import Path

        from query.auth import Principals

        if not args.name:
            raise ValueError("check needs the principals file")
        snapshot = Principals.build(Path(args.name).absolute())
        report = {"principals": sorted(snapshot.entries), "jwt": snapshot.jwt is not None}
        _emit(report, args.json, f"ok: {len(snapshot.entries)} principals, jwt {report['jwt']}")
        return 0
    if args.action == "token":
        if not args.name:
            raise ValueError("token needs the principal id")
        token = new_token(args.name)
    else:
        token = sys.stdin.readline().strip()
        if split_token(token) is None:
            raise ValueError("expected a token '<principal id>.<secret>' on standard input")
    stored = hash_token(token)
    report = {"id": token.partition(".")[0], "token": token, "secret_hash": stored}
    if args.action == "hash":
        report.pop("token")
    human = "\n".join(f"{k}: {v}" for k, v in report.items())
    _emit(report, args.json, human)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from store.config import DEFAULT_TARGET_TOKENS
    from store.staging import DEFAULT_STALE_AFTER_S

    parser = argparse.ArgumentParser(
        prog="evidex", description=_DESCRIPTION, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"evidex {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug logs")
    parser.add_argument("-q", "--quiet", action="store_true", help="hide progress lines")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_build(sub)
    p = sub.add_parser(
        "stream",
        help="watch an input and publish a validated segment per window",
        description="Watch INPUT and publish one validated generation per window in which "
        "files arrived, changed or vanished. Each window's new and changed files are parsed, "
        "chunked, embedded and parsed by spaCy (documents the active generation holds in the "
        "same state are skipped; an edit's unchanged passages keep their vectors); the "
        "window's rows become one new segment beside the active generation's, documents of "
        "vanished files or records are deleted, the knowledge layer is updated, and the "
        "generation is validated and activated only if it passes (compare-and-swap). The "
        "first generation, and windows with explicit deletes, a metadata sidecar or a "
        "finished compaction, are built by a delta refresh of the whole input instead. "
        "When the merge policy calls for it, compaction runs in a child process beside the "
        "windows. Models stay loaded between windows. "
        "Prints one line per window. Any other option is passed to each window's build "
        "(e.g. --knowledge=false).",
    )
    p.add_argument("--input", required=True, help="directory, file or glob to watch")
    p.add_argument("--window", default="5m", help="window length, e.g. 30s, 5m (default 5m)")
    p.add_argument("--poll", default=None, help="listing interval (default: window / 5)")
    p.add_argument("--stop-after", dest="stop_after", default=None, help="stop after, e.g. 1h")
    p.add_argument(
        "--max-segments",
        dest="max_segments",
        type=int,
        default=10,
        help="merge policy: compact past this many segments (default 10)",
    )
    p.add_argument(
        "--max-deleted",
        dest="max_deleted",
        type=float,
        default=0.25,
        help="merge policy: compact past this share of deleted chunk rows (default 0.25)",
    )
    p.add_argument(
        "--engine",
        choices=("loop", "beam", "refresh"),
        default="loop",
        help="loop (default): a local timer runs the stream's pipeline once per window over "
        "the files that changed; beam: the streaming Beam pipeline (MatchContinuously, "
        "windows, one committer) for Dataflow or Flink; refresh: a local timer runs a delta "
        "refresh of the whole input per window",
    )
    _root_arg(p)
    p = sub.add_parser(
        "compact",
        help="merge the active generation's segments into one (validated, activated)",
        description="Rewrite the live rows of every segment of the active generation (or "
        "--source) as one segment, with the knowledge layer (entities, relations, "
        "communities) computed afresh, without chunking, embedding or parsing anything "
        "again; then validate it and, if it passes, activate it in place of the generation "
        "it compacted (compare-and-swap: a refresh activated meanwhile wins). Runs only when "
        "the merge policy calls for it (more than --max-segments segments, or more than "
        "--max-deleted of the chunk rows deleted) unless --force. When the segments besides "
        "the largest are small beside it (under half its live rows) and deletions do not "
        "call for more, the policy merges only those (a tiered merge: the largest segment, "
        "with the other segments of its batch build when `evidex build --segments` wrote "
        "several, and the knowledge layer are kept as they are; those segments count as one "
        "against --max-segments); --force always merges everything. "
        "Beam runner flags are passed to the pipeline.",
    )
    p.add_argument("--source", default=None, metavar="BUNDLE", help="generation to compact")
    p.add_argument(
        "--max-segments",
        dest="max_segments",
        type=int,
        default=10,
        help="compact when the generation has more segments than this (default %(default)s)",
    )
    p.add_argument(
        "--max-deleted",
        dest="max_deleted",
        type=float,
        default=0.25,
        help="compact when more than this share of chunk rows is deleted (default %(default)s)",
    )
    p.add_argument("--force", action="store_true", help="compact whatever the policy says")
    p.add_argument(
        "--no-activate", dest="no_activate", action="store_true", help="validate, do not activate"
    )
    _root_arg(p)
    _json_arg(p)
    p = sub.add_parser(
        "validate",
        help="run the validation gate on a bundle",
        description="Run the Great Expectations suites and ANN qualification on "
        "a bundle and write validation.json into it. Exits 1 if any check fails. "
        "A refresh's knowledge tables are checked row by row where they changed since "
        "its validated parent, and by reference on every row.",
    )
    p.add_argument("bundle", nargs="?", help="bundle id (default: the newest bundle)")
    p.add_argument(
        "--every-row",
        dest="every_row",
        action="store_true",
        help="check every knowledge row, not only those changed since the parent",
    )
    _root_arg(p)
    _json_arg(p)
    p = sub.add_parser(
        "activate",
        help="make a validated bundle the active one",
        description="Atomically point ACTIVE at a bundle whose validation passed "
        "for its exact manifest. Refuses anything else, naming why.",
    )
    p.add_argument("bundle", nargs="?", help="bundle id (default: the newest bundle)")
    p.add_argument(
        "--expect",
        default=None,
        metavar="BUNDLE",
        help="compare-and-swap: fail unless ACTIVE currently names BUNDLE ('' for none)",
    )
    _root_arg(p)
    _json_arg(p)
    p = sub.add_parser(
        "rollback",
        help="re-activate the previously active bundle",
        description="Point ACTIVE back at the bundle that was active before the "
        "current one (or at --to BUNDLE). Recorded in history.jsonl.",
    )
    p.add_argument("--to", default=None, metavar="BUNDLE", help="roll back to this bundle")
    _root_arg(p)
    _json_arg(p)
    p = sub.add_parser(
        "status",
        help="show the active bundle, all bundles and history",
        description="Show the bundle root, the active bundle, every bundle with "
        "its counts and validation state, and the activation history.",
    )
    _root_arg(p)
    _json_arg(p)
    _add_query(sub)
    p = sub.add_parser(
        "eval",
        help="score every retrieval arm on a BEIR-format dataset",
        description="Build (or reuse, by input fingerprint and config) a bundle of DIR's "
        "corpus.jsonl, run every query of qrels/<split>.tsv through each arm (dense, lexical, "
        "fusion w=1.0 and 0.1, router) and report NDCG@10, Recall@100, MRR@10 (plus "
        "recall@2, recall@5 and all-supporting@k of the supporting documents when DIR has "
        "questions.jsonl: supporting_ids, else supporting_titles) and latency: a table, "
        "report.json and arms.png. Unknown --flags go to the Beam build.",
    )
    p.add_argument("data", metavar="DIR", help="BEIR directory, e.g. ../shared/data/scifact")
    p.add_argument("--split", default="test", help="qrels split (default test)")
    p.add_argument("--limit", type=int, default=None, help="evaluate the first N queries only")
    p.add_argument("--out", default=None, help="output folder (default eval-results/<name>)")
    p.add_argument(
        "--target-tokens",
        dest="target_tokens",
        type=int,
        default=DEFAULT_TARGET_TOKENS,
        help="chunk size for the eval build (default %(default)s, the build's default, so "
        "the figures are those of the default configuration)",
    )
    _root_arg(p)
    _json_arg(p)
    p = sub.add_parser(
        "serve",
        help="HTTP API over the active bundle",
        description="Serve /retrieve (POST), /health, /bundle, /metrics (Prometheus text: "
        "requests by path and status, latency histogram, verdicts by route, the served "
        "bundle's id and age) and the OpenAPI schema (/docs, Swagger UI served locally, "
        "/openapi.json). Queries are embedded by the bundle's own ONNX encoder, without "
        "PyTorch. Picks up new activations without dropping requests, in every worker. Binds "
        "to loopback unless --host says otherwise. What a caller may see comes from its "
        "principal (--principals: bearer tokens and JWTs), never from the request; without "
        "credentials, public rows only.",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="worker processes sharing the port (default: one per core this process may "
        "use; in a container with a CPU limit, pass the limit). The bundle is "
        "loaded once and the workers are forked from it, so they start at once and share "
        "its memory-mapped files; each follows ACTIVE on its own, and a worker that dies "
        "is replaced",
    )
    p.add_argument("--no-verify", action="store_true", help="skip sha256 checks on load")
    _serve_access_args(p)
    _rerank_arg(p)
    _encoder_arg(p, default="auto")
    _root_arg(p)
    _add_mcp(sub)
    _add_principals(sub)
    p = sub.add_parser(
        "gc",
        help="delete old bundles and the staging folders of dead builds",
        description="Delete all but the newest --keep bundles (never the active bundle or "
        "its parent), and every staging folder that no running build holds: a build "
        "refreshes a heartbeat beside its staging folder every few seconds, and a folder "
        "whose heartbeat is older than --stale-minutes (or missing) is left over from a "
        "build that failed or was killed.",
    )
    p.add_argument(
        "--keep",
        type=int,
        default=None,
        help="how many of the newest bundles to keep (default: delete no bundle)",
    )
    p.add_argument(
        "--stale-minutes",
        dest="stale_minutes",
        type=float,
        default=DEFAULT_STALE_AFTER_S / 60,
        help="a staging folder whose heartbeat is older than this is deleted (default %(default)g)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    _root_arg(p)
    _json_arg(p)
    p = sub.add_parser(
        "regression",
        help="manage the frozen regression queries",
        description="The root's frozen regression suite: queries with the "
        "document ids they must retrieve. `evidex validate` runs every case and "
        "a bundle that misses one cannot be activated.",
    )
    p.add_argument("action", choices=["add", "list"], help="add a case, or list them")
    p.add_argument("query", nargs="?", help="the query (for add)")
    p.add_argument(
        "--expect",
        action="append",
        metavar="DOC_ID",
        help="document id that must be in the top k (repeatable)",
    )
    p.add_argument("--k", type=int, default=5, help="depth the documents must appear in")
    _root_arg(p)
    _json_arg(p)
    return parser


# Build options the ``build`` subcommand spells itself (with dashes, above); the
# pipeline's other options are listed under "pipeline options" in its --help.
_BUILD_OWN = frozenset(
    {
        "input",
        "root",
        "model",
        "target_tokens",
        "max_bad_ratio",
        "access_class",
        "source_role",
        "metadata",
        "title_in_text",
        "id_field",
        "limit",
    }
)


def _add_build(sub: Any) -> None:
    from pipelines.options import add_build_arguments
    from store.config import (
        DEFAULT_ACCESS_CLASS,
        DEFAULT_MAX_BAD_RATIO,
        DEFAULT_SOURCE_ROLE,
        DEFAULT_TARGET_TOKENS,
        STDLIB_CORPUS,
    )

    p = sub.add_parser(
        "build",
        help="build a bundle with the Beam pipeline",
        description="Build a new bundle: ingest -> chunk -> embed -> Parquet + USearch + "
        "manifest, on Beam's DirectRunner unless a runner flag says otherwise. Unknown "
        "--flags are passed to Beam (e.g. --runner, --direct_num_workers). Bad documents go "
        "to failures/*.parquet; the build fails only above --max_bad_ratio. The active "
        "bundle is never touched.",
    )
    p.add_argument(
        "--input",
        default=STDLIB_CORPUS,
        help="file, directory or glob of .txt/.md/.html/.pdf/.jsonl (default 'stdlib:', the "
        "embedded Python-documentation corpus)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="sentence-transformers name or local path (default: bundled all-MiniLM-L6-v2)",
    )
    p.add_argument(
        "--target-tokens",
        dest="target_tokens",
        type=int,
        default=DEFAULT_TARGET_TOKENS,
        help="preferred chunk size in model tokens",
    )
    p.add_argument(
        "--max-bad-ratio",
        dest="max_bad_ratio",
        type=float,
        default=DEFAULT_MAX_BAD_RATIO,
        help="fail above this dead-letter share",
    )
    p.add_argument(
        "--access-class",
        dest="access_class",
        default=DEFAULT_ACCESS_CLASS,
        help="access class of every document",
    )
    p.add_argument(
        "--source-role",
        dest="source_role",
        default=DEFAULT_SOURCE_ROLE,
        help="source role of every document",
    )
    p.add_argument(
        "--metadata",
        default=None,
        help="sidecar JSONL/CSV keyed by source_id setting access_class, source_role, "
        "language, valid_from, valid_to, title",
    )
    p.add_argument(
        "--no-delta",
        action="store_true",
        help="embed everything again instead of reusing the active bundle's unchanged rows",
    )
    p.add_argument(
        "--title-in-text",
        dest="title_in_text",
        action="store_true",
        help="JSONL: make each record's title the first paragraph of its text",
    )
    p.add_argument(
        "--id-field",
        dest="id_field",
        metavar="FIELD[,FIELD]",
        default=None,
        help="fields holding a document's own id, tried in order: in each JSONL record "
        "(default _id,id,doc_id) and, when given, in a file's front matter or --metadata "
        "row. Without it a file's id is its path under --input, so a renamed file is a new "
        "document; with it (or with JSONL ids) a moved or re-exported document keeps its "
        "rows: it is counted as moved, and nothing of it is parsed or embedded again",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="embedded corpus only: first N documents (quick runs)",
    )
    _root_arg(p)
    _json_arg(p)
    group = p.add_argument_group(
        "pipeline options",
        "Beam-style spellings (--name or --name=value). Any Beam pipeline option is accepted "
        "as well (e.g. --runner, --direct_running_mode, --direct_num_workers); an option "
        "that neither evidex nor Beam knows stops the build before any work.",
    )
    add_build_arguments(group, skip=_BUILD_OWN)


def _add_query(sub: Any) -> None:
    p = sub.add_parser(
        "query",
        help="retrieve evidence from the active bundle",
        description="Route each query, retrieve with dense + BM25 fusion, and admit the "
        "evidence: status PASS / FAIL / UNKNOWN with reasons, then document id, title, exact "
        "[start:end) span, score and the quoted text. Verifies the bundle's checksums and "
        "model fingerprint before reading it.",
    )
    p.add_argument("query", nargs="+", help="one or more queries (quote each)")
    p.add_argument("--k", type=int, default=5, help="evidence items per query (default 5)")
    p.add_argument(
        "--access",
        default=None,
        help="comma-separated access classes the caller may see (default: all)",
    )
    p.add_argument(
        "--roles",
        default=None,
        help="comma-separated source roles the caller accepts (default: all)",
    )
    p.add_argument(
        "--today",
        default=None,
        metavar="YYYY-MM-DD",
        help="date for validity checks when the query names none (default: today)",
    )
    p.add_argument(
        "--lexical-weight",
        dest="lexical_weight",
        type=float,
        default=1.0,
        help="weight of the BM25 arm in fusion (default 1.0)",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="show routing, per-arm ranks, the graph walk (seeds and paths) and rejected evidence",
    )
    _rerank_arg(p)
    _encoder_arg(p, default="bundled")
    p.add_argument("--bundle", default=None, help="query this bundle instead of the active one")
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the sha256 check of bundle files (faster start)",
    )
    _root_arg(p)
    _json_arg(p)


def _rerank_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rerank",
        default=None,
        metavar="PATH",
        help="reorder the retrieved evidence with a local sentence-transformers "
        "CrossEncoder folder (off by default: none ships offline)",
    )


def _encoder_arg(p: argparse.ArgumentParser, *, default: str) -> None:
    p.add_argument(
        "--query-encoder",
        dest="query_encoder",
        choices=("auto", "bundled", "onnx", "torch"),
        default=default,
        help="how queries are embedded. Bundles carry their model as an ONNX graph and "
        "tokenizer (encoder/), run by ONNX Runtime without PyTorch; every choice but torch "
        "uses it. For an older bundle without one: bundled loads PyTorch, onnx exports the "
        "model to ONNX at start (about 2 s, then ~3x faster per query), auto does the same "
        "when the export reproduces the PyTorch vectors, else uses PyTorch; torch always "
        f"loads the sentence-transformers model. Default {default}",
    )


def _reranker(args: argparse.Namespace) -> Any:
    if not getattr(args, "rerank", None):
        return None
    from query.rerank import Reranker

    return Reranker.load(args.rerank)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # A one-shot query's NER helper starts importing spaCy now, before the parser's
    # imports (query/ner.py: EarlyHelper); it is asked once the bundle is known.
    helper = _early_ner_helper() if _command_word(words) == "query" else None
    try:
        return _run(words, helper)
    finally:
        if helper is not None:
            helper.close()


def _command_word(words: Sequence[str]) -> str | None:
    """The subcommand ``words`` name, read before parsing: the first word that is not an
    option (the top-level options take no value)."""
    return next((word for word in words if not word.startswith("-")), None)


def _early_ner_helper() -> Any:
    # numpy and pydantic are imported by this process anyway, and by spaCy's import too:
    # imported before the fork, they are not imported twice (0.15-0.3 s of CPU here, on
    # two cores shared by both processes).
    import numpy  # noqa: F401
    import pydantic  # noqa: F401

    from query.ner import EarlyHelper

    return EarlyHelper.fork()


def _run(argv: list[str], helper: Any) -> int:
    """Parse ``argv`` and run its command (``helper``: a query's early NER helper)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("build", "eval", "stream", "compact"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        _check_passthrough(parser, args.command, extra)
    _configure_logging(args.verbose, args.quiet or getattr(args, "json", False))
    choose_memory_pool()
    handlers = {
        "validate": cmd_validate,
        "activate": cmd_activate,
        "rollback": cmd_rollback,
        "status": cmd_status,
        "gc": cmd_gc,
        "regression": cmd_regression,
        "serve": cmd_serve,
        "mcp": cmd_mcp,
        "principals": cmd_principals,
    }
    try:
        if args.command == "build":
            return cmd_build(args, extra)
        if args.command == "eval":
            return cmd_eval(args, extra)
        if args.command == "stream":
            return cmd_stream(args, extra)
        if args.command == "compact":
            return cmd_compact(args, extra)
        if args.command == "query":
            return cmd_query(args, helper)
        return handlers[args.command](args)
    except KeyboardInterrupt:
        print("evidex: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.verbose:
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"evidex {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
