"""Shared fixtures: a run directory holding one row of every kind the pipeline produces,
written through the real results store (used by the results, report and command tests)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from hqval.checks.cell import stated_tolerances
from hqval.result import Row, Status
from hqval.results import store

# ---- scheduling: the longest tests first, idle workers take over the rest --------------
#
# A few tests take minutes (the nightly workflow's local run, the fault suite's killed
# runs, the HIP-header builds); with xdist's default load schedule they start wherever
# collection order puts them and one of them could finish alone while the other workers
# idle.  So tests marked ``slow`` run first (stable: otherwise in collection order) and
# xdist schedules with work stealing: each worker starts on its half of the collection
# and an idle worker takes over the end of a busy one's queue, so the slow tests at the
# front keep going while the rest is shared.  ``--dist`` given explicitly is left as it is.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: a run without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist") != "load" or _dist_named(config):
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)  # type: ignore[arg-type]


def _dist_named(config: pytest.Config) -> bool:
    """Whether the command line (or PYTEST_ADDOPTS) names a --dist mode itself."""
    args = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    return any(a == "--dist" or a.startswith("--dist=") or a == "-d" for a in args)


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A directory of this test run that every xdist worker shares: beside the workers' own
    basetemps (``popen-gwN``, in the run's own directory), or in the basetemp without
    xdist.  ``mkdir(exist_ok=True)`` makes it once whichever worker comes first."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        base = base.parent
    path = base / f"shared-{name}"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def code_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hqval cache (code objects, dependency lists, disassemblies, audit rows) for the
    tests of this test run that build or audit kernels and are not about the cache itself:
    each (kernel, arch) is compiled once per run instead of once per module and worker.
    hqval's cache is made for concurrent processes (a run's xdist workers share one):
    an entry is built in a private directory and renamed into place, and validated (its
    key, digest and tag) when read, so a test finds no entry or a whole one.  Fresh for
    every test run, so no test depends on what an earlier run left."""
    return shared_dir(tmp_path_factory, "code-cache")


KERNELS = {
    "mut_halves_swapped": {"qt": 44, "kind": "gemv", "mutant_of": "gemv_mq4g256v2_r1",
                           "requires": "any"},
    "gemv_mq4g256v2_r1": {"qt": 44, "kind": "gemv", "baseline": "gemv_hfq4g256_r1",
                          "requires": "any"},
    "gemm_mq4g256v2_gfx11": {"qt": 44, "kind": "gemm", "baseline": "gemm_hfq4g256_gfx11",
                             "requires": "wmma_gfx11"},
    "gemv_mq4cg256_r1": {"qt": 45, "kind": "gemv", "baseline": "gemv_hfq4g256_r1",
                         "requires": "any"},
    "gemm_mq4cg256_gfx12": {"qt": 45, "kind": "gemm", "baseline": "gemm_hfq4g256_gfx12",
                            "requires": "wmma_gfx12"},
}
# the WMMA generations with a batched prefill per qt (hqval.checks.dispatch): elsewhere
# the fallback check (keyed on the GEMM kernels, as hqval.checks.fallback is) passes
PREFILL_WMMA = {44: ("gfx11", "gfx12"), 45: ("gfx12",)}


