import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from schemas import (
    CHUNK_SCHEMA,
    DEAD_LETTER_SCHEMA,
    DOCUMENT_SCHEMA,
    Chunk,
    DeadLetter,
    Document,
    EmbeddedChunk,
    ann_key,
    chunk_id,
    chunk_table_schema,
    normalize_text,
    register_coders,
    revision_of,
)
from transforms.write import records_table


def test_every_record_has_a_schema_with_the_same_fields_in_order():
    for record, schema in (
        (Document, DOCUMENT_SCHEMA),
        (Chunk, CHUNK_SCHEMA),
        (DeadLetter, DEAD_LETTER_SCHEMA),
    ):
        assert list(record._fields) == schema.names


def test_chunk_table_schema_extends_chunk_schema_with_key_and_vector():
    schema = chunk_table_schema(384)
    assert schema.names == [*CHUNK_SCHEMA.names, "ann_key", "embedding"]
    assert schema.field("embedding").type == pa.list_(pa.float32(), 384)
    nullable = {f.name for f in schema if f.nullable}
    assert nullable == {"page_start", "page_end"}  # only pages: most documents have none


def test_ids_are_deterministic_and_content_sensitive():
    assert chunk_id("d", 0, "x") == chunk_id("d", 0, "x")
    assert (
        len(
            {
                chunk_id("d", 0, "x"),
                chunk_id("d", 1, "x"),
                chunk_id("e", 0, "x"),
                chunk_id("d", 0, "y"),
            }
        )
        == 4
    )
    assert ann_key(chunk_id("d", 0, "x")) < 2**64


def test_normalization_unifies_newlines_and_unicode_forms():
    assert normalize_text("a\r\nb\rc") == "a\nb\nc"
    assert normalize_text("e\u0301") == "\u00e9"
    assert revision_of(normalize_text("e\u0301")) == revision_of("\u00e9")


documents = st.builds(
    Document,
    doc_id=st.text(min_size=1, max_size=20),
    revision=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    title=st.text(max_size=30),
    text=st.text(max_size=200),
    source_uri=st.text(max_size=30),
    source_role=st.sampled_from(["policy", "guide"]),
    access_class=st.sampled_from(["public", "internal"]),
    language=st.just("en"),
    metadata_json=st.just("{}"),
)


@given(st.lists(documents, max_size=8))
def test_documents_round_trip_through_parquet(tmp_path_factory, docs):
    path = tmp_path_factory.mktemp("rt") / "d.parquet"
    pq.write_table(records_table(docs, DOCUMENT_SCHEMA), path)
    back = pq.read_table(path)
    assert back.schema == DOCUMENT_SCHEMA
    assert [Document(**row) for row in back.to_pylist()] == docs


@given(documents, st.lists(st.floats(-1, 1, width=32), max_size=8))
def test_records_round_trip_through_beam_row_coder(doc, vector):
    from apache_beam import coders

    register_coders()
    for value, record in (
        (doc, Document),
        (DeadLetter("ingest", doc.doc_id, "empty", "no text"), DeadLetter),
        (
            EmbeddedChunk(Chunk("c", doc.doc_id, doc.revision, 0, 0, 1, "x", 1, "public"), vector),
            EmbeddedChunk,
        ),
    ):
        coder = coders.registry.get_coder(record)
        assert isinstance(coder, coders.RowCoder)
        assert coder.decode(coder.encode(value)) == value
