"""The keyed canonicalization transform (transforms.canonicalize) against the same steps
run in one process (algorithms.canonical_blocks.canonicalize_by_key, itself checked
against the whole-corpus algorithm), with the real name encoder."""

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from algorithms.canonical_blocks import canonicalize_by_key
from benchmarks.knowledge_workload import generate
from schemas import Mention
from transforms.canonicalize import (
    ENTITIES,
    ENTITY_OF,
    MENTIONS,
    NAMES,
    CanonicalizeEntities,
    NameEncoder,
)


def _rows(docs: int, seed: int) -> tuple[list[list[Mention]], list[list[tuple]]]:
    """Mentions and acronym definitions of a seeded workload, one batch per document,
    with spelling variants of the workload's names added."""
    rows = list(generate(docs, seed=seed))
    mentions = [list(d.mentions) for d in rows]
    variants = [
        Mention(f"v{i:03d}", "cv", "dv", 0, len(text), text, "NOUN_CHUNK", text.lower())
        for i, text in enumerate(
            [
                "tumour cells",
                "tumor cells",
                "Tumour cells",
                "colour",
                "color",
                "BMI",
                "body mass index",
            ]
        )
    ]
    definitions = [("dv", "cv", "bmi", "body mass index")]  # normalized forms, as extracted
    return [*mentions, variants], [*(list(d.acronyms) for d in rows), definitions]


def test_keyed_transform_makes_the_entities_of_the_steps_in_one_process(model_path):
    mentions, acronyms = _rows(60, seed=4)
    flat = [m for batch in mentions for m in batch]
    expected = canonicalize_by_key(
        flat,
        [(a[2], a[3]) for batch in acronyms for a in batch],
        embed=NameEncoder(model_path).embed,
    )
    assert any(len(e.aliases) > 1 for e in expected.entities)
    # Spelling variants merge across blocks: "tumour cells" / "tumor cells", "colour" / "color".
    assert expected.assignment["v000"] == expected.assignment["v001"]
    assert expected.assignment["v003"] == expected.assignment["v004"]
    assert expected.assignment["v005"] == expected.assignment["v006"]  # an acronym's expansion
    names = {e.entity_id: e.name for e in expected.entities}
    with TestPipeline() as p:
        out = {
            "mentions": p | "Mentions" >> beam.Create(mentions),
            "acronyms": p | "Acronyms" >> beam.Create(acronyms),
        } | CanonicalizeEntities(model=model_path)
        assert_that(out[ENTITIES], equal_to(expected.entities), label="Entities")
        assert_that(
            out[MENTIONS],
            equal_to([m._replace(entity_id=expected.assignment[m.mention_id]) for m in flat]),
            label="Mentions",
        )
        assert_that(
            out[ENTITY_OF],
            equal_to([(m, (e, names[e])) for m, e in expected.assignment.items()]),
            label="EntityOf",
        )
        assert_that(out[NAMES], equal_to(list(names.items())), label="Names")


def test_no_mention_makes_no_entity(model_path):
    with TestPipeline() as p:
        out = {
            "mentions": p | "Mentions" >> beam.Create([]),
            "acronyms": p | "Acronyms" >> beam.Create([[("d", "c", "BMI", "body mass index")]]),
        } | CanonicalizeEntities(model=model_path)
        for name in (ENTITIES, MENTIONS, ENTITY_OF, NAMES):
            assert_that(out[name], equal_to([]), label=name)