def evidence(arch: str, backend: str = "emu", *, fail: str | None = None,
             slow: float = 1.0, seed: int = 0) -> list[Row]:
    """Rows for one arch as the pipeline would produce them; ``fail`` names a check whose
    qt=44 decode row fails; ``slow`` scales the hardware timing samples."""
    wmma = {"gfx1100": "gfx11", "gfx1201": "gfx12"}.get(arch, "none")
    kernels = [k for k, v in KERNELS.items() if "mutant_of" not in v
               and (v["kind"] == "gemv" or (k.endswith("gfx11") and wmma == "gfx11")
               or (k.endswith("gfx12") and wmma == "gfx12"))]
    rows: list[Row] = []
    for k in kernels:
        rows.append(Row("compile", "compile", k, arch, "toolchain", Status.PASS,
                        message="ok"))
        rows.append(Row("audit", "scalar_header_loads", k, arch, "isa", Status.PASS,
                        measured=0, tolerance=0, derivation="section 4: header is SMEM",
                        message="2 s_load_b32 at group+0/+4"))
    checks = {"gemv_mq4g256v2_r1": ["bit_identity", "reference_parity"],
              "gemv_mq4cg256_r1": ["bit_identity", "padded_offset"],
              "gemm_mq4g256v2_gfx11": ["prefill_parity", "bit_identity"],
              "gemm_mq4cg256_gfx12": ["prefill_parity", "padded_offset"]}
    for k in kernels:
        for c in checks[k]:
            bad = fail == c and k == "gemv_mq4g256v2_r1"
            # as each check writes it: its own tolerance; bit_identity counts differing outputs
            exact = c == "bit_identity"
            rows.append(Row("check", c, k, arch, backend,
                            Status.FAIL if bad else Status.PASS,
                            measured=(7.0 if bad else 0.0) if exact else (0.7 if bad else 3e-6),
                            tolerance=min(stated_tolerances(c)),
                            derivation="f32 accumulation over K=4096: 1e-4 relative",
                            seed=seed, message="wrong half" if bad else ""))
    for k, v in KERNELS.items():  # every GEMM's fallback cell, applying or not
        if v["kind"] == "gemm":
            falls_back = wmma not in PREFILL_WMMA[int(v["qt"])]  # type: ignore[call-overload]
            rows.append(Row("check", "fallback", k, arch, backend,
                            Status.PASS if falls_back else Status.UNSUPPORTED,
                            measured=2e-6 if falls_back else None, tolerance=1e-4,
                            seed=seed, message="" if falls_back else "arch has the WMMA"))
    # a verdict row as hqval.checks.mutation.verdicts writes it
    rows.append(Row("mutant", "mutant", "mut_halves_swapped", arch, backend, Status.PASS,
                    measured=1.0, message="killed by reference_parity",
                    details={"mutant_of": "gemv_mq4g256v2_r1", "mutation": "halves swapped",
                             "expected_killer": "reference_parity",
                             "killed_by": ["reference_parity"],
                             "cells": {"reference_parity": "fail", "bit_identity": "pass"}}))
    if backend != "emu":
        # a bench cell as hqval.timing.bench writes it: the candidate (B) interleaved with
        # its qt=6 baseline (A), per run; ``slow`` slows the candidate only
        # (every decode kernel is timed: a hardware run proves measured, or nothing)
        rng = np.random.default_rng(seed)
        for name, qt, by in (("gemv_mq4g256v2_r1", 44, slow), ("gemv_mq4cg256_r1", 45, 1.0)):
            base = [list(map(float, 20.0 * (1 + 0.01 * rng.standard_normal(100))))
                    for _ in range(3)]
            samples = [list(map(float, 20.0 * 1.004 * by
                                * (1 + 0.01 * rng.standard_normal(100)))) for _ in range(3)]
            rows.append(_timed(name, qt, arch, backend, by, base, samples))
    return rows


def _timed(name: str, qt: int, arch: str, backend: str, slow: float,
           base: list[list[float]], samples: list[list[float]]) -> Row:
    return Row("timing", "timing_hot", f"{name}@4096x4096", arch, backend, Status.PASS,
               measured=1.004 * slow,
               details={"mode": "hot", "shape": "4096x4096", "qt": qt, "kind": "gemv",
                        "stats": {"ratio": 1.004 * slow, "ci_low": 0.998 * slow,
                                  "ci_high": 1.01 * slow, "mwu_p": 0.4},
                        "predicted_ratio": 1.01, "gbps": 612.0, "cache_resident": False,
                        "samples_a": base, "samples_b": samples})


RunFactory = Callable[..., Path]
STEP_OF_KIND = {"compile": "compile", "audit": "audit", "check": "checks",
                "mutant": "mutants", "timing": "timing"}


def recorded_as_a_run(w: store.RunWriter, arches: Sequence[str]) -> None:
    """Record what ``hqval run`` records of a run whose rows ``w`` wrote: its steps, the
    expected cells (each step's rows, or the step's own note on an arch it has none) and
    the code objects (those its compile rows name: ``with_objects``)."""
    expected: dict[str, list[str]] = {s: [] for s in STEP_OF_KIND.values()}
    for r in w.written:
        if r.kind in STEP_OF_KIND:
            expected[STEP_OF_KIND[r.kind]].append(r.identity)
    notes = []
    for step, ids in expected.items():
        for a in arches:
            if not any(i.rsplit("|", 2)[-2] == a for i in ids):
                notes.append(Row("step", step, "-", a, "step", Status.SKIPPED))
                ids.append(notes[-1].identity)
    w.append(notes)
    w.update_envelope(steps=["compile", "audit", "checks", "mutants", "timing", "admit",
                             "report"], expected_cells=expected,
                      expected={k: len(v) for k, v in expected.items()},
                      objects={f"{r.kernel}|{r.arch}": r.object_sha256 for r in w.written
                               if r.kind == "compile" and r.object_sha256},
                      seed=next((r.seed for r in w.written if r.kind == "check"
                                 and r.seed is not None), 0))


