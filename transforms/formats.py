"""Text extraction for rich formats: HTML (main content only, markup removed) and PDF
(text layer, page offsets kept). Pure functions; errors are :class:`IngestError`.
"""

import io
from typing import Any

from schemas import normalize_text
from transforms.html_content import main_content_shingles, prune_boilerplate
from transforms.ingest_errors import IngestError

HTML_SUFFIXES = (".html", ".htm")
PDF_SUFFIXES = (".pdf",)
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLOCKS = (
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "tr",
    "pre",
    "blockquote",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "figcaption",
    "br",
)


def html_to_text(data: bytes) -> tuple[str, str]:
    """HTML bytes -> (title, text) of the page's main content: headings as ``#`` lines,
    blocks as paragraphs, code fenced, tables as ``| a | b |`` rows.

    Menus, breadcrumbs and link bars are removed first
    (:func:`transforms.html_content.prune_boilerplate`), whatever elements hold them.

    Raises:
        IngestError: the page has no readable text.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    if title_tag:
        title_tag.decompose()
    body = soup.body or soup
    prune_boilerplate(body, main_content_shingles(data))
    kept = _keep_structured_blocks(body)
    found_headings: list[str] = []
    for level in range(1, 7):
        for heading in body.find_all(f"h{level}"):
            text = " ".join(heading.get_text(" ", strip=True).split())
            key = f"evidexheading{len(found_headings)}x"
            found_headings.append(text)
            kept[key] = f"{'#' * level} {text}" if text else ""
            heading.replace_with(f"\n\n{key}\n\n")
    for block in body.find_all(list(_BLOCKS)):
        block.insert_before("\n\n")
        block.insert_after("\n\n")
    lines = [" ".join(line.split()) for line in body.get_text().splitlines()]
    paragraphs, current = [], []
    for line in lines:
        if line:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    # Only heading elements become "#" lines: a paragraph of text that happens to start
    # with "#" is indented by one space, which no heading rule reads as a heading.
    text = "\n\n".join(
        kept[p] if p in kept else (f" {p}" if p.startswith("#") else p)
        for p in paragraphs
        if kept.get(p, p)
    )
    if not text.strip():
        raise IngestError("empty", "HTML page has no readable text")
    if not title:
        title = next((h for h in found_headings if h), "")
    return title, text


def _keep_structured_blocks(body: Any) -> dict[str, str]:
    """Replace ``<pre>``, multi-line ``<code>`` and ``<table>`` with one-word marker
    paragraphs; return their text.

    Code becomes a fenced block with its line breaks; a table becomes ``| a | b |``
    rows, so the chunker keeps both whole (see :func:`algorithms.chunk.blocks`).
    """
    kept: dict[str, str] = {}
    _unwrap_layout_tables(body)
    for i, table in enumerate(body.find_all("table")):
        if table.find_parent("table") is not None:
            continue  # nested tables are flattened into their outer table's cells
        rows = []
        for tr in table.find_all("tr"):
            cells = [" ".join(c.get_text(" ").split()) for c in tr.find_all(["td", "th"])]
            if any(cells):
                rows.append("| " + " | ".join(cells) + " |")
        key = f"evidextable{i}x"
        kept[key] = "\n".join(rows)
        table.replace_with(f"\n\n{key}\n\n" if rows else "\n\n")
    # Code: every <pre>, and a <code> outside one that holds several lines.
    code = [
        c
        for c in body.find_all(["pre", "code"])
        if c.name == "pre" or (c.find_parent("pre") is None and "\n" in c.get_text().strip())
    ]
    for i, element in enumerate(code):
        lines = [line.rstrip() for line in element.get_text().strip("\n").split("\n")]
        key = f"evidexcode{i}x"
        kept[key] = "```\n" + "\n".join(lines).replace("```", "` ` `") + "\n```"
        element.replace_with(f"\n\n{key}\n\n" if any(lines) else "\n\n")
    return kept


_TABLE_PARTS = ("thead", "tbody", "tfoot", "tr", "td", "th")


def _unwrap_layout_tables(body: Any) -> None:
    """Turn tables that lay out a page into plain blocks.

    A table holding another table, a heading or a ``<pre>`` arranges blocks rather
    than tabulating values (generated manuals put the whole page, or a code
    listing beside its line numbers, in one); its rows and cells become ``div``s,
    so their headings, code and paragraphs keep their own structure.
    """
    layout = [t for t in body.find_all("table") if t.find(["table", "pre", *_HEADINGS])]
    for table in layout:
        for part in table.find_all(list(_TABLE_PARTS)):
            if part.find_parent("table") is table:
                part.name = "div"
        table.name = "div"


def pdf_to_text(data: bytes) -> tuple[str, str, dict[str, Any]]:
    """PDF bytes -> (title, text, metadata with each page's ``[start, end)`` in the text).

    Raises:
        IngestError: ``encrypted``, ``broken_pdf`` or ``empty`` (no text layer).
    """
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise IngestError("encrypted", "PDF is encrypted; provide a decrypted copy")
        pages = [page.extract_text() or "" for page in reader.pages]
        info = reader.metadata
    except IngestError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise IngestError("broken_pdf", f"cannot read PDF: {exc}") from exc
    parts, spans, cursor = [], [], 0
    for page_text in pages:
        # Normalized page by page (NFC never composes across the "\n\n" joints), so
        # the page offsets hold in the document's normalized text.
        cleaned = normalize_text(page_text).strip()
        spans.append([cursor, cursor + len(cleaned)])
        parts.append(cleaned)
        cursor += len(cleaned) + 2  # the "\n\n" joining pages
    text = "\n\n".join(parts)
    if not text.strip():
        raise IngestError("empty", "PDF has no text layer (scanned images need OCR first)")
    title = str(getattr(info, "title", "") or "") if info else ""
    return title, text, {"pages": spans}
