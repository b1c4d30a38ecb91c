"""The one markdown printer: text and code spans built from row data, tables and in-document
links.

Everything a run's rows carry (identities, kernel names, messages, reasons, labels) is data
from the manifest and the compiler, so it must never become markup: a ``|`` would split a
table row, a backtick would end a code span, and ``[x](url)`` or ``<img src=...>`` would put a
link or HTML into a review comment.  Every markdown the suite writes (checkpoint.md,
``hqval admit``, ``hqval compare``, the matrix and audit tables) goes through these functions.

The escaping follows CommonMark (any ASCII punctuation may be backslash-escaped) and GitHub's
table extension (a ``\\|`` inside a cell, code spans included, is a literal pipe).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Characters that start or end markup anywhere in a line: code, emphasis, links and images,
# raw HTML and entities, strikethrough, and GitHub's extended autolinks (``https://``,
# ``www.``, ``a@b``).  An underscore between two alphanumerics cannot open or close emphasis
# (CommonMark's flanking rules), so ``gemv_mq4g256v2`` stays readable; a parenthesis is
# markup only right after a link's ``]``, which is always escaped, so ``cell(s)`` stays too.
# ``|`` is escaped by ``table``: it splits rows only inside a table, and outside one a
# ``\\|`` in a code span would print its backslash.
_MARKUP = re.compile(r"[\\`*\[\]<>~&@]|:(?=//)|(?<=www)\.|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# ... and at the start of a fragment (which may start a line): headings, lists, quotes.
_LEADING = re.compile(r"^(?:[#+=>-]|\d+(?=[.)]))")
_ANCHOR = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


class Markdown(str):
    """A string that is markdown already (built by ``text``, ``code``, ``link``, ``bold``);
    ``table`` escapes every other value, so forgetting to escape is not possible."""


def _one_line(value: object) -> str:
    return " ".join(str(value).splitlines())


def text(value: object) -> Markdown:
    """``value`` as inline text: every markup character escaped, newlines folded."""
    if isinstance(value, Markdown):
        return value
    s = _MARKUP.sub(lambda m: "\\" + m.group(0), _one_line(value))
    m = _LEADING.match(s)
    if m and m.group(0)[0].isdigit():
        s = s[:m.end()] + "\\" + s[m.end():]  # "1." or "1)" would start an ordered list
    elif m:
        s = "\\" + s
    return Markdown(s)


def bold(value: object) -> Markdown:
    return Markdown(f"**{text(value)}**") if str(value) else Markdown("")


def code(value: object) -> Markdown:
    """``value`` as one code span whatever it contains: the fence is one backtick longer
    than the longest run inside, padded when the content starts or ends with a backtick.
    Content a table cannot hold in a code span is escaped text instead."""
    s = _one_line(value)
    if not s:
        return Markdown("")
    if "\\|" in s:
        # inside a table a backslash before a pipe cannot be written in a code span (the
        # row splitter reads ``\\\\|`` as an escaped backslash and a cell boundary)
        return text(s)
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ")):
        s = f" {s} "
    return Markdown(f"{fence}{s}{fence}")


def link(label: object, anchor: str) -> Markdown:
    """A link to an anchor inside the same document; anything else is refused (a row's
    text must never be able to point a reader at another site)."""
    if not _ANCHOR.fullmatch(anchor):
        raise ValueError(f"markdown link target {anchor!r} is not an in-document anchor")
    return Markdown(f"[{text(label)}](#{anchor})")


def _cell(value: str) -> str:
    # a ``\|`` is a literal pipe in a GFM table cell, code spans included
    return _one_line(value).replace("|", "\\|")


def table(header: Sequence[object], rows: Iterable[Sequence[object]],
          align: str = "") -> str:
    """A GFM table.  A cell that is ``Markdown`` (from ``text``/``code``/``link``/``bold``)
    is kept; any other value is escaped as ``text``; then every pipe is escaped, so no cell
    can add a column or carry markup it was not built with.  ``align`` has one letter per
    column, ``l`` or ``r`` (default: all left)."""
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"markdown table align {align!r} does not fit {len(header)} columns")
    out = ["| " + " | ".join(_cell(text(h)) for h in header) + " |",
           "|" + "".join(" --- |" if a == "l" else " ---: |" for a in align)]
    for row in rows:
        cells = [_cell(text(v)) for v in row]
        if len(cells) != len(header):
            raise ValueError(f"markdown table row has {len(cells)} cells, header "
                             f"{len(header)}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def join(parts: Iterable[object], sep: str = ", ") -> Markdown:
    """Pieces joined into one fragment; a piece that is not ``Markdown`` is escaped."""
    return Markdown(sep.join(text(p) for p in parts))
