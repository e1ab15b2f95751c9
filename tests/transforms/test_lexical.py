from typing import NamedTuple

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from store.config import LexicalConfig
from store.lexical import LexicalTokenizer
from transforms.lexical import build_bm25, context_texts


class _Chunk(NamedTuple):
    doc_id: str
    chunk_index: int
    text: str


# Two documents, listed out of order as the global step receives them (chunk-id order).
CHUNKS = [
    _Chunk("d1", 2, "Outcomes improved in treated mice."),
    _Chunk("d2", 0, "Zebrafish fins regrow after amputation."),
    _Chunk("d1", 0, "Metformin lowers hepatic glucose output."),
    _Chunk("d1", 1, "The effect depends on AMPK activation."),
    _Chunk("d2", 1, "Regrowth needs retinoic acid signalling."),
]


def test_context_joins_each_chunk_with_its_documents_neighbours_in_order():
    keys = [(c.doc_id, c.chunk_index) for c in CHUNKS]
    texts = dict(zip(keys, context_texts(CHUNKS, 1), strict=True))
    assert texts[("d1", 0)] == "Metformin lowers hepatic glucose output.\n" + CHUNKS[3].text
    assert texts[("d1", 1)] == "\n".join([CHUNKS[2].text, CHUNKS[3].text, CHUNKS[0].text])
    assert texts[("d1", 2)] == CHUNKS[3].text + "\n" + CHUNKS[0].text
    # The other document's chunks never leak into a window.
    assert "Metformin" not in texts[("d2", 0)] and "Regrowth" in texts[("d2", 0)]


def test_context_width_zero_is_the_chunk_alone_and_two_reaches_further():
    assert context_texts(CHUNKS, 0) == [c.text for c in CHUNKS]
    wide = context_texts(CHUNKS, 2)
    assert wide[2] == "\n".join([CHUNKS[2].text, CHUNKS[3].text, CHUNKS[0].text])


def test_bm25_over_context_scores_a_chunk_for_its_neighbours_terms():
    config = LexicalConfig()
    tokenize = LexicalTokenizer(config)
    query = tokenize(["metformin AMPK"])[0]
    alone = np.asarray(build_bm25(context_texts(CHUNKS, 0), config=config).get_scores(query))
    context = np.asarray(build_bm25(context_texts(CHUNKS, 1), config=config).get_scores(query))
    d1_last, d2_first, d1_first = 0, 1, 2
    # "Outcomes improved in treated mice." names neither term: it scores only in context.
    assert alone[d1_last] == 0 and context[d1_last] > 0
    # The chunk with both terms in its window outranks one with a single neighbour term.
    assert context[d1_first] > context[d1_last]
    assert alone[d2_first] == 0 and context[d2_first] == 0


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("abcXYZ éß_-.'1 2\n"), max_size=60))
def test_one_texts_fast_tokens_are_what_the_index_builds_with(text):
    tokenize = LexicalTokenizer(LexicalConfig())
    assert tokenize.tokens(text) == tokenize([text])[0]
    for words in ("What does json.dumps do with sort_keys?", "The Danube's deltas", "the of a"):
        assert tokenize.tokens(words) == tokenize([words])[0]
