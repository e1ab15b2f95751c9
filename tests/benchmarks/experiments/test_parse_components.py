"""benchmarks.experiments.parse_components: every enabled component is timed, in pipeline order."""

import spacy

from benchmarks.experiments.parse_components import component_seconds


def test_each_enabled_component_is_timed_in_pipeline_order():
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("merge_noun_chunks", name="disabled")
    nlp.add_pipe("merge_entities")
    nlp.disable_pipe("disabled")
    seconds = component_seconds(nlp, ["One. Two.", "Three."], batch_size=1)
    assert list(seconds) == ["sentencizer", "merge_entities"]
    assert all(s >= 0 for s in seconds.values())
