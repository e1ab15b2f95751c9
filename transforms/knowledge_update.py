"""Incremental knowledge: a refresh updates the parent generation's knowledge tables
with what changed, instead of recomputing them over every live chunk.

- *Entities*: the new chunks' mentions are linked to the existing entities by the unit
  rules of the full canonicalization (:func:`algorithms.canonicalize.link_mentions`);
  the rest become new entities. Entities that lost or gained mentions get their counts
  and aliases updated by that change, and their chunks as a change against their base
  row (:func:`transforms.knowledge_parent.changed_entities`); their id and name stay.
  Entities left without a live mention are removed.
- *Relations*: only the touched relation keys (a statement in a changed or removed
  document, or a new statement) are aggregated again, from their live statements; the
  others stay as they are.
- *Communities*: kept, cut to what is still live
  (:func:`transforms.community_cut.cut_communities`), until the share of entities whose
  edges changed since they were clustered passes ``KnowledgeConfig.recluster_share``;
  then Louvain runs over every live relation.
- *Vectors and HNSW files*: only texts the parent has no vector for are embedded
  (:mod:`transforms.knowledge_surfaces` writes them and updates the parent's HNSW files).

The parent's tables are read with pyarrow inside one step, and looked up
(:mod:`store.knowledge_rows`: through indexes of the parent's base where the process
keeps what it reads, a stream): a window touches a few hundred rows of tables with
millions, and neither moving every row through Beam nor passing over it is worth it.
"""

import json
import logging
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils.shared import Shared

from algorithms.canonicalize import (
    MentionRef,
    link_mentions,
)
from algorithms.communities import detect_communities
from algorithms.normalize import normalize_surface, squashed
from algorithms.summaries import aggregate_relations, relation_id, relation_key
from schemas import (
    COMMUNITY_SCHEMA,
    ENTITY_SCHEMA,
    MENTION_SCHEMA,
    Mention,
    Relation,
    Statement,
)
from store import bundles, knowledge_layers, storage
from store.config import AnnConfig, KnowledgeConfig
from store.knowledge_rows import KnowledgeRows
from store.row_index import file_rows
from store.segments import EXTRACTED_STATEMENTS
from transforms.canonicalize import NameEncoder
from transforms.community_cut import cut_communities
from transforms.embed import text_key
from transforms.gather import Gather, batched_rows
from transforms.knowledge_parent import (
    LiveIds,
    Names,
    changed_entities,
    dropped_documents,
    known_units,
    replaced,
    unchanged_documents,
    without,
)
from transforms.knowledge_surfaces import (
    KnowledgeUpdate,
    WriteSurfaces,
    embeddable,
    embedded,
    read_table,
    write_table,
)
from transforms.write import (
    records_table,
)

logger = logging.getLogger(__name__)

KNOWLEDGE_STATE = ".knowledge_state.json"  # staging only: the launcher reads and removes it


def _with_alias_norms(entities: pa.Table) -> pa.Table:
    """``entities`` with its ``alias_norms`` column, computed (each distinct alias
    normalized once) when a parent written before that column lacks it."""
    if "alias_norms" in entities.column_names:
        return entities
    aliases = entities["aliases"].combine_chunks()
    encoded = pc.list_flatten(aliases).dictionary_encode()
    norms = pa.array([normalize_surface(a) for a in encoded.dictionary.to_pylist()], pa.string())
    offsets = pc.subtract(aliases.offsets, aliases.offsets[0])  # a sliced column's
    column = pa.ListArray.from_arrays(offsets, norms.take(encoded.indices))
    return entities.append_column("alias_norms", column)


def _rows(table: pa.Table, row_type: Any) -> list[Any]:
    return [row_type(**r) for r in table.to_pylist()]


def _ref(m: Mention) -> MentionRef:
    return MentionRef(m.mention_id, m.text, m.label, m.norm, m.chunk_id)


