from __future__ import annotations

import pytest

from hqval import markdown as md

from .conftest import live_markup, table_cells  # type: ignore[import-not-found]

HOSTILE = ("k|x`y``z <img src=x onerror=alert(1)> [click](https://evil.example) "
           "www.evil.example a@b.example ~~gone~~ *em* _em_ \\| & &lt;")


def test_text_escapes_every_markup_character() -> None:
    out = md.text(HOSTILE)
    assert live_markup(out) == []
    assert "\n" not in md.text("a\nb\r\nc")
    # readable where nothing needs escaping: identifiers, qt ids, colons
    assert md.text("gemv_mq4g256v2_r1 qt=44: ok") == "gemv_mq4g256v2_r1 qt=44: ok"


@pytest.mark.parametrize("start", ["# h", "- item", "+ item", "> quote", "1. one", "7) x",
                                   "=== ", "_em_"])
def test_text_cannot_start_a_block(start: str) -> None:
    out = md.text(start)
    assert out.startswith("\\") or out[1:2] == "\\" or "\\" in out[:3], out


def test_the_scanner_sees_unescaped_markup() -> None:
    # the checker used below must itself say no on raw text
    assert live_markup(HOSTILE)
    assert live_markup("`open")
    assert table_cells("| a | `b|c` |") == 3


@pytest.mark.parametrize("content", ["plain", "a`b", "``", "`lead", "trail`", "x ``` y",
                                     "p|q"])
def test_code_span_holds_any_content(content: str) -> None:
    out = md.code(content)
    fence = out[: len(out) - len(out.lstrip("`"))]
    inner = out[len(fence): len(out) - len(fence)]
    assert out.endswith(fence)
    assert "`" * len(fence) not in inner.replace("`" * (len(fence) + 1), "")
    assert inner.strip(" ") == content.strip(" ") or inner == f" {content} "
    assert live_markup(out) == []


def test_table_escapes_cells_and_keeps_its_columns() -> None:
    t = md.table(["a", "b", "c"], [[HOSTILE, md.code(HOSTILE), 3]], align="llr")
    lines = t.splitlines()
    assert lines[1] == "| --- | --- | ---: |"
    assert all(table_cells(line) == 3 for line in lines), lines
    assert live_markup(t) == []
    assert md.table(["a", "b"], [["x|y", 1]]).splitlines()[2] == "| x\\|y | 1 |"


def test_table_refuses_ragged_rows_and_bad_alignment() -> None:
    with pytest.raises(ValueError, match="2 cells, header 3"):
        md.table(["a", "b", "c"], [[1, 2]])
    with pytest.raises(ValueError, match="align"):
        md.table(["a"], [], align="c")


def test_markdown_values_are_kept_and_others_escaped() -> None:
    assert md.table(["s"], [[md.bold("rejected")]]).splitlines()[2] == "| **rejected** |"
    assert md.table(["s"], [["**x**"]]).splitlines()[2] == "| \\*\\*x\\*\\* |"
    assert md.join([md.code("a"), "[b]"]) == "`a`, \\[b\\]"


def test_links_only_to_anchors_in_the_document() -> None:
    assert md.link("cell [1]", "r-gemv-gfx1100") == "[cell \\[1\\]](#r-gemv-gfx1100)"
    for bad in ("https://evil.example", "#x", "javascript:alert(1)", "", "a b", "../x"):
        with pytest.raises(ValueError, match="not an in-document anchor"):
            md.link("x", bad)
