"""Wiring of the knowledge layer: chunks -> mentions, entities, relations, communities,
their two vector surfaces (relation summaries, community reports) and tables.

Only assembly lives here; every algorithm is in ``transforms/``.
"""

from dataclasses import dataclass
from typing import Any

import apache_beam as beam

from algorithms.summaries import COOCCURRENCE
from schemas import (
    COMMUNITY_SCHEMA,
    DEAD_LETTER_SCHEMA,
    ENTITY_SCHEMA,
    MENTION_SCHEMA,
    RELATION_SCHEMA,
    DeadLetter,
    Mention,
    Statement,
)
from store import bundles, knowledge_layers, storage
from store.config import BuildConfig
from transforms.ann import BuildAnnIndexes, keys_and_vectors
from transforms.canonicalize import ENTITIES, ENTITY_OF, NAMES, CanonicalizeEntities
from transforms.communities import DetectCommunities
from transforms.delta import ReadKnownVectors
from transforms.embed import EmbedTexts, text_key
from transforms.extract import ACRONYMS, MENTIONS, STATEMENTS, ExtractKnowledge
from transforms.gather import Gather
from transforms.knowledge_surfaces import WriteSurfaces
from transforms.knowledge_update import UpdateKnowledge
from transforms.segments import WriteExtraction, WriteExtractionParts
from transforms.summaries import AggregateRelations
from transforms.tags import BAD, GOOD, typed
from transforms.write import (
    WriteRecords,
    WriteTable,
    WriteTables,
    records_table,
    vector_rows_table,
)

EXTRACT_STAGE = "extract"
KNOWLEDGE_COUNTER = "knowledge_texts_embedded"


def _embeddable(relation: Any, min_confidence: float) -> bool:
    return relation.category != COOCCURRENCE and relation.confidence >= min_confidence


def _vector_rows(gathered: dict[str, list[Any]], text: Any, embedded: Any) -> list[tuple[Any, Any]]:
    """Every row with the vector of its text, or ``None`` (not embedded, or its
    embedding failed): the one list a table writer and its index builder share."""
    lookup: dict[str, Any] = {}
    for key, vector in gathered["vectors"]:
        lookup.setdefault(key, vector)
    return [
        (row, lookup.get(text_key(text(row))) if embedded(row) else None)
        for row in gathered["rows"]
    ]


def _with_vectors(
    label: str, rows: beam.PCollection, vectors: beam.PCollection, text: Any, embedded: Any
) -> Any:
    """One list of ``(row, vector or None)``: rows and vectors are gathered once and
    matched by text in memory (the vectors are ~35k on SciFact), not joined by a
    ``CoGroupByKey`` per text and gathered again for the writer."""
    return (
        {"rows": rows, "vectors": vectors}
        | f"Gather{label}Vectors" >> Gather(always=True)
        | f"Attach{label}Vectors" >> beam.Map(_vector_rows, text, embedded)
    )


EMBED_STAGE = "embed_knowledge"


@dataclass(frozen=True)
class IncrementalParent:
    """What an incremental knowledge update needs of the parent generation."""

    path: str
    """The parent's bundle directory (its knowledge tables and HNSW files)."""
    segments: list[str]
    """Directories of the parent's segments (their statements and chunks)."""
    changed_since: float
    """The parent's share of entities changed since its communities were clustered."""
    unchanged: beam.PCollection
    """The refresh's unchanged document ids, in batches (lists)."""


def _failure(item: tuple[str, tuple[str, str]]) -> DeadLetter:
    key, (error_type, message) = item
    return DeadLetter(EMBED_STAGE, key, error_type, message)