class _UpdateFn(beam.DoFn):
    """Gathered ``{mentions, statements, acronyms, unchanged}`` -> one ``KnowledgeUpdate``
    (writes mentions and entities into ``staging``) and, tagged ``texts``, every
    summary and report text the parent has no vector for."""

    def __init__(
        self,
        *,
        parent: str,
        segments: Sequence[str],
        staging: str,
        model: str,
        config: KnowledgeConfig,
        changed_since: float,
        seed: int,
    ) -> None:
        self._parent = parent
        self._segments = list(segments)
        self._staging = staging
        self._model = model
        self._config = config
        self._changed_since = changed_since
        self._seed = seed
        self._shared = Shared()
        self._holder: NameEncoder | None = None

    def _embed(self, names: list[str]) -> np.ndarray:
        # Loaded on first use: most refreshes link every new name by its unit or form
        # and never compare spelling variants.
        if self._holder is None:
            self._holder = self._shared.acquire(lambda: NameEncoder(self._model))
        return self._holder.embed(names)

    def process(self, gathered: dict[str, list[Any]]) -> Iterator[Any]:
        # The mention and entity tables are written on a second thread while the update
        # goes on (Parquet encoding releases the GIL); both are on disk before it yields.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge-write") as pool:
            yield from self._update(gathered, pool)

    def _update(self, gathered: dict[str, list[Any]], pool: ThreadPoolExecutor) -> Iterator[Any]:
        config, join = self._config, storage.join
        writes: list[Future[None]] = []
        new_mentions: list[Mention] = batched_rows(gathered["mentions"])
        new_statements: list[Statement] = batched_rows(gathered["statements"])
        acronyms = sorted((row[-2], row[-1]) for row in batched_rows(gathered["acronyms"]))

        # Mentions: the parent's of unchanged documents stay; the new ones are linked.
        # The parent's rows are looked up by document, form, id: never passed over.
        parent_mentions = KnowledgeRows(self._parent, bundles.MENTIONS)
        dropped = dropped_documents(gathered, [parent_mentions])
        gone_mentions = parent_mentions.where("doc_id", dropped)
        # Linking consults only the units whose squashed form a new mention has (its own
        # unit, or one the unit rules join it to): those are the units read into Python.
        forms = {squashed(m.norm) for m in new_mentions}
        known = known_units(parent_mentions, forms, gone_mentions)
        parent_entities = KnowledgeRows(self._parent, bundles.ENTITIES)
        refs = [_ref(m) for m in new_mentions]
        linked = link_mentions(
            known,
            refs,
            acronyms,
            embed=self._embed,
            similarity=config.merge_similarity,
            max_block=config.max_block_size,
            entity_ids=LiveIds(parent_entities),
        )
        new_mentions = [m._replace(entity_id=linked.assignment[m.mention_id]) for m in new_mentions]
        added_mentions = records_table(new_mentions, MENTION_SCHEMA)
        gone_ids = gone_mentions["mention_id"].to_pylist()
        writes.append(
            pool.submit(
                self._write_change,
                bundles.MENTIONS,
                added_mentions,
                gone_ids,
                lambda: replaced(parent_mentions, gone_ids, added_mentions, MENTION_SCHEMA),
            )
        )

        # Entities: touched ones updated by the mentions they gained and lost, empty
        # ones removed.
        new_ids = {e.entity_id for e in linked.entities}
        gained: dict[str, list[MentionRef]] = defaultdict(list)
        for m in new_mentions:
            if m.entity_id not in new_ids:
                gained[m.entity_id].append(_ref(m))
        lost: dict[str, list[MentionRef]] = defaultdict(list)
        for m in _rows(gone_mentions, Mention):
            lost[m.entity_id].append(_ref(m))
        touched = set(gained) | set(lost)
        refreshed = changed_entities(parent_entities, touched, gained, lost, _with_alias_norms)
        removed_entities = touched - set(refreshed["entity_id"].to_pylist())
        added_entities = pa.concat_tables(
            [refreshed, records_table(linked.entities, ENTITY_SCHEMA)],
            promote_options="permissive",
        )
        entity_count = parent_entities.count() - len(removed_entities) + len(linked.entities)

        def entities_now() -> pa.Table:  # every row: to write it whole, cut or recluster
            whole_rows = knowledge_layers.absolute(
                _with_alias_norms(parent_entities.base),
                added_entities,
                "entity_id",
                knowledge_layers.RELATIVE_LISTS[bundles.ENTITIES],
            )
            return replaced(parent_entities, touched, whole_rows, ENTITY_SCHEMA, _with_alias_norms)

        writes.append(
            pool.submit(
                self._write_change,
                bundles.ENTITIES,
                added_entities,
                sorted(removed_entities),
                entities_now,
            )
        )
        names = Names(parent_entities, added_entities, removed_entities)

        # Relations: the touched keys are aggregated again from their live statements.
        parent_relations = KnowledgeRows(self._parent, bundles.RELATIONS)
        by_deletion = parent_relations.where("sentence_doc_ids", dropped)["relation_id"]
        new_keys = {relation_key(s, linked.assignment) for s in new_statements} - {None}
        touched_relations = set(by_deletion.to_pylist()) | {
            relation_id(key) for key in new_keys if key
        }
        touched_rows = parent_relations.with_ids(touched_relations)
        wanted_chunks = set(pc.list_flatten(touched_rows["chunk_ids"]).to_pylist())
        kept_statements: list[Statement] = []
        for segment in self._segments:
            path = join(segment, EXTRACTED_STATEMENTS)
            table = knowledge_layers.read_file(path)
            rows = file_rows(path, table, "chunk_id", sorted(wanted_chunks))
            table = without(table.take(pa.array(rows, type=pa.int64())), "doc_id", dropped)
            kept_statements.extend(_rows(table, Statement))
        needed = {s.subject_mention_id for s in kept_statements} | {
            s.object_mention_id for s in kept_statements if s.object_mention_id
        }
        needed_rows = parent_mentions.with_ids(needed)
        assignment = dict(
            zip(
                needed_rows["mention_id"].to_pylist(),
                needed_rows["entity_id"].to_pylist(),
                strict=True,
            )
        )
        assignment.update(linked.assignment)
        names.prefetch(set(assignment.values()))
        relations = [
            r
            for r in aggregate_relations([*kept_statements, *new_statements], assignment, names)
            if r.relation_id in touched_relations
        ]
        removed_relations = sorted(set(touched_rows["relation_id"].to_pylist()))

        # Communities: kept until enough of the entity graph changed since clustering.
        edges_changed = set(new_ids) | removed_entities
        for row in touched_rows.select(["subject_id", "object_id"]).to_pylist():
            if row["object_id"] is not None:
                edges_changed |= {row["subject_id"], row["object_id"]}
        for r in relations:
            if r.object_id is not None:
                edges_changed |= {r.subject_id, r.object_id}
        share = self._changed_since + len(edges_changed) / max(1, entity_count)
        reclustered = share >= config.recluster_share
        recomputed = {r.relation_id for r in relations}
        if reclustered:
            entities = entities_now()
            communities: pa.Table | None = self._clustered(
                parent_relations.folded(),
                removed_relations,
                relations,
                dict(
                    zip(
                        entities["entity_id"].to_pylist(),
                        entities["name"].to_pylist(),
                        strict=True,
                    )
                ),
            )
            share = 0.0
        elif gone_mentions.num_rows or removed_entities or set(removed_relations) - recomputed:
            communities = self._cut(
                parent_relations.folded(),
                removed_relations,
                relations,
                entities_now(),
                unchanged_documents(gathered),
            )
        else:
            # Nothing a community names is gone (every chunk, relation and member it
            # names has a mention, and no mention went): the parent's stay as they are.
            communities = None
        logger.info(
            "knowledge update: %d new mentions (%d new entities, %d entities touched, "
            "%d removed); %d relations recomputed, %d removed; %s communities %s "
            "(%.1f%% of entities changed since clustering)",
            len(new_mentions),
            len(new_ids),
            len(refreshed),
            len(removed_entities),
            len(relations),
            len(set(removed_relations) - recomputed),
            "all" if communities is None else communities.num_rows,
            "clustered again" if reclustered else "kept",
            100 * share,
        )
        for write in writes:
            write.result()  # a failed write fails the update here
        with FileSystems.create(join(self._staging, KNOWLEDGE_STATE)) as handle:
            handle.write(json.dumps({"reclustered": reclustered, "share": share}).encode())
        yield KnowledgeUpdate(removed_relations, relations, communities, reclustered)

        floor = config.summary_floor
        summaries = {r.summary for r in relations if embeddable(r, floor)}
        reused = embedded(parent_relations.where("summary", summaries), "summary", summaries)
        reports: set[str] = set()
        if config.surface_vectors and communities is not None:
            # Kept communities keep their reports, whose vectors the parent holds.
            reports = set(communities["report"].to_pylist())
            reused |= embedded(
                read_table(self._parent, bundles.COMMUNITIES, ["report", "embedding"]),
                "report",
                reports,
            )
        for text in sorted((summaries | reports) - reused):
            yield beam.pvalue.TaggedOutput("texts", text)

    def _write_change(self, name: str, upserts: pa.Table, removed: list[str], whole: Any) -> None:
        """Table ``name`` of the new generation: the parent's base and the delta since it,
        or the table ``whole()`` once the delta is too large (:mod:`store.knowledge_layers`)."""
        knowledge_layers.write_change(
            self._staging,
            name,
            self._parent,
            upserts=upserts,
            removed=removed,
            whole=whole,
            write=write_table,
            fold_share=self._config.fold_share,
        )

    def _clustered(
        self,
        parent_relations: pa.Table,
        removed_relations: list[str],
        relations: list[Relation],
        names: dict[str, str],
    ) -> pa.Table:
        """Louvain over every live relation: the parent's less the removed, plus the
        recomputed."""
        removed = pa.array(removed_relations, type=pa.string())
        everything = parent_relations.drop_columns(["ann_key", "embedding"]).filter(
            pc.invert(pc.is_in(parent_relations["relation_id"], value_set=removed))
        )
        all_relations = sorted(
            [*_rows(everything, Relation), *relations], key=lambda r: r.relation_id
        )
        return records_table(
            detect_communities(all_relations, names, config=self._config, seed=self._seed),
            COMMUNITY_SCHEMA,
        )

    def _cut(
        self,
        parent_relations: pa.Table,
        removed_relations: list[str],
        relations: list[Relation],
        entities: pa.Table,
        unchanged: pa.Array,
    ) -> pa.Table:
        """The parent's communities cut to the live entities, relations and chunks."""
        parent_ids = parent_relations["relation_id"].combine_chunks()
        removed = pa.array(removed_relations, type=pa.string())
        live_relation_ids = pa.concat_arrays(
            [
                pc.filter(parent_ids, pc.invert(pc.is_in(parent_ids, value_set=removed))),
                pa.array([r.relation_id for r in relations], type=pa.string()),
            ]
        )
        parent = read_table(self._parent, bundles.COMMUNITIES)
        return cut_communities(
            parent.drop_columns(["ann_key", "embedding"]).cast(COMMUNITY_SCHEMA),
            entity_ids=entities["entity_id"].combine_chunks(),
            relation_ids=live_relation_ids,
            chunk_ids=self._live_chunks(unchanged),
            config=self._config,
        )

    def _live_chunks(self, unchanged: pa.Array) -> pa.Array:
        """Ids of the chunks of the unchanged documents, from every parent segment."""
        live = []
        for segment in self._segments:
            table = knowledge_layers.read_file(
                storage.join(segment, bundles.CHUNKS), ["chunk_id", "doc_id"]
            )
            table = table.filter(pc.is_in(table["doc_id"], value_set=unchanged))
            live.append(table["chunk_id"].combine_chunks())
        return pa.concat_arrays(live) if live else pa.array([], type=pa.string())