def with_objects(rows: Sequence[Row]) -> list[Row]:
    """``rows`` as ``hqval run`` writes them: a kernel that built (its compile row passes)
    has a code object, named by its compile, audit, check and mutant rows (a made-up
    sha256 of its name where a row names none; a row naming one keeps it)."""
    import dataclasses
    import hashlib

    objects = {f"{r.kernel}|{r.arch}": r.object_sha256
               or hashlib.sha256(f"{r.kernel}|{r.arch}".encode()).hexdigest()
               for r in rows if r.kind == "compile" and r.status is Status.PASS}
    return [dataclasses.replace(r, object_sha256=objects[f"{r.kernel}|{r.arch}"])
            if r.kind in ("compile", "audit", "check", "mutant") and r.object_sha256 is None
            and f"{r.kernel}|{r.arch}" in objects else r for r in rows]


@pytest.fixture
def make_run(tmp_path: Path) -> RunFactory:
    counter = iter(range(1000))

    def make(rows: Sequence[Row], *, arch: str = "gfx1100", backend: str = "emu",
             name: str | None = None, host: str = "lab-1",
             runtime: dict[str, str] | None = None,
             kernels: dict[str, dict[str, object]] | None = None) -> Path:
        env = store.make_envelope(backend=backend, arch=arch, device=f"{backend}:{arch}",
                                  compiler="clang-19", compiler_version="19.1.7",
                                  runtime=runtime,
                                  argv=["hqval", "run", "--arch", arch],
                                  # the kernels the rows name, as a run's manifest table
                                  # holds the kernels it ran
                                  kernels={**{k: v for k, v in KERNELS.items()
                                              if any(r.kernel.split("@", 1)[0] == k
                                                     for r in rows)}, **(kernels or {})})
        env["host"] = host
        w = store.RunWriter.create(tmp_path / (name or f"run{next(counter)}"), env)
        w.append(with_objects(rows))
        recorded_as_a_run(w, [arch])
        return w.path

    return make


def live_markup(markdown: str) -> list[str]:
    """The markup a renderer would act on in ``markdown``, outside code spans and backslash
    escapes: raw HTML, links/images, autolinks and strikethrough are what a row's own text
    must never produce.  Returns the offending snippets (empty when clean).
    The scanner follows CommonMark: a backslash escapes the next punctuation character, and
    a run of n backticks opens a code span closed by the next run of exactly n."""
    found: list[str] = []
    for line in markdown.splitlines():
        plain, i = [], 0
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                plain.append(" ")
                i += 2
                continue
            if ch == "`":
                n = len(line[i:]) - len(line[i:].lstrip("`"))
                j = i + n
                while True:
                    k = line.find("`" * n, j)
                    if k < 0:
                        break
                    m = len(line[k:]) - len(line[k:].lstrip("`"))
                    if m == n:
                        break
                    j = k + m
                if k < 0:
                    found.append(f"unclosed code span in {line!r}")
                    break
                plain.append(" ")
                i = k + n
                continue
            plain.append(ch)
            i += 1
        s = "".join(plain)
        for pat in (r"<[A-Za-z/!?]", r"\[", r"\]\(", "://", r"www\.", "@", "~~"):
            if re.search(pat, s):
                found.append(f"{pat!r} in {line!r}")
    return found


def table_cells(line: str) -> int:
    """Cells in a GFM table row: every ``|`` splits, code spans included, unless escaped."""
    pipes, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        pipes += line[i] == "|"
        i += 1
    return pipes - 1


@pytest.fixture(scope="session")
def cuda_backend() -> object:
    """The CUDA backend on this machine's GPU 0, at its own ``sm_XX``.  Where none runs the
    test is skipped with the backend's own reason, unless the user asked for the cuda
    backend (``HQVAL_BACKEND=cuda``): then it is an error, never a silent skip."""
    from hqval.backends.base import BackendUnavailable

    try:
        from hqval.backends import cuda

        return cuda.CudaBackend(cuda.device_arch())
    except BackendUnavailable as exc:
        if os.environ.get("HQVAL_BACKEND") == "cuda":
            pytest.fail(f"HQVAL_BACKEND=cuda is asked for and cannot run here: {exc}")
        pytest.skip(f"needs an NVIDIA GPU (HQVAL_BACKEND=cuda makes this an error): {exc}")


def clang19_occupancy(arch: str, source: str, tmp_path: Path) -> tuple[int, str, Path]:
    """Build ``source`` with clang-19 for ``arch``: its occupancy remark (waves/SIMD), the
    whole kernel-resource-usage remark, and the code object's path."""
    import re
    import subprocess

    src, co = tmp_path / "k.hip", tmp_path / "k.co"
    src.write_text(source)
    res = subprocess.run(
        ["clang-19", "-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc",
         "--cuda-device-only", "--no-gpu-bundle-output", "-O3", str(src), "-o", str(co),
         "-Rpass-analysis=kernel-resource-usage"],
        capture_output=True, text=True, timeout=120, check=True)
    m = re.search(r"Occupancy \[waves/SIMD\]: (\d+)", res.stderr)
    assert m, res.stderr
    return int(m.group(1)), res.stderr, co
