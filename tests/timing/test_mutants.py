"""Timing mutants: real kernels redoing k/256 of their groups -- same outputs, slower."""

from __future__ import annotations

import pytest

from hqval.manifest import load_manifest
from hqval.timing import mutants


def test_mutant_spec_adds_the_define_and_names_its_twin() -> None:
    real = load_manifest(None).by_name("gemv_mq4g256v2_r8")
    m = mutants.timing_mutant(real, 8)
    assert m.name == "gemv_mq4g256v2_r8+slow8" and m.symbol == real.symbol
    assert ("HQ_TIMING_SLOW", "8") in m.defines and m.mutant_of == real.name
    assert m.expected_killer == "timing"


@pytest.mark.parametrize(("bad", "needle"), [(0, r"1\.\.256"), (257, r"1\.\.256"),
                                             ("extra0", r"1\.\.32"), ("extra33", r"1\.\.32"),
                                             ("chain0", r"1\.\.256"), ("chain257", r"1\.\.256"),
                                             ("fast3", "slowK")])
def test_out_of_range_amounts_are_refused(bad: int | str, needle: str) -> None:
    real = load_manifest(None).by_name("gemv_mq4g256v2_r1")
    with pytest.raises(ValueError, match=needle):
        mutants.timing_mutant(real, bad)


def test_chain_mutant_spec() -> None:
    real = load_manifest(None).by_name("gemv_mq4g256v2_r8")
    m = mutants.timing_mutant(real, "chain12")
    assert m.name == "gemv_mq4g256v2_r8+chain12" and ("HQ_TIMING_CHAIN", "12") in m.defines
    assert mutants.token_of(m) == "chain12"


def test_extra_mutant_spec() -> None:
    real = load_manifest(None).by_name("gemv_mq4g256v2_r8")
    m = mutants.timing_mutant(real, "extra3")
    assert m.name == "gemv_mq4g256v2_r8+extra3" and ("HQ_TIMING_EXTRA", "3") in m.defines
    assert mutants.token_of(m) == "extra3" and mutants.token_of(real) is None


def test_mutants_of_mutants_and_gemms_are_refused() -> None:
    m = load_manifest(None)
    with pytest.raises(ValueError, match="real GEMV"):
        mutants.timing_mutant(m.by_name("gemm_mq4g256v2_wmma_gfx11"), 4)
    with pytest.raises(ValueError, match="real GEMV"):
        mutants.timing_mutant(mutants.timing_mutant(m.by_name("gemv_mq4g256v2_r1"), 4), 4)


def test_parse_slow_list() -> None:
    assert mutants.parse_slow_list("8, slow4,8,extra2") == ["extra2", "slow4", "slow8"]
    with pytest.raises(ValueError, match=r"1\.\.256"):
        mutants.parse_slow_list("0,4")
    with pytest.raises(ValueError, match="slowK"):
        mutants.parse_slow_list("four")


@pytest.mark.parametrize("name", ["gemv_mq4g256v2_r1", "gemv_mq4g256v2_r8",
                                  "gemv_hfq4g256_residual_r2"])