def assemble_knowledge(
    chunks: beam.PCollection,
    *,
    config: BuildConfig,
    model_path: str,
    dimension: int,
    staging: str,
    parent_path: str | None = None,
    spacy_processes: int = 1,
    kept: dict[str, beam.PCollection] | None = None,
    kept_in_segment: bool = False,
    update: IncrementalParent | None = None,
    parts: int = 1,
) -> None:
    """Add the knowledge layer over ``chunks`` (the chunks of the new segment) and the
    ``kept`` extraction of every other live chunk (see :class:`transforms.segments.
    ReadExtraction`); the new chunks' extraction is written into the segment, and the kept
    extraction too when ``kept_in_segment`` (compaction: the kept rows move into the one
    new segment). With ``parts`` > 1 (a batch build writing several segments), each
    part's extraction goes into its own folder (``parts/<k>``).

    With ``update`` (a refresh whose parent generation has a knowledge layer built with
    the same settings), the parent's knowledge tables are updated with what changed
    instead (:mod:`transforms.knowledge_update`); ``kept`` is then unused.

    ``spacy_processes`` is how many parsers each worker runs (itself included);
    it changes speed, never the output.
    """
    knowledge, join = config.knowledge, storage.join
    pipeline = chunks.pipeline
    extracted = chunks | "ExtractKnowledge" >> ExtractKnowledge(
        pipeline=config.spacy_pipeline,
        batch_size=knowledge.spacy_batch_size,
        processes=spacy_processes,
    )
    rows = {name: extracted[name] for name in (MENTIONS, STATEMENTS, ACRONYMS)}
    if update is not None:
        _ = rows | "WriteSegmentExtraction" >> WriteExtraction(staging)
        _assemble_update(
            rows,
            extracted[BAD],
            update,
            config=config,
            model_path=model_path,
            dimension=dimension,
            staging=staging,
        )
        return
    write_extraction = (
        WriteExtractionParts(staging, parts) if parts > 1 else WriteExtraction(staging)
    )
    if not kept_in_segment:
        _ = rows | "WriteSegmentExtraction" >> write_extraction
    if kept is not None:
        rows = {
            name: (rows[name], kept[name]) | f"WithKept{name.title()}" >> beam.Flatten()
            for name in rows
        }
        rows[MENTIONS] = typed(rows[MENTIONS], list[Mention])
        rows[STATEMENTS] = typed(rows[STATEMENTS], list[Statement])
    if kept_in_segment:
        _ = rows | "WriteSegmentExtraction" >> write_extraction
    canon = {
        "mentions": rows[MENTIONS],
        "acronyms": rows[ACRONYMS],
    } | "CanonicalizeEntities" >> CanonicalizeEntities(model=model_path, config=knowledge)
    relations = {
        "statements": rows[STATEMENTS],
        "entity_of": canon[ENTITY_OF],
    } | "AggregateRelations" >> AggregateRelations()
    communities = {
        "relations": relations,
        "names": canon[NAMES],
    } | "DetectCommunities" >> DetectCommunities(config=knowledge, seed=config.seed)

    known = None
    if parent_path and knowledge_layers.has_table(parent_path, bundles.RELATIONS):
        # A text's vector is the same wherever it was read: a layered table's base and
        # delta both give vectors to reuse (its removed-ids file holds none).
        known = [
            pipeline
            | f"Known{name}{i}" >> ReadKnownVectors(join(parent_path, filename), text_column=column)
            for name, table, column in (
                ("Relations", bundles.RELATIONS, "summary"),
                ("Communities", bundles.COMMUNITIES, "report"),
            )
            for i, filename in enumerate(knowledge_layers.table_files(table)[:3])
            if storage.exists(join(parent_path, filename))
        ] | "KnownVectors" >> beam.Flatten()
    floor = knowledge.summary_floor
    reports = knowledge.surface_vectors
    typed_relations = relations | "TypedRelations" >> beam.Filter(_embeddable, floor)
    texts = (
        typed_relations | "RelationTexts" >> beam.Map(lambda r: r.summary),
        communities
        | "CommunityTexts" >> beam.Map(lambda c: c.report)
        | "ReportsWanted" >> beam.Filter(lambda _, wanted: wanted, reports),
    ) | "KnowledgeTexts" >> beam.Flatten()
    vectors = texts | "EmbedKnowledge" >> EmbedTexts(
        model=model_path,
        batch_size=config.embed.batch_size,
        batch_chars=config.embed.batch_chars,
        known=known,
        counter=KNOWLEDGE_COUNTER,
    )
    relation_rows = _with_vectors(
        "Relations",
        relations,
        vectors[GOOD],
        lambda r: r.summary,
        lambda r: _embeddable(r, floor),
    )
    community_rows = _with_vectors(
        "Communities", communities, vectors[GOOD], lambda c: c.report, lambda c: reports
    )

    _ = canon[MENTIONS] | "WriteMentions" >> WriteRecords(
        join(staging, bundles.MENTIONS), schema=MENTION_SCHEMA, sort_column="mention_id"
    )
    _ = canon[ENTITIES] | "WriteEntities" >> WriteRecords(
        join(staging, bundles.ENTITIES), schema=ENTITY_SCHEMA, sort_column="entity_id"
    )
    id_vectors: dict[str, beam.PCollection] = {}
    index_paths: dict[str, str] = {}
    for label, rows, filename, index, schema, row_id in (
        (
            "Relations",
            relation_rows,
            bundles.RELATIONS,
            bundles.RELATION_INDEX,
            RELATION_SCHEMA,
            lambda r: r.relation_id,
        ),
        (
            "Communities",
            community_rows,
            bundles.COMMUNITIES,
            bundles.COMMUNITY_INDEX,
            COMMUNITY_SCHEMA,
            lambda c: c.community_id,
        ),
    ):
        # One gathering of the rows (with their vectors) feeds the table and its index.
        _ = rows | f"Write{label}" >> WriteTable(
            join(staging, filename),
            to_table=lambda pairs, schema=schema, row_id=row_id: vector_rows_table(
                pairs, schema, dimension, row_id=row_id
            ),
            sort_key=lambda pair, row_id=row_id: row_id(pair[0]),
            collected=True,
        )
        id_vectors[label] = rows | f"{label}IdVectors" >> beam.Map(
            lambda pairs, row_id=row_id: keys_and_vectors(
                [(row_id(record), vector) for record, vector in pairs if vector is not None],
                dimension,
            )
        )
        index_paths[label] = join(staging, index)
    # Both HNSW files in one step, side by side: each is built on one thread (reproducible
    # files), and the two threads use both cores (24 s one after the other on SciFact).
    _ = id_vectors | "BuildKnowledgeIndexes" >> BuildAnnIndexes(
        index_paths, dimension=dimension, config=config.ann
    )
    failures = {
        EXTRACT_STAGE: extracted[BAD],
        EMBED_STAGE: vectors[BAD] | "KnowledgeEmbedFailures" >> beam.Map(_failure),
    }
    _ = failures | "WriteKnowledgeFailures" >> WriteTables(
        {stage: join(staging, bundles.FAILURES_DIR, f"{stage}.parquet") for stage in failures},
        to_table=lambda rows: records_table(rows, DEAD_LETTER_SCHEMA),
        sort_key=lambda d: (d.record_id, d.error_type, d.message),
    )


