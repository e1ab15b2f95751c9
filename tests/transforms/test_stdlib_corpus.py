import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import register_coders, revision_of
from store.config import IngestConfig
from transforms.ingest import IngestError
from transforms.stdlib_corpus import (
    MODULE_PREFIX,
    TOPIC_PREFIX,
    ReadStdlibCorpus,
    _BuildStdlibDocumentFn,
    list_sources,
    module_text,
)
from transforms.tags import BAD, GOOD


def test_corpus_has_a_few_hundred_stable_sources():
    sources = list_sources()
    assert 150 <= len(sources) <= 600
    assert sources == list_sources()
    assert TOPIC_PREFIX + "with" in sources
    assert MODULE_PREFIX + "gzip" in sources
    assert MODULE_PREFIX + "antigravity" not in sources  # never a document


def test_module_text_is_read_from_source_without_importing():
    title, text = module_text(
        "demo", '"""Demo tools.\n\nMore."""\ndef run(x, *, y):\n    """Run it."""\n'
    )
    assert title == "demo — Demo tools"
    assert "## demo.run(x, y)\n\nRun it." in text


def test_undocumented_or_broken_modules_are_errors_with_a_type():
    for source, error_type in (("x = 1\n", "empty"), ("def (:\n", "unparsable")):
        try:
            module_text("m", source)
        except IngestError as exc:
            assert exc.error_type == error_type
        else:
            raise AssertionError("expected IngestError")


def test_read_stdlib_corpus_transform_and_dead_letter():
    register_coders()
    config = IngestConfig()
    fn = _BuildStdlibDocumentFn(config=config)
    expected = next(iter(fn.process(TOPIC_PREFIX + "with")))
    with TestPipeline() as p:
        out = p | ReadStdlibCorpus(config=config, limit=3)
        assert_that(out[GOOD] | beam.combiners.Count.Globally(), equal_to([3]), label="three")
        assert_that(out[BAD], equal_to([]), label="none_bad")
    assert expected.revision == revision_of(expected.text)
    assert "with" in expected.text
    bad = list(fn.process("python/unknown/x"))
    assert bad[0].value.error_type == "unsupported"
