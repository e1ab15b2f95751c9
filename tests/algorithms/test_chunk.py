import itertools
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.chunk import (
    blocks,
    chunk_spans,
    pack,
    page_range,
    paragraphs,
    semantic_pack,
    sentences,
)


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


def test_a_word_longer_than_the_window_is_cut_between_characters():
    blob = "x" * 35
    text = f"see {blob} here"
    spans = chunk_spans(text, count_tokens=len, target_tokens=10, max_tokens=10)
    assert all(len(text[s:e]) <= 10 for s, e in spans)
    assert "".join(text[s:e].replace(" ", "") for s, e in spans) == text.replace(" ", "")
    assert [text[s:e] for s, e in spans][1:4] == ["x" * 10] * 3  # each piece as long as fits


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab-/=", min_size=1, max_size=400), st.integers(1, 40))
def test_word_pieces_tile_the_word_and_fit(word, limit):
    def punctuation_split(piece: str) -> int:  # like WordPiece: punctuation is its own token
        return len(re.findall(r"[a-z]+|[^a-z]", piece))

    spans = chunk_spans(word, count_tokens=punctuation_split, target_tokens=limit, max_tokens=limit)
    assert "".join(word[s:e] for s, e in spans) == word
    assert all(punctuation_split(word[s:e]) <= limit for s, e in spans)


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
    from algorithms.chunk import heading_paths

    text = "# Guide\n\nIntro.\n\n## Limits\n\n### UPI Lite\n\nRs 500.\n\n## Fees\n\nNone.\n"
    starts = [0, text.index("Intro"), text.index("Rs 500"), text.index("None")]
    assert heading_paths(text, starts) == [
        "Guide",
        "Guide",
        "Guide > Limits > UPI Lite",
        "Guide > Fees",
    ]
    assert heading_paths("no headings here", [0, 3]) == ["", ""]


STRUCTURED = """# Guide

Intro paragraph that says what the guide covers.

## Limits

| plan | limit |
|---|---|

| UPI Lite | 500 |

- first item
- second item
  continues here

```python
def f():

    return 1
```

Closing words.
"""


def test_blocks_name_headings_code_tables_lists_and_paragraphs():
    found = blocks(STRUCTURED)
    kinds = [b.kind for b in found]
    assert kinds == [
        "heading",
        "paragraph",
        "heading",
        "table",
        "table",
        "list",
        "code",
        "paragraph",
    ]
    code = next(b for b in found if b.kind == "code")
    assert STRUCTURED[code.span[0] : code.span[1]].endswith("    return 1\n```")
    listed = next(b for b in found if b.kind == "list")
    assert STRUCTURED[listed.span[0] : listed.span[1]].endswith("continues here")


def test_an_unclosed_fence_runs_to_the_end():
    text = "Para.\n\n```\ncode\n\nmore code"
    assert [b.kind for b in blocks(text)] == ["paragraph", "code"]
    assert text[slice(*blocks(text)[1].span)] == "```\ncode\n\nmore code"


def test_no_chunk_crosses_a_heading_even_when_both_sections_fit_together():
    text = "# A\n\nshort one.\n\n# B\n\nshort two."
    spans = chunk_spans(text, count_tokens=words, target_tokens=100, max_tokens=100)
    assert [text[s:e] for s, e in spans] == ["# A\n\nshort one.", "# B\n\nshort two."]


def test_a_code_block_that_fits_the_window_is_never_cut_even_past_the_target():
    code = "```\n" + "\n\n".join(f"x{i} = {i}" for i in range(10)) + "\n```"
    text = f"Before.\n\n{code}\n\nAfter."
    spans = chunk_spans(text, count_tokens=words, target_tokens=8, max_tokens=40)
    assert code in [text[s:e] for s, e in spans]


def test_an_oversized_table_is_cut_between_rows():
    rows = "\n".join(f"| row {i} | value {i} |" for i in range(20))
    spans = chunk_spans(rows, count_tokens=words, target_tokens=12, max_tokens=12)
    for s, e in spans:
        piece = rows[s:e]
        assert piece.startswith("| row") and piece.endswith("|")
        assert words(piece) <= 12


def test_semantic_pack_breaks_at_the_largest_similarity_drop():
    units = [((i * 10, i * 10 + 9), 5) for i in range(6)]
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    near_a = np.array([0.995, 0.0998])
    vectors = np.stack([a, near_a, a, b, b, b])
    # Greedy packing at target 20 would cut after the 4th unit; the topic turns after the 3rd.
    assert pack(units, 20) == [(0, 39), (40, 59)]
    got = semantic_pack(units, vectors, target_tokens=20, min_tokens=5, percentile=80)
    assert got == [(0, 29), (30, 59)]
    # Below min_tokens no semantic break is taken.
    assert semantic_pack(units, vectors, target_tokens=20, min_tokens=16, percentile=80) == [
        (0, 39),
        (40, 59),
    ]


def test_page_range_maps_a_span_to_the_pages_it_touches():
    pages = [(0, 10), (12, 30), (32, 40)]
    assert page_range(pages, 0, 5) == (1, 1)
    assert page_range(pages, 5, 33) == (1, 3)
    assert page_range(pages, 10, 12) == (None, None)
    assert page_range([], 0, 5) == (None, None)


def test_code_is_never_read_as_a_heading():
    from algorithms.chunk import heading_paths

    text = (
        "# Porting\n\nSet binary mode:\n\n```\n#  define SET_BINARY_MODE(file)\n```\n\n"
        "After the code.\n"
    )
    after = text.index("After")
    assert heading_paths(text, [after]) == ["Porting"]
    indented = "# Shell\n\n    # a comment in indented code\n\nProse.\n"
    assert heading_paths(indented, [indented.index("Prose")]) == ["Shell"]


def test_plain_text_headings_are_setext_underlines_not_hash_lines():
    from algorithms.chunk import PLAIN, blocks, heading_paths, headings, markup_of

    text = (
        "Usage\n=====\n\nRun it.\n\n# sign (unless quoted) and extend to the end\n\n"
        "Options\n-------\n\n--all  every file.\n\nA rule under prose\n---\n"
    )
    assert markup_of("docs/README.txt") == PLAIN and markup_of("a/b.md") == "markdown"
    assert [(level, title) for _, level, title in headings(text, markup=PLAIN)] == [
        (1, "Usage"),
        (2, "Options"),
    ]  # the last underline is far shorter than its line: a rule, not a heading
    starts = [text.index("Run it"), text.index("# sign"), text.index("--all")]
    assert heading_paths(text, starts, markup=PLAIN) == ["Usage", "Usage", "Usage > Options"]
    kinds = [b.kind for b in blocks(text, markup=PLAIN)]
    assert kinds.count("heading") == 2
    # A Markdown file reads the same setext headings, and "#" lines as headings too.
    md = "Title\n=====\n\nText.\n\n## Part\n\nMore.\n"
    assert heading_paths(md, [md.index("More")]) == ["Title > Part"]