def test_mutant_computes_the_same_outputs_with_more_work_on_the_emulator(name: str) -> None:
    """Real compile (clang, gfx1100), real execution (the emulator): every output bit equal
    to the twin's, and more instructions, memory loads among them (the pass re-reads)."""
    from hqval.emu.runner import run_kernel

    real = load_manifest(None).by_name(name)
    twin = run_kernel(real, "gfx1100", M=16, K=1024)
    slow = run_kernel(mutants.timing_mutant(real, 128), "gfx1100", M=16, K=1024)
    assert twin.error is not None and slow.error == twin.error  # same bits, same error
    assert slow.error <= slow.tolerance
    assert slow.wave_instructions > twin.wave_instructions * 1.2
    assert slow.counts["VMEM"] > twin.counts["VMEM"]
    assert slow.counts["SMEM"] > twin.counts["SMEM"]  # headers re-read by scalar loads
    extra = run_kernel(mutants.timing_mutant(real, "extra4"), "gfx1100", M=16, K=1024)
    assert extra.error == twin.error
    # 4 value-preserving fmas per group-row and lane: 4 VALU per group-row (the wave
    # executes them once per group-row of its block)
    rows, groups = 16, 1024 // 256
    assert extra.counts["VALU"] - twin.counts["VALU"] >= 4 * rows * groups
    # chainN: N dependent shared-memory loads (and one store) after each row's last
    # group, per wave; the weights' loads do not change
    chain = run_kernel(mutants.timing_mutant(real, "chain16"), "gfx1100", M=16, K=1024)
    assert chain.error == twin.error
    waves = -(-16 // real.rows_per_block)
    assert chain.counts["LDS"] - twin.counts["LDS"] >= 17 * waves, (chain.counts, twin.counts)
    assert (chain.counts["VMEM"], chain.counts["SMEM"]) == (twin.counts["VMEM"],
                                                             twin.counts["SMEM"])


@pytest.mark.parametrize("arch", ["gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1201"])
def test_mutants_compile_for_every_rdna_generation(arch: str) -> None:
    from hqval.toolchain import compile_kernel

    real = load_manifest(None).by_name("gemv_mq4g256v2_r2")
    res = compile_kernel(mutants.timing_mutant(real, 32), arch)
    assert res.ok, res.message


def test_cuda_tensor_core_mutant_keeps_the_twins_registers_and_does_not_spill() -> None:
    """NVRTC (no GPU needed): the R=8 tensor-core mutant must fit the twin's 72 registers
    -- one more register would cost 27648-row shapes a second wave, an occupancy cliff
    rather than the chosen amount of extra work."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="needs cuda-bindings (NVRTC)")
    from hqval.backends.cuda import PRELUDE_DIR, kernel_source

    real = load_manifest(None).by_name("gemv_mq4g256v2_r8")
    src, filename = kernel_source(real)

    def ptxas_report(defines: list[str]) -> str:
        opts = ["--gpu-architecture=sm_90", "--std=c++17",
                "--device-as-default-execution-space", "--fmad=true", "--ptxas-options=-v",
                "-DHQ_GEMV_ONLY=44", *(f"-D{d}" for d in defines),
                *(f"--include-path={d}" for d in (*real.include_dirs, real.source.parent,
                                                  PRELUDE_DIR))]
        err, prog = nvrtc.nvrtcCreateProgram(src.encode(), filename.encode(), 0, [], [])
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * n
        nvrtc.nvrtcGetProgramLog(prog, log)
        assert int(err) == 0, log.decode()
        lines = log.decode().splitlines()
        i = next(j for j, line in enumerate(lines)
                 if "Compiling entry function" in line and f"'{real.symbol}'" in line)
        return " ".join(lines[i + 1:i + 4])

    import re

    def registers(report: str) -> int:
        return int(re.search(r"Used (\d+) registers", report).group(1))  # type: ignore[union-attr]

    twin = ptxas_report([])
    for define in ("HQ_TIMING_SLOW=16", "HQ_TIMING_EXTRA=8", "HQ_TIMING_CHAIN=32"):
        slow = ptxas_report([define])
        assert registers(slow) <= max(registers(twin), 72), (twin, slow)
        assert "0 bytes spill stores" in slow, slow


def test_cuda_chain_mutant_loads_survive_ptxas() -> None:
    """NVRTC + nvdisasm (no GPU needed): the chain's dependent loads must be in the R=8
    kernel's machine code, in a loop.  An asm-laundered zero was folded by ptxas and the
    whole chain with it (chain256 cost nothing on the H200); the twin is the control."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs cuda-bindings (NVRTC)")
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from hqval.backends.cuda import compile_source, kernel_source

    here = Path(sys.prefix)
    found = sorted(here.glob("lib/python3*/site-packages/nvidia/cu*/bin/nvdisasm"))
    nvdisasm = shutil.which("nvdisasm") or (str(found[0]) if found else None)
    if nvdisasm is None:
        pytest.skip("needs nvdisasm (the nvidia-cuda-nvdisasm wheel or a CUDA toolkit)")
    real = load_manifest(None).by_name("gemv_mq4g256v2_r8")
    src, filename = kernel_source(real)

    def sass(defines: list[str]) -> str:
        from hqval.backends.cuda import PRELUDE_DIR

        cubin = compile_source(src, "sm_90", name=filename, defines=["HQ_GEMV_ONLY=44", *defines],
                               include_dirs=(*real.include_dirs, real.source.parent, PRELUDE_DIR))
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(cubin.image)
            f.flush()
            text = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True,
                                  check=True).stdout
        return text.split(f".text.{real.symbol}:", 1)[1].split(".text.", 1)[0]

    import re

    def looped_word_loads(body: str) -> int:
        # 32-bit shared or global loads followed within 5 instructions by a conditional
        # branch: a load in a loop
        lines = body.splitlines()
        return sum(1 for i, line in enumerate(lines)
                   if re.search(r"\bLD[SG](\.E)?(\.CONSTANT)? R\d+, ", line)
                   and any("@" in n and "BRA" in n for n in lines[i + 1:i + 6]))

    assert looped_word_loads(sass([])) == 0
    assert looped_word_loads(sass(["HQ_TIMING_CHAIN=32"])) >= 1