class UpdateKnowledge(beam.PTransform):
    """``{mentions, statements, acronyms}`` of the new segment (lists of rows, as
    :class:`transforms.extract.ExtractKnowledge` emits them) and ``unchanged`` (lists of doc ids)
    -> ``{update: one KnowledgeUpdate, texts: PCollection[str] to embed}``; writes the
    mentions and entities tables into ``staging``.

    Args:
        parent: the parent generation's bundle directory (its knowledge tables).
        segments: directories of the parent's segments (their statements and chunks).
        changed_since: the parent's share of entities changed since its communities.
        seed: Louvain's seed, when communities are clustered again.

    Memory bound: the parent's mention and entity tables on one worker.
    """

    def __init__(
        self,
        *,
        parent: str,
        segments: Sequence[str],
        staging: str,
        model: str,
        config: KnowledgeConfig,
        changed_since: float,
        seed: int,
    ) -> None:
        super().__init__()
        self._fn = _UpdateFn(
            parent=parent,
            segments=segments,
            staging=staging,
            model=model,
            config=config,
            changed_since=changed_since,
            seed=seed,
        )

    def expand(self, inputs: Any) -> Any:
        out = (
            dict(inputs)
            | "GatherChanges" >> Gather(always=True)
            | "Update" >> beam.ParDo(self._fn).with_outputs("texts", main="update")
        )
        return {"update": out["update"], "texts": out["texts"]}


