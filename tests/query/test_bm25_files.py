"""The saved BM25 index read without bm25s scores as bm25s does, to the bit."""

import bm25s
import numpy as np
import pytest
from bm25s.tokenization import _infer_stopwords

from query.bm25_files import SavedIndex
from store.config import LexicalConfig
from store.lexical import _STOPWORD_LISTS, LexicalTokenizer, stopword_set
from transforms.lexical import build_bm25

TEXTS = [
    "Metformin lowers hepatic glucose output in treated mice.",
    "Zebrafish fins regrow after amputation; regrowth needs retinoic acid.",
    "The effect of metformin depends on AMPK activation and glucose.",
    "gzip compresses a file; zlib's deflate takes a flush value.",
    "",
    "Glucose, glucose and more glucose: hepatic output of glucose.",
]
QUERIES = [
    [],
    ["glucos"],
    ["glucos", "glucos", "metformin"],  # a repeated token counts twice
    ["no-such-token", "ampk", "activ"],
    ["gzip", "zlib", "flush", "deflat", "file", "regrowth", "fin"],
]


def _saved(index, tmp_path):
    folder = tmp_path / "bm25"
    index.save(str(folder))
    return str(folder)


def test_the_builds_index_scores_as_bm25s_scores_it(tmp_path):
    config = LexicalConfig()
    folder = _saved(build_bm25(TEXTS, config=config), tmp_path)
    ours = SavedIndex.open(folder)
    theirs = bm25s.BM25.load(folder, mmap=True, load_corpus=False, show_progress=False)
    assert ours.vocab_dict == theirs.vocab_dict
    assert ours.scores["num_docs"] == theirs.scores["num_docs"] == len(TEXTS)
    tokenize = LexicalTokenizer(config)
    queries = QUERIES + [tokenize.tokens(t) for t in TEXTS if t]
    for tokens in queries:
        known = [t for t in tokens if t in theirs.vocab_dict]
        expected = theirs.get_scores(known) if known else np.zeros(len(TEXTS), np.float32)
        got = ours.get_scores(tokens)
        assert got.dtype == np.float32 and got.tobytes() == np.asarray(expected).tobytes()
    assert ours.get_scores(["glucos"]).max() > 0


@pytest.mark.parametrize("method", ["bm25l", "bm25+"])
def test_variants_with_a_nonoccurrence_score_add_it_as_bm25s_does(method, tmp_path):
    tokens = [t or [""] for t in LexicalTokenizer(LexicalConfig())(TEXTS)]
    index = bm25s.BM25(method=method)
    index.index(tokens, show_progress=False)
    folder = _saved(index, tmp_path)
    ours = SavedIndex.open(folder)
    theirs = bm25s.BM25.load(folder, mmap=True, load_corpus=False, show_progress=False)
    for query in QUERIES[1:]:
        known = [t for t in query if t in theirs.vocab_dict]
        assert ours.get_scores(query).tobytes() == np.asarray(theirs.get_scores(known)).tobytes()


def test_a_missing_array_is_named(tmp_path):
    folder = _saved(build_bm25(TEXTS, config=LexicalConfig()), tmp_path)
    (tmp_path / "bm25" / "indptr.csc.index.npy").unlink()
    with pytest.raises(FileNotFoundError, match="indptr"):
        SavedIndex.open(folder)


def test_stopwords_are_bm25s_lists_without_importing_it():
    for names in _STOPWORD_LISTS.values():
        for name in names:
            assert stopword_set(name) == frozenset(_infer_stopwords(name)), name
    assert stopword_set(None) == frozenset()
    with pytest.raises(ValueError, match="klingon"):
        stopword_set("klingon")  # left to bm25s, whose message lists what it knows
