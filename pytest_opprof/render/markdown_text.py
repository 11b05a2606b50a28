"""Names and notes made safe for the Markdown report, which GitHub renders (step summaries,
pull-request comments) and whose raw HTML it passes through, links and images included.

A test id, an op or a scope name is whatever the project wrote: a parametrize id
``x</summary></details><a href=...>`` or a directory name with a newline must show as
written and never become markup.  Each place a name goes has its own rules:

* :func:`md_code`: a code span (a table cell, or a line of text), where Markdown and HTML
  are not interpreted, fenced by more backticks than the name holds;
* :func:`md_text`: plain Markdown text (notes, the machine), with every character that
  could start markup, a link or an autolink escaped;
* :func:`html_text`: text inside a raw HTML block (``<details><summary>``), HTML-escaped.

Characters that would break a line or the text's direction (line breaks, other control
characters, lone surrogates, bidirectional overrides) are shown as Python escapes
(``\\n``, ``\\x00``, ``\\u202e``) everywhere: a line break ends a table row, a blank line
an HTML block, and either lets the rest of a name be read as Markdown.  A name longer than
:data:`NAME_LIMIT` characters is cut (saying how much): the report has a size limit.
"""

from __future__ import annotations

import html
import re
import unicodedata

NAME_LIMIT = 500
"""Characters of one name shown in the Markdown report; the JSON report has it whole."""
TEXT_LIMIT = 2000
"""Characters of one note (which may quote names) shown in the Markdown report."""

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_SHOWN = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Markdown's inline markup and GitHub's autolinks: emphasis, code, links and images,
# raw HTML and entities, strikethrough, table cells, and the ``scheme://`` of a URL.
_MARKUP = re.compile(r"([\\`*_\[\]<>&|~]|:(?=/))")
_WWW = re.compile(r"(www)\.", re.IGNORECASE)


def _visible(ch: str) -> str:
    shown = _SHOWN.get(ch)
    if shown is not None:
        return shown
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _hidden(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in _BIDI


def one_line(text: str, limit: int = NAME_LIMIT) -> str:
    """``text`` with characters that break a line or its direction shown as escapes, cut to
    ``limit`` characters."""
    cut = ""
    if len(text) > limit:
        cut = f"… ({len(text) - limit:,} more characters)"
        text = text[:limit]
    if any(_hidden(ch) for ch in text):
        text = "".join(_visible(ch) if _hidden(ch) else ch for ch in text)
    return text + cut


def md_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` as plain Markdown text that renders as written: every character that could
    start markup is backslash-escaped (any ASCII punctuation may be, CommonMark), and
    ``www.`` is broken so that GitHub does not make it a link."""
    shown = one_line(text, limit)
    return _WWW.sub(r"\1\\.", _MARKUP.sub(r"\\\1", shown))


def md_code(text: str, *, in_table: bool = False) -> str:
    """``text`` as a Markdown code span that shows it as written; ``in_table``: in a table
    cell, where a ``|`` would end the cell (GitHub reads ``\\|`` there as ``|``, also in
    code)."""
    shown = one_line(text)
    if in_table:
        shown = shown.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space between it and the fence;
    # one space each side is taken off again (and a name with spaces at both ends keeps
    # them, for the same reason).
    if shown.startswith(("`", " ")) or shown.endswith(("`", " ")):
        shown = f" {shown} "
    return f"{fence}{shown}{fence}"


def html_text(text: str) -> str:
    """``text`` inside raw HTML in the Markdown (``<summary>``): HTML-escaped, on one line."""
    return html.escape(one_line(text), quote=True)


def utf16_units(text: str) -> int:
    """The length of ``text`` in UTF-16 code units, as GitHub's limits may count it (a
    character beyond the Basic Multilingual Plane, most emoji, is two)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
