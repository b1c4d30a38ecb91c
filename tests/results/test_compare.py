from __future__ import annotations

import numpy as np

from hqval.result import Row, Status
from hqval.results.compare import Verdict, compare_rows, to_markdown


def _check(kernel: str, status: Status) -> Row:
    return Row("check", "reference_parity", kernel, "gfx1100", "emu", status, measured=1e-6)


def _timing(samples: np.ndarray) -> Row:
    runs = [list(map(float, s)) for s in samples.reshape(3, -1)]
    return Row("timing", "ratio", "gemv_v2", "gfx1100", "hip", Status.PASS,
               measured=1.0, details={"samples_b": runs})


def _stream(seed: int, scale: float, n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # event times: 20 us with 1% jitter and a few slow outliers, like a real clock
    t = 20.0 * scale * (1 + 0.01 * rng.standard_normal(n))
    t[rng.integers(0, n, 5)] *= 1.3
    return t


def test_two_percent_slowdown_is_a_regression() -> None:
    cmp = compare_rows([_timing(_stream(1, 1.0))], [_timing(_stream(2, 1.02))])
    (c,) = cmp.changes
    assert c.verdict is Verdict.REGRESSED
    assert c.change is not None and 0.015 < c.change < 0.025
    assert c.p is not None and c.p < 0.002
    assert cmp.regressions == (c,)


def test_two_percent_speedup_is_an_improvement_not_a_regression() -> None:
    cmp = compare_rows([_timing(_stream(1, 1.0))], [_timing(_stream(2, 0.98))])
    assert cmp.changes[0].verdict is Verdict.IMPROVED
    assert cmp.regressions == ()


def test_same_distribution_is_unchanged() -> None:
    cmp = compare_rows([_timing(_stream(1, 1.0))], [_timing(_stream(2, 1.0))])
    assert cmp.changes[0].verdict is Verdict.UNCHANGED


def test_significant_but_small_shift_is_not_flagged() -> None:
    # 0.5% is real at 3000 samples (p tiny) but under the 1% threshold
    base = _timing(_stream(1, 1.0, 3000))
    new = _timing(_stream(2, 1.005, 3000))
    (c,) = compare_rows([base], [new]).changes
    assert c.p is not None and c.p < 0.002
    assert c.verdict is Verdict.UNCHANGED


def test_large_but_insignificant_change_is_not_flagged() -> None:
    base = Row("timing", "ratio", "k", "gfx1100", "hip", Status.PASS,
               details={"samples_b": [20.0, 25.0, 19.0]})
    new = Row("timing", "ratio", "k", "gfx1100", "hip", Status.PASS,
              details={"samples_b": [21.0, 26.0, 18.5]})
    (c,) = compare_rows([base], [new]).changes
    assert c.change is not None and abs(c.change) >= 0.01
    assert c.verdict is Verdict.UNCHANGED


def test_timing_without_samples_never_significant() -> None:
    base = Row("timing", "ratio", "k", "gfx1100", "hip", Status.PASS, measured=1.0)
    new = Row("timing", "ratio", "k", "gfx1100", "hip", Status.PASS, measured=1.5)
    (c,) = compare_rows([base], [new]).changes
    assert c.verdict is Verdict.UNCHANGED
    assert "significance unknown" in c.note


def test_parity_regression_fix_missing_and_new() -> None:
    base = [_check("a", Status.PASS), _check("b", Status.FAIL), _check("c", Status.PASS)]
    new = [_check("a", Status.ERROR), _check("b", Status.PASS), _check("d", Status.PASS)]
    cmp = compare_rows(base, new, "main", "pr")
    verdicts = {c.identity.split("|")[0]: c.verdict for c in cmp.changes}
    assert verdicts == {"reference_parity[a": Verdict.REGRESSED,
                        "reference_parity[b": Verdict.FIXED,
                        "reference_parity[c": Verdict.MISSING,
                        "reference_parity[d": Verdict.NEW}
    assert {c.verdict for c in cmp.regressions} == {Verdict.REGRESSED, Verdict.MISSING}
    md = to_markdown(cmp)
    assert md.startswith("### hqval compare: `main` -> `pr`")
    assert "2 regression(s)" in md
    assert md.index("regressed") < md.index("fixed")
    assert "| --- |" in md


def test_markdown_says_no_changes() -> None:
    rows = [_check("a", Status.PASS)]
    assert "No changes." in to_markdown(compare_rows(rows, rows))


def test_markdown_escapes_identities_labels_and_notes() -> None:
    from ..conftest import live_markup, table_cells  # type: ignore[import-not-found]

    evil = "k|`x` <b>[a](https://evil.example)</b>"
    base = [_check(evil, Status.PASS)]
    new = [Row("check", "reference_parity", evil, "gfx1100", "emu", Status.FAIL,
               measured=1.0, message=f"note | {evil}")]
    md = to_markdown(compare_rows(base, new, f"main {evil}", "pr"))
    assert "regressed" in md
    assert live_markup(md) == []
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) == 3 and {table_cells(line) for line in rows} == {8}
