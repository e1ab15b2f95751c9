from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from usearch.index import Index

from schemas import (
    DEAD_LETTER_SCHEMA,
    MENTION_SCHEMA,
    Chunk,
    DeadLetter,
    EmbeddedChunk,
    Mention,
    ann_key,
    chunk_id,
    register_coders,
)
from store.config import AnnConfig
from transforms.ann import (
    AnnKeyCollisionError,
    BuildAnnIndex,
    BuildAnnIndexes,
    BuildAnnPartitions,
    build_index,
    keys_and_vectors,
)
from transforms.write import (
    WriteRecords,
    WriteTable,
    WriteTables,
    chunk_rows_table,
    records_table,
    vector_rows_table,
    write_rows,
)


def _embedded(n: int, dim: int = 16, seed: int = 3) -> list[EmbeddedChunk]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for i in range(n):
        text = f"chunk {i}"
        cid = chunk_id("doc", i, text)
        out.append(
            EmbeddedChunk(
                Chunk(cid, "doc", "r", i, 0, len(text), text, 2, "public"), vectors[i].tolist()
            )
        )
    return out


def test_write_tables_writes_every_table_in_one_step_empty_ones_too(tmp_path):
    def dead(record_id: str) -> DeadLetter:
        return DeadLetter(stage="ingest", record_id=record_id, error_type="ValueError", message="x")

    paths = {name: str(tmp_path / f"{name}.parquet") for name in ("ingest", "chunk")}
    with TestPipeline() as p:
        inputs = {
            "ingest": p | "Ingest" >> beam.Create([dead("b"), dead("a")]),
            "chunk": p | "Chunk" >> beam.Create([]),
        }
        written = inputs | WriteTables(
            paths,
            to_table=lambda rows: records_table(rows, DEAD_LETTER_SCHEMA),
            sort_key=lambda d: d.record_id,
        )
        assert_that(written, equal_to([(paths["ingest"], 2), (paths["chunk"], 0)]))
    assert pq.read_table(paths["ingest"]).column("record_id").to_pylist() == ["a", "b"]
    assert pq.read_table(paths["chunk"]).num_rows == 0
    with pytest.raises(ValueError, match="wants"):
        WriteTables(paths, to_table=list, sort_key=str).expand({"ingest": None})


def test_write_table_sorts_rows_so_bytes_do_not_depend_on_arrival_order(tmp_path):
    register_coders()
    rows = _embedded(30)
    paths = []
    for name, order in (("a", rows), ("b", rows[::-1])):
        path = str(tmp_path / f"{name}.parquet")
        with TestPipeline() as p:
            _ = (
                p
                | beam.Create(order)
                | WriteTable(
                    path,
                    to_table=lambda r: chunk_rows_table(r, 16),
                    sort_key=lambda e: e.chunk.chunk_id,
                )
            )
        paths.append(path)
    a, b = (Path(x).read_bytes() for x in paths)
    assert a == b
    table = pq.read_table(paths[0])
    assert table.num_rows == 30
    assert table.column("chunk_id").to_pylist() == sorted(e.chunk.chunk_id for e in rows)
    assert table.column("ann_key").to_pylist() == [
        ann_key(c) for c in table["chunk_id"].to_pylist()
    ]


def test_records_gathered_as_arrow_make_the_file_the_records_make(tmp_path):
    rows = [
        Mention(f"m{i:04d}", f"c{i % 7}", "d", i, i + 3, f"Name {i}", "ORG", f"name {i}", "e")
        for i in range(2_000)
    ]
    expected = str(tmp_path / "expected.parquet")
    write_rows(
        expected,
        rows,
        to_table=lambda r: records_table(r, MENTION_SCHEMA),
        sort_key=lambda m: m.mention_id,
    )
    paths = {name: str(tmp_path / f"{name}.parquet") for name in ("forward", "backward", "none")}
    with TestPipeline() as p:
        for name, order in (("forward", rows), ("backward", rows[::-1]), ("none", [])):
            _ = (
                p
                | f"Create{name}" >> beam.Create(order)
                | f"Write{name}"
                >> WriteRecords(
                    paths[name], schema=MENTION_SCHEMA, sort_column="mention_id", batch_size=300
                )
            )
    assert Path(paths["forward"]).read_bytes() == Path(expected).read_bytes()
    assert Path(paths["backward"]).read_bytes() == Path(expected).read_bytes()
    empty = pq.read_table(paths["none"])
    assert empty.num_rows == 0 and empty.schema.equals(MENTION_SCHEMA)
    with pytest.raises(ValueError, match="not in the schema"):
        WriteRecords(paths["none"], schema=MENTION_SCHEMA, sort_column="id")


def test_vector_rows_keep_each_vector_exactly_and_missing_ones_null():
    ids = [chunk_id("doc", i, f"row {i}") for i in range(4)]
    rows = [DeadLetter("embed", rid, "", "") for rid in ids]
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((4, 3)).astype(np.float32)
    given = [vectors[0], None, vectors[2].tolist(), vectors[3]]  # arrays or lists
    table = vector_rows_table(
        list(zip(rows, given, strict=True)), DEAD_LETTER_SCHEMA, 3, row_id=lambda d: d.record_id
    )
    column = table.column("embedding").to_pylist()
    assert column[1] is None
    for i in (0, 2, 3):
        np.testing.assert_array_equal(np.asarray(column[i], dtype=np.float32), vectors[i])
    assert table.column("ann_key").to_pylist() == [ann_key(rid) for rid in ids]
    with pytest.raises(ValueError, match="want 3"):
        vector_rows_table(
            [(rows[0], [1.0, 2.0])], DEAD_LETTER_SCHEMA, 3, row_id=lambda d: d.record_id
        )


