"""Issue 30: query NER without PyTorch, and computed ahead for a one-shot query.

spaCy is loaded with PyTorch hidden from thinc when the pipeline does not need it; the
routes of the router's test questions must be what they are with PyTorch loaded.
``PrefetchedEntities`` runs the same NER in a forked helper while the caller opens the
bundle; its results must be the in-process pipeline's."""

import json
import subprocess
import sys
import textwrap

import pytest

from query.ner import QueryEntities, needs_torch
from query.router import route
from store.config import DEFAULT_SPACY_PIPELINE

QUESTIONS = (
    "what did barack obama say about nasa?",
    "ferry timetable last week",
    "Which river reaches the Black Sea?",
    "what did the danube do in romania?",
    "Is UPI Lite capped in India by the RBI in March 2024?",
    "Which flush value tells zlib deflate that there is no more input?",
    "Where should I report bugs in procps?",
    "Compare Python 3.12 and 3.13 on Linux",
)


@pytest.fixture(scope="module")
def ner():
    return QueryEntities.load(DEFAULT_SPACY_PIPELINE)


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_the_small_english_pipeline_needs_no_torch(tmp_path):
    assert needs_torch(DEFAULT_SPACY_PIPELINE) is False
    assert needs_torch("no_such_pipeline_xyz") is True  # unsure: do not hide PyTorch
    folder = tmp_path / "trf"
    folder.mkdir()
    (folder / "config.cfg").write_text('[components.transformer]\nfactory = "transformer"\n')
    assert needs_torch(str(folder)) is True


def test_routes_without_torch_are_the_routes_with_it(ner):
    # This process has PyTorch loaded; the subprocess loads spaCy with it hidden.
    expected = [route(q, recognizer=ner)._asdict() for q in QUESTIONS]
    out = _run(
        f"""
        import json, sys
        from query.ner import QueryEntities
        from query.router import route
        ner = QueryEntities.load({DEFAULT_SPACY_PIPELINE!r})
        routes = [route(q, recognizer=ner)._asdict() for q in {QUESTIONS!r}]
        assert "torch" not in sys.modules, "spaCy imported PyTorch"
        print(json.dumps(routes))
        """
    )
    assert json.loads(out) == json.loads(json.dumps(expected))


def test_prefetched_entities_are_the_pipelines_own(ner):
    expected = {q: ner(q) for q in QUESTIONS}
    out = _run(
        f"""
        import json, sys
        from query.ner import PrefetchedEntities
        prefetched = PrefetchedEntities.start({DEFAULT_SPACY_PIPELINE!r}, {QUESTIONS!r})
        found = {{q: prefetched(q) for q in {QUESTIONS!r}}}
        assert "spacy" not in sys.modules, "the helper process should have run spaCy"
        other = prefetched("Did Marie Curie work in Paris?")  # not prefetched: loads here
        assert "spacy" in sys.modules and other, other
        print(json.dumps(found))
        """
    )
    assert json.loads(out) == json.loads(json.dumps(expected))


def test_a_failed_helper_is_reported_and_the_pipeline_loaded_here():
    out = _run(
        """
        import logging, sys
        logging.basicConfig(level=logging.WARNING, stream=sys.stdout)
        from query.ner import PrefetchedEntities
        prefetched = PrefetchedEntities.start("no_such_pipeline_xyz", ["x"])
        try:
            prefetched("x")
        except OSError as exc:  # loading it here fails the same way, with spaCy's message
            print("OSError", "no_such_pipeline_xyz" in str(exc))
        """
    )
    assert out == "OSError True"


def test_an_early_helper_answers_as_the_pipeline_does(ner):
    # Forked before the pipeline is known; asked once it is: same entities, spaCy only
    # in the helper.
    expected = {q: ner(q) for q in QUESTIONS}
    out = _run(
        f"""
        import json, sys
        from query.ner import EarlyHelper
        helper = EarlyHelper.fork()
        prefetched = helper.ask({DEFAULT_SPACY_PIPELINE!r}, {QUESTIONS!r})
        helper.close()  # asked: nothing left to stop
        found = {{q: prefetched(q) for q in {QUESTIONS!r}}}
        assert "spacy" not in sys.modules, "the helper process should have run spaCy"
        try:
            helper.ask({DEFAULT_SPACY_PIPELINE!r}, ["again"])
        except RuntimeError as exc:
            assert "already asked" in str(exc), exc
        else:
            raise AssertionError("a helper answered twice")
        print(json.dumps(found))
        """
    )
    assert json.loads(out) == json.loads(json.dumps(expected))


def test_an_unasked_early_helper_is_stopped_and_reaped():
    out = _run(
        """
        import os
        from query.ner import EarlyHelper
        helper = EarlyHelper.fork()
        pid = helper._pid
        helper.close()
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            print("reaped")
        """
    )
    assert out == "reaped"


def test_an_early_helper_lets_an_unknown_pipeline_load_as_before():
    # Unsure whether it needs PyTorch: this helper (spaCy imported with it hidden) is
    # stopped, one forked as before fails, and loading here fails with spaCy's message.
    out = _run(
        """
        import logging, os, sys
        logging.basicConfig(level=logging.WARNING, stream=sys.stdout)
        from query.ner import EarlyHelper
        helper = EarlyHelper.fork()
        early = helper._pid
        prefetched = helper.ask("no_such_pipeline_xyz", ["x"])
        try:
            os.waitpid(early, os.WNOHANG)
            reaped = False
        except ChildProcessError:
            reaped = True
        try:
            prefetched("x")
        except OSError as exc:
            print("OSError", "no_such_pipeline_xyz" in str(exc), "reaped", reaped)
        """
    )
    assert out == "OSError True reaped True"