def apply_update(
    rows: Mapping[str, list[Any]],
    unchanged: Collection[str],
    *,
    dropped: Collection[str] | None = None,
    parent: str,
    segments: Sequence[str],
    staging: str,
    model: str,
    config: KnowledgeConfig,
    changed_since: float,
    seed: int,
    dimension: int,
    ann: AnnConfig,
    embed: Any,
) -> int:
    """What :class:`UpdateKnowledge`, the embedding of its texts and
    :class:`WriteSurfaces` do in a refresh, on rows in memory: the stream's committer
    (``pipelines.commit``) updates the parent's knowledge layer with one window's
    extraction without a pipeline of its own.

    Args:
        rows: ``{mentions, statements, acronyms}``, lists of row batches as
            :class:`transforms.extract.ExtractKnowledge` emits them.
        unchanged: ids of the parent's documents that stay live (read only where a
            deletion cuts communities).
        dropped: ids of the parent's documents the window rewrites or deletes (by
            default, every document the parent's mentions or relations name that is not
            ``unchanged``: a pass over those tables).
        embed: ``list[str] -> (n, dimension) array`` of unit vectors (the embedding
            model the refresh's ``EmbedTexts`` would load).

    Returns:
        The number of summary and report texts embedded.
    """
    update_fn = _UpdateFn(
        parent=parent,
        segments=segments,
        staging=staging,
        model=model,
        config=config,
        changed_since=changed_since,
        seed=seed,
    )
    gathered = {name: list(rows[name]) for name in ("mentions", "statements", "acronyms")}
    gathered["unchanged"] = [unchanged]  # type: ignore[list-item]  # one batch, any collection
    if dropped is not None:
        gathered["dropped"] = [sorted(dropped)]
    updates, texts = [], []
    for out in update_fn.process(gathered):
        if isinstance(out, beam.pvalue.TaggedOutput):
            texts.append(out.value)
        else:
            updates.append(out)
    vectors: Any = np.asarray(embed(texts), dtype=np.float32) if texts else []
    keyed = [(text_key(t), v) for t, v in zip(texts, vectors, strict=True)]
    WriteSurfaces(
        parent=parent,
        staging=staging,
        dimension=dimension,
        floor=config.summary_floor,
        ann=ann,
        fold_share=config.fold_share,
    ).write(updates, keyed)
    return len(texts)
