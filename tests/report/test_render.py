from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hqval.admission import admit_runs, load_policy
from hqval.matrix import load_arches
from hqval.report.render import build, render_checkpoint, render_html, write_report
from hqval.result import Row, Status
from hqval.results import store

from ..conftest import (  # type: ignore[import-not-found]
    RunFactory,
    evidence,
    live_markup,
    table_cells,
)

CAPS = {n: a for n, a in load_arches().items() if n in ("gfx1010", "gfx1100", "gfx1201")}


class _Doc(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.tables: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "table" and a.get("id"):
            self.tables.append(str(a["id"]))
        if a.get("href"):
            self.hrefs.append(str(a["href"]))
        if a.get("src"):
            self.srcs.append(str(a["src"]))



def _report(make_run: RunFactory, fail: bool = True) -> tuple[str, str]:
    runs = [store.load(make_run(evidence("gfx1100", "hip"), arch="gfx1100", backend="hip",
                                host="lab-a")),
            store.load(make_run(evidence("gfx1201"), arch="gfx1201", host="lab-b")),
            store.load(make_run(evidence("gfx1010", fail="reference_parity" if fail else None),
                                arch="gfx1010", host="lab-b"))]
    adm, _ = admit_runs(runs, arches=CAPS)
    data = build(runs, adm)
    return render_html(data), render_checkpoint(data)


def test_html_is_self_contained_and_every_link_resolves(make_run: RunFactory) -> None:
    html, _ = _report(make_run)
    doc = _Doc()
    doc.feed(html)
    assert "admission-table" in doc.tables
    assert doc.srcs == []  # no external images or scripts
    assert not re.search(r"""(href|src)=["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html
    internal = [h for h in doc.hrefs if h.startswith("#")]
    assert internal and all(h[1:] in doc.ids for h in internal), \
        [h for h in internal if h[1:] not in doc.ids]
    assert doc.hrefs == internal


def test_html_admission_matrix_colours_and_evidence(make_run: RunFactory) -> None:
    html, _ = _report(make_run)
    # each status cell carries its status as a class and links to the cell's evidence
    cells = re.findall(r'<td class="admit st (\w+)"[^>]*><a href="#([^"]+)">(\w+)</a>', html)
    assert len(cells) == 3 * len(load_policy().paths)  # a cell per arch and policy path
    assert all(cls == text for cls, _, text in cells)
    assert {t for *_, t in cells} >= {"measured", "emulated", "fallback", "rejected"}
    # the rejected cell names its failing row, and that row is in the check table
    assert 'href="#r-reference_parity-gemv_mq4g256v2_r1-gfx1010-emu"' in html
    assert '<tr id="r-reference_parity-gemv_mq4g256v2_r1-gfx1010-emu">' in html
    for section in ("Checks", "ISA audit", "Mutant kill matrix", "Timing", "Provenance",
                    "Not claimed here"):
        assert f">{section}</h2>" in html
    assert "<svg" in html and "predicted 1.0100" in html  # prediction beside measurement
    assert "lab-a" in html and "lab-b" in html  # provenance of both machines
    # the kill matrix collapses to one row per mutant, arches grouped by outcome; each
    # arch is an anchor whose hover gives every check's result there
    row = re.search(r"<tr><td><code>mut_halves_swapped</code>.*?</tr>", html)
    assert row, "no kill-matrix row for the mutant"
    assert '<span class="pass">killed by reference_parity</span> on ' in row.group(0)
    assert "halves swapped" in row.group(0)  # what the mutant breaks
    assert re.search(r'<span id="r-mutant-mut_halves_swapped-gfx1100-hip" title="[^"]*'
                     r'bit_identity: pass; reference_parity: killed">gfx1100</span>',
                     row.group(0)), row.group(0)
    assert "audit_no_spill</th>" not in html  # no column per check: it fits the screen


def test_each_check_states_its_derivation_once(make_run: RunFactory) -> None:
    html, _ = _report(make_run)
    # 3 arches x several kernels share one derivation: it is written once per check
    for check in ("reference_parity", "padded_offset"):
        section = html.split(f"<h3>{check}</h3>", 1)[1].split("<h3>", 1)[0]
        assert section.count("f32 accumulation over K=4096: 1e-4 relative") == 1
    assert "<th>derivation</th>" not in html


def _timing_rows() -> list[Row]:
    """One sm_90 group: a noisy A/A control (so its candidate is noisy too), and a second
    group whose candidate is slower than its gate."""
    samples = [[10.0 + 0.1 * (i % 5) for i in range(20)], [10.4 + 0.1 * (i % 5)
                                                           for i in range(20)]]

    def row(check: str, kernel: str, status: Status, ratio: float, tol: float,
            msg: str, **d: object) -> Row:
        return Row("timing", check, kernel, "sm_90", "cuda", status, measured=ratio,
                   tolerance=tol, message=msg,
                   details={"mode": "cold", "rows_per_block": 1, "samples_a": samples,
                            "samples_b": samples[::-1],
                            "stats": {"ratio": ratio, "ci_low": ratio - 0.002,
                                      "ci_high": ratio + 0.002,
                                      "run_ratios": [ratio - 0.02, ratio + 0.02]}, **d})

    return [row("timing_aa_cold", "gemv_hfq4g256_r1@4096x5120", Status.ERROR, 1.0061, 0.005,
                "A/A 1.0061; noisy after 3 tries", tries=[1.007, 1.0065, 1.0061]),
            row("timing_cold", "gemv_mq4c_r1@4096x5120", Status.ERROR, 1.02, 1.01,
                "1.02; noisy run: not trusted (A/A 1.0061)"),
            row("timing_aa_cold", "gemv_hfq4g256_r1@5120x5120", Status.PASS, 1.001, 0.005,
                "A/A 1.001"),
            row("timing_cold", "gemv_mq4c_r1@5120x5120", Status.FAIL, 1.03, 1.01,
                "1.03; significantly slower than its qt=6 baseline")]


def test_noisy_cells_and_why_are_on_the_page(make_run: RunFactory) -> None:
    run = store.load(make_run(_timing_rows(), arch="sm_90", backend="cuda"))
    adm, _ = admit_runs([run], arches=CAPS)
    data = build([run], adm)
    html = render_html(data)
    noisy = html.split('<h3 id="noisy">', 1)[1].split('id="plot-', 1)[0]
    assert "2 cell(s) are noisy (1 A/A control(s), 1 v2/v1 cell(s))" in noisy
    assert "timing_aa_cold[gemv_hfq4g256_r1@4096x5120|sm_90|cuda]" in noisy
    assert "measured 1.0061, outside 1 ± 0.005 after 3 tries" in noisy
    assert "its group&#39;s A/A control was noisy" in noisy
    assert noisy.count('class="plot dist"') == 2  # the samples of each, side by side
    # the slow cell is not listed as noisy, and is drawn differently
    assert "gemv_mq4c_r1@5120x5120" not in noisy
    assert 'class="mark fail"' in html and 'class="mark noisy"' in html
    assert 'class="plot heatmap"' in html
    assert "Cells: ." not in html and "No admission cells" in html
    assert "admission-table" not in html  # no empty matrix when there are no cells
    _, md = html, render_checkpoint(data)
    assert "## Noisy cells (not trusted either way)" in md
    assert "plots/heatmap-qt45.svg" in md and "plots/timing-ratios.svg" in md


def test_checkpoint_markdown_shape(make_run: RunFactory) -> None:
    _, md = _report(make_run)
    lines = md.splitlines()
    # the title states the finding: per format and path, rejected first
    assert lines[0].startswith("# qt=44 decode rejected on gfx1010, measured on gfx1100, "
                               "emulated on gfx1201; ")
    assert "; qt=44 prefill rejected on gfx1010" in lines[0]
    header = "\n".join(lines[1:10])
    for key in ("Date", "Lifecycle", "Fixture", "Host", "Commit"):
        assert f"- **{key}:**" in header
    assert "lab-a, lab-b" in header
    assert "## Admission" in md and "| gfx1100 | measured |" in md
    assert "## Rejected cells" in md
    assert "reference_parity[gemv_mq4g256v2_r1\\|gfx1010\\|emu]" in md  # pipes escaped
    not_claimed = md.split("## Not claimed here", 1)[1]
    assert "Emulated is not measured: gfx1010" in not_claimed
    assert "Untested" in not_claimed
    assert "\n\n\n" not in md
    assert not re.search(r"[^\n]\n(## |\| )", md.replace("|\n|", "")), "needs blank lines"


def test_checkpoint_without_failures(make_run: RunFactory) -> None:
    _, md = _report(make_run, fail=False)
    assert md.startswith("# qt=44 decode emulated on 2 arches, measured on gfx1100;")
    assert "rejected" not in md.splitlines()[0]
    assert "## Rejected cells" not in md


def test_checkpoint_escapes_what_the_rows_carry(make_run: RunFactory) -> None:
    """A kernel name, message and host with markup in them stay text in checkpoint.md:
    no table gains a column, no link, image or HTML appears."""
    evil = "k|x`y <img src=x onerror=alert(1)> [click](https://evil.example)"
    rows = [*evidence("gfx1100", fail="reference_parity"),
            Row("check", "bit_identity", evil, "sm_90", "emu", Status.FAIL,
                message=f"wrong | {evil}")]
    run = store.load(make_run(rows, arch="gfx1100", host=f"lab {evil}"))
    adm, _ = admit_runs([run], arches=CAPS)
    md = render_checkpoint(build([run], adm))
    assert "## Failing outside admission" in md and "## Rejected cells" in md
    # the only markup is the report's own figure links (fixed names under plots/)
    figures = [ln for ln in md.splitlines() if ln.startswith("![")]
    assert figures and all(re.fullmatch(r"!\[[^\]`]*\]\(plots/[\w.-]+\.svg\)", f)
                           for f in figures), figures
    assert live_markup("\n".join(ln for ln in md.splitlines() if ln not in figures)) == []
    for table in re.findall(r"(?m)(^\|.*\n)+", md + "\n"):
        lines = table.splitlines()
        assert len({table_cells(line) for line in lines}) == 1, lines


def test_write_report_files(make_run: RunFactory, tmp_path: Path) -> None:
    run = store.load(make_run(evidence("gfx1100"), arch="gfx1100"))
    adm, _ = admit_runs([run], arches=CAPS)
    paths = write_report(build([run], adm), tmp_path / "out")
    assert sorted(p.name for p in paths.values()) == ["admission.json", "checkpoint.md",
                                                      "plots", "report.html"]
    assert all(p.stat().st_size > 0 for p in paths.values())
    # every plot linked from checkpoint.md is a file beside it, and valid SVG
    md = paths["markdown"].read_text()
    linked = re.findall(r"\]\((plots/[^)]+\.svg)\)", md)
    assert linked and all((tmp_path / "out" / p).is_file() for p in linked)
    for p in linked:
        ET.parse(tmp_path / "out" / p)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _headless(browser: str, profile: Path) -> list[str]:
    return [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", f"--user-data-dir={profile}", "--enable-logging=stderr",
            "--v=0", "--log-level=0"]


def _dump_dom(browser: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and every console message (the report logs nothing, so
    any message - console.error, an uncaught exception, a blocked load - is a defect)."""
    res = subprocess.run([*_headless(browser, profile), "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln]


def _need_chromium() -> str:
    browser = _chromium()
    if browser is None:
        pytest.skip("needs the chromium binary (apt-get install -y chromium); .ci/run "
                    "installs it")
    return browser


# Injected into a copy of the page by the test only: after the report's own script ran,
# record how far the page scrolls sideways and which elements stick out.
_MEASURE = """<script>
(function () {
  var w = document.documentElement.clientWidth, out = [];
  document.querySelectorAll("body *").forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.right > w + 1 && out.length < 5) out.push(e.tagName + "." + e.className + ":" + r.right);
  });
  document.body.setAttribute("data-overflow",
      String(document.documentElement.scrollWidth - w) + " " + out.join(" | "));
  document.body.setAttribute("data-scroll-width",
      String(document.documentElement.scrollWidth) + " " + String(document.body.scrollWidth));
  document.body.setAttribute("data-height", String(document.documentElement.scrollHeight));
})();
</script></body>"""

# Keeps only the page from a section's heading down, so a screenshot shows that view.
_FROM = """<script>(function () {{ var t = document.getElementById("{0}");
var n = document.body.firstElementChild;
while (n && n !== t && !n.contains(t)) {{ var x = n.nextElementSibling; n.remove(); n = x; }}
}})();</script></body>"""

VIEWS = ("summary", "admission", "baseline", "checks", "mutants", "timing", "noisy",
         "plot-timing-ratios")


def _full_report(make_run: RunFactory) -> str:
    """Three arches (a rejected cell, mutants, hip timing) and an sm_90 run whose timing
    has a noisy group and a slow cell: every view of the report has something to draw."""
    runs = [store.load(make_run(evidence("gfx1100", "hip"), arch="gfx1100", backend="hip")),
            store.load(make_run(evidence("gfx1010", fail="reference_parity"), arch="gfx1010")),
            store.load(make_run([*_timing_rows(), *_r2_rows()], arch="sm_90", backend="cuda"))]
    base = store.load(make_run(evidence("gfx1100", "hip", fail="bit_identity"),
                               arch="gfx1100", backend="hip", name="base"))
    adm, cmp = admit_runs(runs, arches=CAPS, baseline=[base])
    from hqval.admission import load_policy

    return render_html(build(runs, adm, cmp, policy=load_policy()))


def _fits_1400(dom: str) -> None:
    """Nothing scrolls sideways in a 1400 px window: the document is no wider than it."""
    overflow = re.search(r'data-overflow="(-?\d+) ?([^"]*)"', dom)
    widths = re.search(r'data-scroll-width="(\d+) (\d+)"', dom)
    assert overflow and widths, "the measuring script did not run"
    assert int(overflow.group(1)) <= 0, f"scrolls sideways by {overflow.group(1)} px: " \
        f"{overflow.group(2)}"
    assert int(widths.group(1)) <= 1400 and int(widths.group(2)) <= 1400, widths.group(0)


def _r2_rows() -> list[Row]:
    """The 5120x5120 cold cell again at R=2: the run swept rows per block."""
    return [Row(r.kind, r.check, r.kernel.replace("_r1@", "_r2@"), r.arch, r.backend,
                Status.PASS, measured=0.995, tolerance=r.tolerance,
                details={**r.details, "rows_per_block": 2, "median_us_a": 10.0,
                         "median_us_b": 9.95})
            for r in _timing_rows()[2:]]


def _shot(browser: str, page: Path, png: Path, profile: Path, height: int = 1200) -> None:
    res = subprocess.run([*_headless(browser, profile), f"--window-size=1400,{height}",
                          "--hide-scrollbars", f"--screenshot={png}", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0 and png.stat().st_size > 10_000, res.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.chromium
def test_html_in_headless_chromium(make_run: RunFactory, tmp_path: Path) -> None:
    """Open the report in a real headless Chromium 1400 px wide: the admission table and
    every plot render as SVG, the inline script ran, the console shows nothing, nothing
    scrolls sideways; a screenshot of each view is saved."""
    browser = _need_chromium()
    html = _full_report(make_run)
    page = tmp_path / "report.html"
    page.write_text(html.replace("</body>", _MEASURE))
    res = subprocess.run([*_headless(browser, tmp_path / "p"), "--window-size=1400,1000",
                          "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln] == []
    assert '<table id="admission-table">' in dom
    assert dom.count('class="admit st ') == 2 * len(load_policy().paths)
    assert 'data-ready="1"' in dom  # the report's inline script ran to its end
    for plot in ("plot margins", "plot heatmap", "plot dist", "plot sweep"):
        assert f'<svg xmlns="http://www.w3.org/2000/svg" class="{plot}' in dom, plot
    assert dom.count("<svg") >= 6
    assert re.search(r'<details class="cmp" id="baseline-status-flips" open', dom)
    _fits_1400(dom)
    keep = os.environ.get("HQVAL_SCREENSHOT_DIR")  # CI keeps them as artifacts
    for view in VIEWS:
        assert f'id="{view}"' in html, view
        one = tmp_path / f"{view}.html"
        one.write_text(html.replace("</body>", _FROM.format(view)))
        png = tmp_path / f"report-{view}.png"
        _shot(browser, one, png, tmp_path / "p")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(png, Path(keep) / png.name)


@pytest.mark.chromium
def test_the_overflow_measure_catches_a_wide_page(tmp_path: Path) -> None:
    browser = _need_chromium()
    page = tmp_path / "wide.html"
    page.write_text('<html><body><table><tr><td style="white-space:nowrap">'
                    + "x" * 400 + "</td></tr></table></body></html>".replace("</body>",
                                                                             _MEASURE))
    res = subprocess.run([*_headless(browser, tmp_path / "p"), "--window-size=1400,1000",
                          "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    m = re.search(r'data-overflow="(-?\d+)', res.stdout)
    assert m and int(m.group(1)) > 0, res.stdout[-500:]
    with pytest.raises(AssertionError, match="scrolls sideways"):
        _fits_1400(res.stdout)


@pytest.mark.chromium
def test_chromium_console_check_catches_a_script_error(tmp_path: Path) -> None:
    browser = _need_chromium()
    page = tmp_path / "bad.html"
    page.write_text('<html><body><table id="admission-table"></table>'
                    "<script>undefinedFunction();</script></body></html>")
    _, console = _dump_dom(browser, page, tmp_path / "p")
    assert any("Uncaught ReferenceError" in ln for ln in console), console


def test_checkpoint_for_a_run_outside_admission(make_run: RunFactory) -> None:
    """A cuda sm_90 run has no admission cells; its failures still head the checkpoint."""
    from hqval.result import Row, Status

    rows = [Row("timing", "timing_cold", "gemv_mq4g256v2_r1@5120x5120", "sm_90", "cuda",
                Status.FAIL, measured=1.024, details={"stats": {"ratio": 1.024}})]
    run = store.load(make_run(rows, arch="sm_90", backend="cuda"))
    adm, _ = admit_runs([run], arches=CAPS)
    md = render_checkpoint(build([run], adm))
    assert md.startswith("# v2/v1 timing on cuda:sm_90: 1 slower than their gate (sm_90, "
                         "outside admission")
    assert "No admission cells" in md
    assert "- `timing_cold[gemv_mq4g256v2_r1@5120x5120|sm_90|cuda]`" in md
    assert "\n\n\n" not in md
    # failing outside admission; its timing verdict was stored without its samples, so
    # the run is damaged as well (exit 2)
    assert adm.outside and adm.damage and adm.exit_code == 2


def test_the_report_shows_the_gate_admission_applied_not_the_stored_one(
        make_run: RunFactory) -> None:
    """A row stored as failing its measuring-time 1.01 bound is re-judged by the policy in
    use (ratio_max 1.05), as admission does: the report draws 1.05 and says pass; with no
    policy it shows the row as stored."""
    from hqval.admission import load_policy

    a = [[10.0 + 0.01 * (i % 7) for i in range(40)] for _ in range(3)]
    b = [[x * 1.03 for x in run] for run in a]
    row = Row("timing", "timing_cold", "gemv_mq4g256v2_r1@4096x5120", "gfx1100", "hip",
              Status.FAIL, measured=1.03, tolerance=1.01, message="1.03; slower",
              details={"mode": "cold", "rows_per_block": 1, "samples_a": a, "samples_b": b,
                       "stats": {"ratio": 1.03}})
    run = store.load(make_run([*evidence("gfx1100", "hip"), row], arch="gfx1100",
                              backend="hip"))
    adm, _ = admit_runs([run], arches=CAPS)
    stored = [c for c in build([run], adm).timing() if c.row.check == "timing_cold"]
    judged = [c for c in build([run], adm, policy=load_policy()).timing()
              if c.row.check == "timing_cold"]
    assert [(c.gate, c.verdict) for c in stored] == [(1.01, "fail")]
    assert [(c.gate, c.verdict) for c in judged] == [(1.05, "pass")]
    assert judged[0].gate_source == "formats.mq4g256v2.paths.decode.timing.cold"


CHECKPOINTS = Path(__file__).resolve().parents[2] / "reports" / "checkpoints"


def _checkpoint_report(*paths: str) -> str:
    from hqval.admission import judge, load_policy
    from hqval.results.store import load_runs

    runs = load_runs([CHECKPOINTS / p for p in paths])
    return render_html(build(runs, judge(runs, load_policy()).admission, policy=load_policy()))


def test_the_committed_checkpoint_runs_show_the_views() -> None:
    """The H200 sweep run and the nine-arch emulator matrix, as committed."""
    sweep = _checkpoint_report("2026-11-29-h200-gemv-d/sweep/run")
    for view in ('class="plot heatmap"', 'class="plot sweep"', 'class="plot dist"',
                 'id="plot-timing-ratios"', 'id="noisy"'):
        assert view in sweep, view
    # The noisy A/A group, and cold R=4 4096x17408, whose runs' ratios (1.044, 1.047,
    # 1.054) put the CI of their geometric mean, [1.0456, 1.0507], across ratio_max 1.05;
    # and cold R=4 17408x5120, whose A/A control (stored as a pass at 0.9967, the pooled
    # median it was measured with) is 0.9948 under the cell ratio judge recomputes it with:
    # outside 1 +- 0.005, so its group is noisy too.
    assert "in 3 group(s) of one mode, R and shape" in sweep
    assert "outside 1 ± 0.005 after 3 tries" in sweep
    emu = _checkpoint_report("2026-11-29-emu-matrix")
    assert 'class="plot margins"' in emu and 'id="mutant-table"' in emu
    assert emu.count("<h3>bit_identity</h3>") == 1
    title = re.search(r"<h1>(.*?)</h1>", emu)
    assert title and title.group(1).startswith("qt=44 decode emulated on 9 arches")


@pytest.mark.chromium
def test_the_committed_checkpoint_reports_fit_1400_px(tmp_path: Path) -> None:
    browser = _need_chromium()
    for name, paths in (("emu", ["2026-11-29-emu-matrix"]),
                        ("sweep", ["2026-11-29-h200-gemv-d/sweep/run"])):
        page = tmp_path / f"{name}.html"
        page.write_text(_checkpoint_report(*paths).replace("</body>", _MEASURE))
        res = subprocess.run([*_headless(browser, tmp_path / "p"), "--window-size=1400,1000",
                              "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=180, check=False)
        assert res.returncode == 0, res.stderr[-2000:]
        assert [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln] == []
        _fits_1400(res.stdout)


def test_history_draws_hqval_historys_step_fit(make_run: RunFactory) -> None:
    """Five nights of one cell, 1.00 for three and 1.06 for two: the history panel carries
    hqval.timing.history's fitted levels and marks the step as a confirmed regression."""
    import json

    from hqval.admission import load_policy

    paths = []
    for night, ratio in enumerate((1.0, 1.0, 1.0, 1.06, 1.06)):
        a = [[10.0 + 0.01 * ((i + night) % 7) for i in range(40)] for _ in range(3)]
        b = [[x * ratio for x in run] for run in a]
        row = Row("timing", "timing_cold", "gemv_mq4g256v2_r1@4096x5120", "gfx1100", "hip",
                  Status.PASS, measured=ratio, tolerance=1.05,
                  details={"mode": "cold", "rows_per_block": 1, "samples_a": a,
                           "samples_b": b, "stats": {"ratio": ratio}})
        p = make_run([row], arch="gfx1100", backend="hip", name=f"night{night}")
        env = json.loads((p / "envelope.json").read_text())
        env["date"] = f"2026-12-0{night + 1}T02:17:00+00:00"
        (p / "envelope.json").write_text(json.dumps(env))
        paths.append(p)
    runs = [store.load(p) for p in paths]
    adm, _ = admit_runs(runs, arches=CAPS)
    html = render_html(build(runs, adm, policy=load_policy()))
    panel = html.split('class="plot history"', 1)[1].split("</svg>", 1)[0]
    assert 'class="fit"' in panel
    (step,) = re.findall(r'<path class="step ([a-z]+)"[^>]*fill="([^"]+)"><title>([^<]*)', panel)
    assert step[0] == "regression" and step[1] == "#c0392b", step
    assert "2026-12-04" in step[2] or "night3" in step[2]
    # without a policy there is no fit to draw, only the nights
    plain = render_html(build(runs, adm)).split('class="plot history"', 1)[1]
    assert 'class="fit"' not in plain.split("</svg>", 1)[0]


def test_checkpoint_prints_provenance_waivers_and_not_gating(make_run: RunFactory) -> None:
    rows = [*evidence("gfx1100"),
            Row("audit", "audit_no_spill", "gemv_mq4g256v2_r1", "gfx1100", "isa",
                Status.SKIPPED, message="waived by the manifest",
                details={"waived": "engine | build `flag`", "waived_status": "fail"})]
    run = store.load(make_run(rows, arch="gfx1100"))
    run.envelope["provenance"] = {
        "manifest": "/t/kernels.yaml", "manifest_sha256": "ab" * 32, "kernel_tree": "/t",
        "kernel_tree_commit": "c0ffee", "kernel_tree_dirty": True,
        "files": {"gemv.hip": "12" * 32, "inc/<x>.h": "34" * 32}}
    adm, _ = admit_runs([run], arches=CAPS)
    md = render_checkpoint(build([run], adm), plot_dir=None)  # no links to plot files
    assert "## Provenance" in md and "`c0ffee` (dirty: the tree has uncommitted edits)" in md
    assert f"| `gemv.hip` | `{'12' * 32}` |" in md
    assert "## Audit waivers (from the manifest)" in md and "no_spill" in md
    assert live_markup(md) == []
    for table in re.findall(r"(?m)(^\|.*\n)+", md + "\n"):
        lines = table.splitlines()
        assert len({table_cells(line) for line in lines}) == 1, lines


def test_every_cell_lists_its_kernels_with_their_own_status(make_run: RunFactory) -> None:
    """The rejected gfx1010 qt=44 decode cell names the kernel that failed, with that
    kernel's own status, in the HTML evidence section and in the checkpoint."""
    html, md_text = _report(make_run)
    # a rejected cell's evidence is open; a passing one is collapsed
    section = re.search(r'<details class="cell" id="r-admit-qt44-decode-gfx1010" open>.*?'
                        r'</details>', html, re.S)
    assert section, "no open evidence section for the rejected gfx1010 qt=44 decode"
    assert re.search(r'<details class="cell" id="r-admit-qt44-decode-gfx1100">', html)
    assert "kernels behind this cell" in section.group(0)
    assert re.search(r"<code>gemv_mq4g256v2_r1</code>: <span class=\"(\w+)\">(?!passed)",
                     section.group(0)), section.group(0)
    assert "Kernels behind each cell" in md_text
    line = next(ln for ln in md_text.splitlines() if ln.startswith("| gfx1010 qt=44 decode"))
    assert "gemv_mq4g256v2_r1" in line and "rejected" in line


def _baseline_report(make_run: RunFactory, evil: str = "") -> str:
    """A night whose bit_identity cell flipped to fail against the night before, and one
    cell (named ``evil``, with markup in it) the new night lost."""
    extra = [Row("check", "bit_identity", evil, "gfx1100", "emu", Status.PASS,
                 message="ok")] if evil else []
    base = store.load(make_run([*evidence("gfx1100"), *extra], name="base"))
    new = store.load(make_run(evidence("gfx1100", fail="bit_identity"), name="new"))
    adm, cmp = admit_runs([new], arches=CAPS, baseline=[base])
    assert cmp is not None
    return render_html(build([new], adm, cmp))


def test_the_comparison_is_html_sections_not_markdown_in_a_pre(make_run: RunFactory) -> None:
    evil = "k|x`y <img src=x onerror=alert(1)> **bold** [click](https://evil.example)"
    html = _baseline_report(make_run, evil)
    section = html.split('<h2 id="baseline">', 1)[1].split("<h2 ", 1)[0]
    assert "<pre>" not in html and "###" not in section and "| --- |" not in section
    flips = re.search(r'<details class="cmp" id="baseline-status-flips" open>.*?</details>',
                      section, re.S)
    assert flips, section[:2000]
    assert "<h3>status flips (1)</h3>" in flips.group(0)
    # the flipped cell links to its row on the page; the vanished one (no row) does not
    assert ('<a href="#r-bit_identity-gemv_mq4g256v2_r1-gfx1100-emu"><code>bit_identity['
            'gemv_mq4g256v2_r1|gfx1100|emu]</code></a>') in flips.group(0)
    assert '<b class="fail">REGRESSION</b>' in flips.group(0)
    missing = re.search(r'id="baseline-missing".*?</details>', section, re.S)
    assert missing and "<code>bit_identity[k|x`y &lt;img src=x onerror=alert(1)&gt; " \
        "**bold** [click](https://evil.example)|gfx1100|emu]</code>" in missing.group(0)
    assert "<img" not in html and 'href="https://evil' not in html
    # the summary at the top counts the regressions and links to the sections
    top = html.split('<h2 id="admission">', 1)[0]
    assert re.search(r'<a href="#baseline">Since the baseline</a> \([^)]*\): '
                     r"<b>2 regression\(s\)</b>", top), top
    assert '<a href="#baseline-status-flips">status flips 1</a>' in top
    doc = _Doc()
    doc.feed(html)
    dangling = [h for h in doc.hrefs if h.startswith("#") and h[1:] not in doc.ids]
    assert dangling == []


def test_timing_changes_share_their_common_notes_once() -> None:
    from hqval.report.data import comparison_view
    from hqval.results.compare import Change, Comparison, Ratio, Section

    r = Ratio(1.0, 0.99, 1.01)
    common = "absolute time not judged: the runs do not both name their device"
    cmp = Comparison("a", "b", (
        Change("t1", "timing", Section.WORSE, "", "", True, r, r, r,
               note=f"CI widened by the A/A error 0.28%; {common}"),
        Change("t2", "timing", Section.NOISY, "", "", False, r, r, r, note=common),
        Change("p1", "parity", Section.FLIPPED, "pass", "fail", True, note="wrong")))
    view = comparison_view(cmp)
    assert view.shared_notes == (common,)
    notes = {c.identity: n for s in view.sections for c, n in s.changes}
    assert notes == {"t1": "CI widened by the A/A error 0.28%", "t2": "", "p1": "wrong"}
    assert [s.slug for s in view.sections] == ["baseline-worse", "baseline-noisy",
                                               "baseline-status-flips"]


def test_the_summary_comes_first_and_names_what_needs_a_look(make_run: RunFactory) -> None:
    html, _ = _report(make_run)
    body = html.split("<body>", 1)[1]
    assert body.index('<h2>Summary</h2>') < body.index('<h2 id="admission">')
    assert body.index('<h2>Summary</h2>') < body.index("<table")
    top = body.split('<h2 id="admission">', 1)[0]
    assert 'Admission exit status <b>1</b>' in top
    assert '<span class="rejected">rejected</span>: <a href="#r-admit-qt44-decode-gfx1010">' \
        in top
    assert ('<a href="#r-reference_parity-gemv_mq4g256v2_r1-gfx1010-emu"><code>'
            'reference_parity[gemv_mq4g256v2_r1|gfx1010|emu]</code></a>') in top


def test_rows_are_listed_in_a_stable_order_not_as_workers_finished(
        make_run: RunFactory) -> None:
    """The same rows written in two orders (xdist workers finish in any order) give the
    same page, each table sorted by check, kernel and arch."""
    import random

    rows = [*evidence("gfx1100"), *[Row(r.kind, r.check, r.kernel, "gfx1201", r.backend,
                                        r.status, message=r.message)
                                    for r in evidence("gfx1100")]]
    pages = []
    for seed in (1, 2):
        shuffled = list(rows)
        random.Random(seed).shuffle(shuffled)
        run = store.load(make_run(shuffled, name=f"order{seed}"))
        adm, _ = admit_runs([run], arches=CAPS)
        html = render_html(build([run], adm))
        html = re.sub(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00", "DATE", html)
        pages.append(html.replace(str(run.path), "RUN"))
    assert pages[0] == pages[1]
    checks = re.findall(r'<tr id="r-(bit_identity-[^"]+)">', pages[0])
    assert len(checks) > 2 and checks == sorted(checks)


def test_numbers_are_rounded_as_a_reader_needs() -> None:
    from hqval.report.numbers import fmt_p, fmt_ratio, fmt_value, readable

    assert fmt_p(1e-99) == "<1e-6" and fmt_p(3.2e-5) == "3.2e-5" and fmt_p(0.194) == "0.19"
    assert fmt_ratio(1.003456) == "1.0035" and fmt_value(1e-4) == "0.0001"
    assert fmt_value(12.0) == "12" and fmt_value(1.23456e-7) == "1.23e-07"
    assert readable("1.0111 [1.0055, 1.0111] p=1.5e-15; 11.65 us") == \
        "1.0111 [1.0055, 1.0111] p<1e-6; 11.65 us"
    assert readable("p=0.094 within") == "p=0.094 within"


def test_no_p_value_is_printed_past_what_it_says(make_run: RunFactory) -> None:
    a = [[10.0 + 0.01 * (i % 7) for i in range(40)] for _ in range(3)]
    row = Row("timing", "timing_cold", "gemv_mq4g256v2_r1@4096x5120", "sm_90", "cuda",
              Status.FAIL, measured=1.03, tolerance=1.01,
              message="1.0300 [1.0290, 1.0310] p=1e-99; slower",
              details={"mode": "cold", "rows_per_block": 1, "samples_a": a,
                       "samples_b": [[x * 1.03 for x in r] for r in a],
                       "stats": {"ratio": 1.03, "mwu_p": 1e-99}})
    run = store.load(make_run([row], arch="sm_90", backend="cuda"))
    adm, _ = admit_runs([run], arches=CAPS)
    html = render_html(build([run], adm))
    assert "1e-99" not in html and "1.000e-99" not in html
    assert "p&lt;1e-6; slower" in html and '<td class="num">&lt;1e-6</td>' in html
    assert "ratio of medians" not in html and "cell_ratio" in html
