"""The CUDA R=8 GEMV on the tensor cores (kernels/include/hq4_gemv.h), checked in the
machine code NVRTC makes for it: no GPU needed, NVRTC and nvdisasm only.

The device checks (`hqval check --backend cuda`) prove the numbers; these pin what the
numbers depend on: the R=8 kernels use mma (HMMA) on sm_80+ and only there, nothing
spills to local memory, and the next group's weight loads are issued before each group's
mma (the pipeline the H200 timings in reports/checkpoints/2026-11-29-h200-gemv-c
rest on: loads next to their use cost 20-25% there).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kernels" / "gemv_hfq4g256.hip"
FORMATS = ("gemv_hfq4g256", "gemv_mq4g256v2", "gemv_mq4c")

cuda = pytest.importorskip("hqval.backends.cuda")


def _nvdisasm() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")  # the nvidia-cuda-nvdisasm wheel's namespace
    for base in (spec.submodule_search_locations or []) if spec else []:
        for cand in sorted(Path(base).glob("*/bin/nvdisasm")):
            return str(cand)
    return None


NVDISASM = _nvdisasm()


def _nvrtc_ok() -> bool:
    try:
        cuda.compile_source('extern "C" __global__ void k() {}', "sm_90", name="probe.cu")
    except Exception:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not _nvrtc_ok(), reason="needs NVRTC (pip install cuda-bindings "
                                                "nvidia-cuda-nvrtc)"),
    pytest.mark.skipif(NVDISASM is None, reason="needs nvdisasm (pip install "
                                                "nvidia-cuda-nvdisasm)"),
]


def sass(arch: str, tmp_path: Path) -> dict[str, list[str]]:
    """Kernel name -> its SASS instructions (opcode and operands, no addresses)."""
    cubin = cuda.compile_source(SOURCE.read_text(), arch, name=SOURCE.name)
    path = tmp_path / f"gemv.{arch}.cubin"
    path.write_bytes(cubin.image)
    assert NVDISASM is not None
    text = subprocess.run([NVDISASM, "-c", str(path)], capture_output=True, text=True,
                          timeout=300, check=True).stdout
    out: dict[str, list[str]] = {}
    parts = re.split(r"\.section\s+\.text\.(\w+)", text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = []
        for line in body.splitlines():
            line = re.sub(r"/\* 0x[0-9a-f]+ \*/", "", line).strip()
            m = re.match(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;?$", line)
            if m:
                lines.append(m.group(1))
            elif re.match(r"\.L_x_\d+:", line):
                lines.append(line)
        out[name] = lines
    return out


def opcode(ins: str) -> str:
    ins = re.sub(r"^@!?U?P\w+\s+", "", ins)
    return ins.split()[0] if ins else ""


def main_loop(lines: list[str]) -> list[str]:
    """The backward-branch loop with the most instructions."""
    labels = {line[:-1]: i for i, line in enumerate(lines) if line.startswith(".L_x_")}
    best: list[str] = []
    for i, ins in enumerate(lines):
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", ins)
        if m and labels.get(m.group(1), i + 1) < i:
            body = [x for x in lines[labels[m.group(1)]:i + 1] if not x.startswith(".L_x_")]
            if len(body) > len(best):
                best = body
    return best


@pytest.fixture(scope="module")
def sm90(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    return sass("sm_90", tmp_path_factory.mktemp("sm90"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_r8_uses_mma_on_sm90_and_other_r_do_not(sm90: dict[str, list[str]], fmt: str) -> None:
    r8 = [opcode(x) for x in sm90[f"{fmt}_r8"]]
    assert any(op.startswith("HMMA.16816.F32") for op in r8), f"{fmt}_r8 has no HMMA"
    for r in (1, 2, 4):
        ops = [opcode(x) for x in sm90[f"{fmt}_r{r}"]]
        assert not any(op.startswith("HMMA") for op in ops), f"{fmt}_r{r} uses mma"


@pytest.mark.parametrize("fmt", FORMATS)
def test_r8_main_loop_loads_precede_its_mma_and_nothing_spills(
        sm90: dict[str, list[str]], fmt: str) -> None:
    lines = sm90[f"{fmt}_r8"]
    assert not any(opcode(x).startswith(("LDL", "STL")) for x in lines), "local memory"
    loop = main_loop(lines)
    ops = [opcode(x) for x in loop]
    hmma = [i for i, op in enumerate(ops) if op.startswith("HMMA")]
    ldg = [i for i, op in enumerate(ops) if op.startswith("LDG")]
    assert len(hmma) % 8 == 0 and hmma, f"{fmt}_r8 main loop: {len(hmma)} HMMA, want 8/group"
    groups = len(hmma) // 8
    # per group: payload (4 x 8 B) and x (2 x 16 B) at least; the header may be merged
    assert len(ldg) >= 6 * groups, f"{fmt}_r8 main loop: {len(ldg)} loads for {groups} groups"
    # The loop is unrolled (two register sets used in turn): each group's 8 mma are
    # preceded, since the previous group's last mma, by the loads of the next group.
    start = 0
    for k in range(groups):
        first, last = hmma[8 * k], hmma[8 * k + 7]
        issued = sum(1 for i in ldg if start <= i < first)
        assert issued >= 6, (f"{fmt}_r8: only {issued} loads before the mma of group {k} of "
                             "the loop; the next group's loads must be in flight first")
        start = last + 1


def test_formats_share_the_r8_loop_except_the_header_decode(
        sm90: dict[str, list[str]]) -> None:
    """qt=6/44/45 differ only in Hdr::load/decode: a handful of instructions per group."""
    sizes = {fmt: len(main_loop(sm90[f"{fmt}_r8"])) for fmt in FORMATS}
    base = sizes["gemv_hfq4g256"]
    for fmt, n in sizes.items():
        assert abs(n - base) <= 6, f"{fmt}_r8 loop has {n} instructions, qt=6 has {base}"


def test_pre_ampere_r8_keeps_the_per_weight_path(tmp_path: Path) -> None:
    code = sass("sm_75", tmp_path)
    for fmt in FORMATS:
        ops = [opcode(x) for x in code[f"{fmt}_r8"]]
        assert ops and not any(op.startswith("HMMA") for op in ops), f"{fmt}_r8 on sm_75"
