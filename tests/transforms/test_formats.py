import io

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas import register_coders
from store.config import IngestConfig
from tests.conftest import write_corpus
from transforms.formats import html_to_text, pdf_to_text
from transforms.ingest import IngestError, ReadDocuments, pattern_and_root
from transforms.tags import BAD, GOOD

HTML = b"""<html><head><title>Transfer limits</title><style>p{color:red}</style>
<script>var tracking = 1;</script></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>UPI Lite</h1><p>The UPI Lite limit is <b>Rs 500</b> per
transaction.</p><ul><li>Works offline</li><li>No PIN</li></ul>
<footer>Copyright 2024</footer></body></html>"""


def make_pdf(pages: list[str]) -> bytes:
    """A minimal PDF with one line of Helvetica text per page, written by hand."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        page_id, content_id = len(objects) + 1, len(objects) + 2
        kids.append(f"{page_id} 0 R")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Contents {content_id} 0 R /Resources << /Font << /F1 FONT 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    font_id = len(objects)
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = io.BytesIO(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body.replace('FONT', str(font_id))}\nendobj\n".encode())
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def test_html_loses_markup_and_boilerplate_but_keeps_structure():
    title, text = html_to_text(HTML)
    assert title == "Transfer limits"
    assert text.startswith("# UPI Lite\n\nThe UPI Lite limit is Rs 500 per transaction.")
    assert "Works offline" in text and "No PIN" in text
    for noise in ("tracking", "color:red", "Home", "Copyright"):
        assert noise not in text


def test_pdf_text_layer_with_page_offsets():
    _, text, meta = pdf_to_text(make_pdf(["First page words", "Second page words"]))
    assert "First page words" in text and "Second page words" in text
    starts = [text[s:e] for s, e in meta["pages"]]
    assert starts == ["First page words", "Second page words"]


def test_encrypted_and_broken_pdfs_are_named():
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Secret"]))))
    writer.encrypt("password")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(IngestError) as info:
        pdf_to_text(buffer.getvalue())
    assert info.value.error_type == "encrypted"
    with pytest.raises(IngestError) as info:
        pdf_to_text(b"%PDF-1.4 this is not really a pdf")
    assert info.value.error_type == "broken_pdf"


def test_read_documents_handles_html_and_pdf(tmp_path):
    register_coders()
    corpus = write_corpus(
        tmp_path / "in",
        {
            "page.html": HTML,
            "doc.pdf": make_pdf(["Alpha page", "Beta page"]),
            "bad.pdf": b"%PDF-1.4 garbage",
        },
    )
    pattern, root = pattern_and_root(str(corpus))
    with TestPipeline() as p:
        out = p | ReadDocuments(pattern, root=root, config=IngestConfig())
        assert_that(
            out[GOOD] | beam.Map(lambda d: (d.doc_id, d.title, '"pages"' in d.metadata_json)),
            # A PDF without a title in its metadata has no heading either: its file name.
            equal_to([("page.html", "Transfer limits", False), ("doc.pdf", "doc.pdf", True)]),
            label="docs",
        )
        assert_that(
            out[BAD] | beam.Map(lambda d: (d.record_id, d.error_type)),
            equal_to([("bad.pdf", "broken_pdf")]),
            label="dead",
        )


def test_html_code_and_tables_stay_structured_blocks():
    from algorithms.chunk import blocks

    html = (
        b"<html><body><h1>Guide</h1><p>Intro text here.</p>"
        b"<table><tr><th>plan</th><th>limit</th></tr><tr><td>UPI Lite</td><td>500</td></tr>"
        b"</table><pre>def f():\n    return 1\n\nx = f()</pre><p>After.</p></body></html>"
    )
    _, text = html_to_text(html)
    assert "| plan | limit |\n| UPI Lite | 500 |" in text
    assert "```\ndef f():\n    return 1\n\nx = f()\n```" in text
    assert [b.kind for b in blocks(text)] == ["heading", "paragraph", "table", "code", "paragraph"]


def test_html_code_and_hash_paragraphs_never_become_headings():
    from algorithms.chunk import heading_paths

    page = b"""<html><head></head><body><h2>Porting notes</h2>
<pre>#  define SET_BINARY_MODE(file)
int main(void);</pre><p># not a heading either</p>
<div><code>#!/bin/sh
# a shell comment
exit 0</code></div><p>Closing words.</p></body></html>"""
    title, text = html_to_text(page)
    assert title == "Porting notes"  # no <title>: the first real heading
    starts = [text.index("Closing"), text.index("# not")]
    assert heading_paths(text, starts) == ["Porting notes", "Porting notes"]
    assert "#  define SET_BINARY_MODE(file)\nint main(void);" in text  # code kept verbatim
    assert "# a shell comment\nexit 0" in text


def test_titles_come_from_real_headings_then_the_file_name(tmp_path):
    register_coders()
    files = {
        "myst.md": "(SSL Certificate Verification)=\n\n# Verifying certificates\n\nText.",
        "draft.txt": "<DRAFT!>\n\nA plain text file.\n",
        "notes.txt": "Release notes\n=============\n\nFixed things.\n",
        "code.md": "```\n# not a title\n```\n\nNo heading at all.\n",
    }
    write_corpus(tmp_path, files)
    pattern, root = pattern_and_root(str(tmp_path))
    with TestPipeline() as p:
        read = p | ReadDocuments(pattern, root=root, config=IngestConfig())
        titles = read[GOOD] | beam.Map(lambda d: (d.doc_id, d.title))
        assert_that(
            titles,
            equal_to(
                [
                    ("myst.md", "Verifying certificates"),
                    ("draft.txt", "draft.txt"),
                    ("notes.txt", "Release notes"),
                    ("code.md", "code.md"),
                ]
            ),
        )