def test_hnsw_recall_against_exact_search():
    embedded = _embedded(1500, dim=32)
    keys, vectors = keys_and_vectors(embedded, 32)
    index = build_index(keys, vectors, config=AnnConfig())
    queries = vectors[:100]
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    found = index.search(queries, 10).keys
    recall = np.mean([len(set(keys[e]) & set(f)) / 10 for e, f in zip(exact, found, strict=True)])
    assert recall >= 0.95


def test_key_collisions_fail_loudly():
    a, b = _embedded(2)
    clash = EmbeddedChunk(b.chunk._replace(chunk_id=a.chunk.chunk_id[:16] + "f" * 48), b.embedding)
    with pytest.raises(AnnKeyCollisionError):
        keys_and_vectors([a, clash], 16)


def test_build_ann_index_transform_writes_a_mappable_file(tmp_path):
    register_coders()
    embedded = _embedded(50)
    path = str(tmp_path / "chunks.usearch")
    with TestPipeline() as p:
        _ = p | beam.Create(embedded) | BuildAnnIndex(path, dimension=16, config=AnnConfig())
    index = Index.restore(path, view=True)
    assert len(index) == 50 and index.ndim == 16
    top = index.search(np.asarray(embedded[7].embedding, dtype=np.float32), 1)
    assert int(top.keys[0]) == ann_key(embedded[7].chunk.chunk_id)


def test_indexes_built_side_by_side_equal_those_built_one_at_a_time(tmp_path):
    register_coders()
    relations = [(e.chunk.chunk_id, e.embedding) for e in _embedded(40, seed=5)]
    communities = [(e.chunk.chunk_id, e.embedding) for e in _embedded(25, seed=6)]
    paths = {name: str(tmp_path / f"{name}.usearch") for name in ("relations", "communities")}
    alone = {name: str(tmp_path / f"{name}-alone.usearch") for name in paths}
    with TestPipeline() as p:
        surfaces = {
            name: p | f"Create{name}" >> beam.Create([keys_and_vectors(rows, 16)])
            for name, rows in (("relations", relations), ("communities", communities))
        }
        written = surfaces | BuildAnnIndexes(paths, dimension=16, config=AnnConfig())
        assert_that(written, equal_to([(paths["relations"], 40), (paths["communities"], 25)]))
        for name, rows in (("relations", relations), ("communities", communities)):
            _ = (
                p
                | f"Alone{name}" >> beam.Create(rows)
                | f"Build{name}" >> BuildAnnIndex(alone[name], dimension=16, config=AnnConfig())
            )
    for name in paths:
        assert Path(paths[name]).read_bytes() == Path(alone[name]).read_bytes()
    index = Index.restore(paths["communities"], view=True)
    top = index.search(np.asarray(communities[3][1], dtype=np.float32), 1)
    assert int(top.keys[0]) == ann_key(communities[3][0])


def test_a_surface_without_rows_gets_an_empty_index(tmp_path):
    paths = {name: str(tmp_path / f"{name}.usearch") for name in ("relations", "communities")}
    rows = [(e.chunk.chunk_id, e.embedding) for e in _embedded(10)]
    with TestPipeline() as p:
        surfaces = {
            "relations": p | "Some" >> beam.Create([keys_and_vectors(rows, 16)]),
            "communities": p | "None" >> beam.Create([]),
        }
        _ = surfaces | BuildAnnIndexes(paths, dimension=16, config=AnnConfig())
    assert len(Index.restore(paths["relations"], view=True)) == 10
    assert len(Index.restore(paths["communities"], view=True)) == 0


def test_indexes_need_their_inputs_to_match_their_paths(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        BuildAnnIndexes({}, dimension=16, config=AnnConfig())
    build = BuildAnnIndexes({"a": str(tmp_path / "a")}, dimension=16, config=AnnConfig())
    with pytest.raises(ValueError, match="do not match"), TestPipeline() as p:
        _ = {"b": p | beam.Create([1])} | build


def _with_classes(embedded: list[EmbeddedChunk], classes: list[str]) -> list[EmbeddedChunk]:
    return [
        e._replace(chunk=e.chunk._replace(access_class=classes[i % len(classes)]))
        for i, e in enumerate(embedded)
    ]


def test_partitions_are_built_per_large_class_and_only_with_several_classes(tmp_path):
    register_coders()
    mixed = _with_classes(_embedded(60), ["public", "public", "internal", "confidential"])
    # 30 public, 15 internal, 15 confidential; partitions only above 20 rows
    out = tmp_path / "mixed"
    out.mkdir()
    with TestPipeline() as p:
        _ = (
            p
            | beam.Create(mixed)
            | BuildAnnPartitions(str(out), dimension=16, config=AnnConfig(partition_min_rows=20))
        )
    assert sorted(f.name for f in out.iterdir()) == ["chunks.public.usearch"]
    index = Index.restore(str(out / "chunks.public.usearch"), view=True)
    public = [e for e in mixed if e.chunk.access_class == "public"]
    assert sorted(int(k) for k in index.keys) == sorted(ann_key(e.chunk.chunk_id) for e in public)

    single = tmp_path / "single"
    single.mkdir()
    with TestPipeline() as p:
        _ = (
            p
            | beam.Create(_embedded(60))
            | BuildAnnPartitions(str(single), dimension=16, config=AnnConfig(partition_min_rows=1))
        )
    assert list(single.iterdir()) == []  # one class: the main index serves every caller
