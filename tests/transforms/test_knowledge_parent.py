"""The units a window's new mentions may link to (transforms.knowledge_parent.known_units)
are counted from the parent's base index and delta, where the process keeps what it
reads, exactly as from the parent's rows."""

import os
import random

import pyarrow.parquet as pq
import pytest

from schemas import MENTION_SCHEMA, Mention, stable_id
from store import knowledge_layers, table_cache
from store.knowledge_rows import KnowledgeRows
from transforms.knowledge_parent import known_units
from transforms.write import records_table

NAME = "mentions.parquet"
FORMS = [("upi lite", "PRODUCT"), ("upilite", "ORG"), ("npci", "ORG"), ("npci", "PERSON")]


def _mentions(rng: random.Random, n: int, tag: str) -> list[Mention]:
    rows = []
    for i in range(n):
        norm, label = rng.choice(FORMS)
        rows.append(
            Mention(
                mention_id=stable_id(tag, i),
                chunk_id=f"c{i}",
                doc_id=f"d{rng.randint(0, 5)}",
                start=0,
                end=1,
                text=norm,
                label=label,
                norm=norm,
                entity_id=f"e-{norm}-{rng.randint(0, 2)}",
            )
        )
    return sorted(rows, key=lambda m: m.mention_id)


@pytest.mark.parametrize("seed", range(6))
def test_units_from_the_index_are_the_units_of_the_rows(tmp_path, seed):
    rng = random.Random(seed)
    base = _mentions(rng, 40, "base")
    parent = tmp_path / "parent"
    parent.mkdir()
    pq.write_table(records_table(base, MENTION_SCHEMA), parent / NAME)
    # the child: some base rows removed (a whole unit's, sometimes), rows added
    removed = [m.mention_id for m in base if rng.random() < 0.3 or m.norm == FORMS[seed % 4][0]]
    added = records_table(_mentions(rng, 12, "delta"), MENTION_SCHEMA)
    child = str(tmp_path / "child")
    os.makedirs(child)
    knowledge_layers.write_change(
        child,
        NAME,
        str(parent),
        upserts=added,
        removed=removed,
        whole=lambda: pytest.fail("within the share"),
        write=lambda table, path: pq.write_table(table, path),
        fold_share=10.0,
    )
    rows = KnowledgeRows(child, NAME)
    gone = rows.where("doc_id", ["d1"])  # a dropped document's rows
    forms = {"upilite", "npci", "absent"}
    scanned = known_units(rows, forms, gone)
    table_cache.enable(1 << 24)
    try:
        KnowledgeRows(str(parent), NAME).where("doc_id", ["d0"])  # the base, read first
        looked_up = known_units(KnowledgeRows(child, NAME), forms, gone)
        assert table_cache.stats()["hits"] > 0  # the base found under its hard link
    finally:
        table_cache.disable()
    assert looked_up == scanned
    # and both are the units of the live rows, counted by hand
    live = [r for r in knowledge_layers.read_table(child, NAME).to_pylist() if r["doc_id"] != "d1"]
    expected: dict = {}
    for r in live:
        unit = (r["norm"], "person" if r["label"] == "PERSON" else "thing")
        owner, count = expected.get(unit, (r["entity_id"], 0))
        expected[unit] = (owner, count + 1)
    assert {u: (k.entity_id, k.count) for u, k in scanned.items()} == expected
