import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.experiments.embed_batches import sample


def test_sample_is_distinct_non_empty_and_seeded(tmp_path):
    path = str(tmp_path / "t.parquet")
    values = ["a", "b", "b", None, "", "c", "d", "e"]
    pq.write_table(pa.table({"text": values}), path)
    picked = sample(path, "text", 3)
    assert len(picked) == 3 and len(set(picked)) == 3
    assert set(picked) <= {"a", "b", "c", "d", "e"}
    assert sample(path, "text", 3) == picked
    assert sorted(sample(path, "text", 99)) == ["a", "b", "c", "d", "e"]
