"""``hqval compile``: exit codes, JSON rows, external manifests, --bench."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hqval.cli import main
from hqval.manifest import load_manifest
from hqval.matrix import load_arches

pytestmark = pytest.mark.skipif(shutil.which("clang-19") is None, reason="needs clang-19")

PRELUDE = Path(__file__).resolve().parents[2] / "kernels" / "include"
KERNEL = """\
#include "hqval_prelude.h"
HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(const unsigned char* W, const float* x, float* y,
                                         int M, int K) {
    if (hq_lane() == 0) y[0] = x[0] BODY;
}
"""


def external_tree(tmp_path: Path, body: str = "+ 1.0f") -> Path:
    (tmp_path / "ok.hip").write_text(KERNEL.replace("NAME", "ext_ok").replace("BODY", "+ 1.0f"))
    (tmp_path / "bad.hip").write_text(KERNEL.replace("NAME", "ext_bad").replace("BODY", body))
    manifest = tmp_path / "kernels.yaml"
    manifest.write_text(f"""\
schema: 1
allow_outside_tree: true
include_dirs: [{PRELUDE}]
kernels:
  - {{name: ext_ok, source: ok.hip, qt: 6, kind: gemv, requires: any}}
  - {{name: ext_bad, source: bad.hip, qt: 44, kind: gemv, requires: any, baseline: ext_ok}}
""")
    return manifest


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("HQVAL_CACHE", str(d))
    return d


def test_compile_every_suite_kernel_for_one_arch(tmp_path: Path, cache: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert main(["compile", "--arch", "gfx1201", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    arch = load_arches()["gfx1201"]
    expected = {k.name for k in load_manifest().kernels if k.applies_to(arch)}
    assert {r["kernel"] for r in rows} == expected
    assert {r["status"] for r in rows} == {"pass"}
    assert all(r["identity"] == f"compile[{r['kernel']}|gfx1201|toolchain]" for r in rows)
    assert Path(rows[0]["details"]["code_object"]).is_relative_to(cache)
    assert "code objects built" in capsys.readouterr().out
    # Second run: everything from the cache.
    assert main(["compile", "--arch", "gfx1201", "--json", str(out)]) == 0
    assert all(r["details"]["cached"] for r in json.loads(out.read_text()))


def test_one_broken_kernel_fails_its_row_only(tmp_path: Path, cache: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    manifest = external_tree(tmp_path, body="+ no_such_symbol")
    out = tmp_path / "rows.json"
    assert main(["compile", "--arch", "gfx1030", "--manifest", str(manifest),
                 "--json", str(out)]) == 1
    rows = {r["kernel"]: r for r in json.loads(out.read_text())}
    assert rows["ext_ok"]["status"] == "pass"
    assert rows["ext_bad"]["status"] == "fail"
    assert "no_such_symbol" in rows["ext_bad"]["message"]
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "needle"), [
    (["compile", "--arch", "gfx9000"], "unknown arch gfx9000"),
    (["compile"], "--arch"),
    (["compile", "--arch", "gfx1100", "--manifest", "/no/such/kernels.yaml"],
     "manifest not found"),
])
def test_bad_input_is_exit_2_naming_the_problem(
        argv: list[str], needle: str, cache: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HQVAL_ARCH", raising=False)
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_bench_times_a_cold_and_a_warm_build(tmp_path: Path, cache: Path) -> None:
    manifest = external_tree(tmp_path)
    out = tmp_path / "bench.json"
    code = main(["compile", "--arch", "gfx1100", "--manifest", str(manifest), "--bench",
                 "--json", str(out)])
    result = json.loads(out.read_text())
    assert code == (0 if result["cold"]["ok"] and result["warm"]["ok"] else 1)
    assert result["cold"]["exit"] == 0 and result["warm"]["exit"] == 0
    assert result["warm"]["target_s"] == 3.0 and result["cold"]["target_s"] == 120.0
    assert result["warm"]["seconds"] > 0 and result["cold"]["seconds"] > 0
    assert any("0 code objects built" in line for line in result["warm"]["summary"])
    assert any("2 code objects built" in line for line in result["cold"]["summary"])
    assert not cache.exists()  # the bench uses its own fresh cache
