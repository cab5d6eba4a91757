"""Reports as a person reads them: the text of widget HTML, with each run it names by the
whole id on its hover title (after checking that what it shows is a short id of it)."""

from __future__ import annotations

import html
import re

_RUN = re.compile(r'<code class="stt-id" title="([^"]+)">([^<]+)</code>')


def text(markup: str) -> str:
    """The text of ``markup``: tags dropped, white space folded, entities read."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup)).strip())


def said(markup: str) -> str:
    """:func:`text`, each run named by its whole id, after checking that the id shown is a
    prefix of it of at least 8 characters and shorter than it."""

    def whole(found: re.Match[str]) -> str:
        full, shown = html.unescape(found.group(1)), html.unescape(found.group(2))
        assert len(shown) >= 8 and full.startswith(shown) and len(shown) < len(full), found
        return full

    return text(_RUN.sub(whole, markup))
