from __future__ import annotations

from hqval.admission import Admission, AdmissionStatus, Cell
from hqval.report.data import (
    ReportData,
    anchor,
    finding,
    not_claimed,
    summary,
)
from hqval.report.timing import is_ratio_row
from hqval.result import Row, Status


def _data(*cells: Cell, rows: tuple[Row, ...] = ()) -> ReportData:
    return ReportData((), rows, Admission(tuple(cells), (), 0))


def _cell(arch: str, qt: int, path: str, st: AdmissionStatus) -> Cell:
    return Cell(qt, "f", arch, path, st, (), ())


def test_anchor_is_a_safe_id() -> None:
    assert anchor("bit_identity[k|gfx1100|emu]") == "r-bit_identity-k-gfx1100-emu"


def test_finding_and_summary_come_from_the_cells() -> None:
    d = _data(_cell("gfx1100", 45, "prefill", AdmissionStatus.FALLBACK),
              _cell("gfx1201", 45, "prefill", AdmissionStatus.EMULATED),
              _cell("gfx1010", 44, "decode", AdmissionStatus.REJECTED))
    assert finding(d) == ("qt=44 decode rejected on gfx1010; qt=45 prefill fallback on "
                          "gfx1100, emulated on gfx1201")
    assert summary(d) == ("qt=45 prefill: emulated on gfx1201; fallback on gfx1100. "
                          "qt=44 decode: rejected on gfx1010.")
    assert finding(_data()) == ("no failing cell (no arch, outside admission: reported, "
                              "not admitted)")
    nine = [_cell(f"gfx{i}", 44, "decode", AdmissionStatus.EMULATED) for i in range(9)]
    assert finding(_data(*nine)) == "qt=44 decode emulated on 9 arches"


def test_finding_of_timing_runs_outside_admission_counts_slow_and_noisy() -> None:
    def t(k: str, st: Status, msg: str = "") -> Row:
        return Row("timing", "timing_cold", k + "@4096x5120", "sm_90", "cuda", st,
                   measured=1.02, tolerance=1.01, message=msg, details={"stats": {}})

    rows = (t("a", Status.PASS), t("b", Status.FAIL),
            t("c", Status.ERROR, "noisy run: not trusted"))
    from pathlib import Path

    from hqval.results.store import Run

    d = ReportData((Run(Path("r"), {"device": "H200"}, list(rows)),), rows,
                   Admission((), (), 0))
    assert finding(d) == ("v2/v1 timing on H200: 1 slower than their gate, 1 noisy (not "
                          "trusted), 1 within their gate (sm_90, outside admission: "
                          "reported, not admitted)")


def test_not_claimed_lists_what_was_not_measured() -> None:
    d = _data(_cell("gfx1100", 44, "decode", AdmissionStatus.EMULATED),
              _cell("gfx1100", 44, "prefill", AdmissionStatus.UNSUPPORTED))
    text = "\n".join(not_claimed(d, ["gfx1100", "gfx1201"]))
    assert "Not run at all (no evidence in these runs): gfx1201." in text
    assert "No hardware timing ran" in text
    assert "Emulated is not measured: gfx1100" in text
    assert "Unsupported (not validated): qt=44 prefill on gfx1100" in text
    hw = Row("timing", "ratio", "k", "gfx1100", "hip", Status.PASS, measured=1.0)
    assert "No hardware timing" not in "\n".join(not_claimed(_data(rows=(hw,))))


def test_ratio_cells_and_device_baselines_are_told_apart() -> None:
    ratio = Row("timing", "timing_hot", "k@4096x5120", "sm_90", "cuda", Status.PASS,
                measured=1.003, details={"stats": {"ratio": 1.003}, "gbps_b": 965.0})
    copy = Row("timing", "copy_bandwidth", "device_copy", "sm_90", "cuda", Status.PASS,
               measured=4255.0, details={"median_us": 10.0})
    from pathlib import Path

    from hqval.results.store import Run

    d = ReportData((Run(Path("r"), {}, [ratio, copy]),), (ratio, copy), Admission((), (), 0))
    assert [t.row for t in d.timing()] == [ratio]
    assert d.timing_baselines() == [copy]
    assert is_ratio_row(ratio) and not is_ratio_row(copy)
    assert d.timing()[0].gbps == 965.0


def test_mutant_cells_are_kills_not_failures() -> None:
    from hqval.results.store import Run

    env = {"kernels": {"mut": {"qt": 44, "kind": "gemv", "mutant_of": "k"}}}
    rows = (Row("check", "reference_parity", "mut", "gfx1100", "emu", Status.FAIL),
            Row("check", "reference_parity", "k", "gfx1100", "emu", Status.PASS),
            Row("mutant", "mutant", "mut", "gfx1100", "emu", Status.PASS))
    from pathlib import Path

    d = ReportData((Run(Path("r"), env, list(rows)),), rows, Admission((), (), 0))
    assert d.row_counts() == {"pass": 1}
    assert d.mutant_counts() == {"killed": 1}
    assert [r.kernel for r in d.checks_by_name()["reference_parity"]] == ["k"]


def test_wave64_not_claimed_unless_a_wave64_row_exists() -> None:
    assert any("wave64" in n for n in not_claimed(_data()))
    w64 = Row("audit", "wave_size", "k", "gfx1100", "isa", Status.PASS,
              details={"wave_size": 64})
    assert not any("wave64" in n for n in not_claimed(_data(rows=(w64,))))
