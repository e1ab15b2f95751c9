import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.spans import chunk_spans, pack, paragraphs, sentences


def words(text: str) -> int:
    """A whitespace word counter: additive across whitespace, like WordPiece."""
    return len(text.split())


def test_paragraphs_are_trimmed_blank_line_blocks():
    text = "  First para\nline two.\n\n\n  Second.  \n \nThird"
    spans = paragraphs(text)
    assert [text[s:e] for s, e in spans] == ["First para\nline two.", "Second.", "Third"]


def test_sentences_split_on_terminal_punctuation_and_list_items():
    text = "One thing. Another thing! A third?\n- item one\n- item two"
    spans = sentences(text, (0, len(text)))
    assert [text[s:e] for s, e in spans] == [
        "One thing.",
        "Another thing!",
        "A third?",
        "- item one",
        "- item two",
    ]


def test_pack_merges_until_target():
    units = [((0, 1), 3), ((2, 3), 3), ((4, 5), 3), ((6, 7), 10)]
    assert pack(units, 6) == [(0, 3), (4, 5), (6, 7)]


def test_a_long_sentence_is_cut_into_windows_within_the_limit():
    text = " ".join(f"w{i}" for i in range(50))
    spans = chunk_spans(text, count_tokens=words, target_tokens=8, max_tokens=10)
    assert all(words(text[s:e]) <= 10 for s, e in spans)
    assert " ".join(text[s:e] for s, e in spans) == text


prose = st.lists(
    st.one_of(
        st.from_regex(r"[A-Z][a-z]{1,8}( [a-z]{1,8}){0,12}[.!?]", fullmatch=True),
        st.sampled_from(["\n\n", "\n", "  ", "\n- ", "\n\n\n"]),
    ),
    max_size=40,
).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(prose, st.integers(3, 30), st.integers(3, 30))
def test_chunks_cover_every_word_exactly_once_in_order(text, target, limit):
    spans = chunk_spans(text, count_tokens=words, target_tokens=target, max_tokens=limit)
    for (_, e1), (s2, _) in itertools.pairwise(spans):
        assert e1 <= s2, "spans overlap or are out of order"
    for s, e in spans:
        assert 0 <= s < e <= len(text)
        assert not text[s].isspace() and not text[e - 1].isspace()
        assert words(text[s:e]) <= limit
    covered = [m.span() for m in re.finditer(r"\S+", text)]
    inside = [any(s <= ws and we <= e for s, e in spans) for ws, we in covered]
    assert all(inside), "a word fell into a gap between chunks"


def test_heading_paths_follow_markdown_nesting():
    from transforms.spans import heading_paths

    text = "# Guide\n\nIntro.\n\n## Limits\n\n### UPI Lite\n\nRs 500.\n\n## Fees\n\nNone.\n"
    starts = [0, text.index("Intro"), text.index("Rs 500"), text.index("None")]
    assert heading_paths(text, starts) == [
        "Guide",
        "Guide",
        "Guide > Limits > UPI Lite",
        "Guide > Fees",
    ]
    assert heading_paths("no headings here", [0, 3]) == ["", ""]