def _assemble_update(
    rows: dict[str, beam.PCollection],
    extract_failures: beam.PCollection,
    parent: IncrementalParent,
    *,
    config: BuildConfig,
    model_path: str,
    dimension: int,
    staging: str,
) -> None:
    """The knowledge layer of a refresh: the parent's tables updated with the new
    segment's extraction and the refresh's deletions."""
    knowledge = config.knowledge
    update = {**rows, "unchanged": parent.unchanged} | "UpdateKnowledge" >> UpdateKnowledge(
        parent=parent.path,
        segments=parent.segments,
        staging=staging,
        model=model_path,
        config=knowledge,
        changed_since=parent.changed_since,
        seed=config.seed,
    )
    vectors = update["texts"] | "EmbedKnowledge" >> EmbedTexts(
        model=model_path,
        batch_size=config.embed.batch_size,
        batch_chars=config.embed.batch_chars,
        counter=KNOWLEDGE_COUNTER,
    )
    _ = {"update": update["update"], "vectors": vectors[GOOD]} | "WriteSurfaces" >> WriteSurfaces(
        parent=parent.path,
        staging=staging,
        dimension=dimension,
        floor=knowledge.summary_floor,
        ann=config.ann,
        fold_share=knowledge.fold_share,
    )
    failures = {
        EXTRACT_STAGE: extract_failures,
        EMBED_STAGE: vectors[BAD] | "KnowledgeEmbedFailures" >> beam.Map(_failure),
    }
    _ = failures | "WriteKnowledgeFailures" >> WriteTables(
        {
            stage: storage.join(staging, bundles.FAILURES_DIR, f"{stage}.parquet")
            for stage in failures
        },
        to_table=lambda rows: records_table(rows, DEAD_LETTER_SCHEMA),
        sort_key=lambda d: (d.record_id, d.error_type, d.message),
    )
