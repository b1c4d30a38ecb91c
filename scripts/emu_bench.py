"""The emulator's rerunnable benchmark: wave-instructions per second by kernel at the
matrix's own launch sizes (and batched as prefill_parity launches them), the same
launches on tinygrad's RDNA emulator when a checkout is given, the step times of run
directories, and a row-by-row comparison of two runs (before/after a change).

    PYTHONPATH=$PWD python scripts/emu_bench.py                       # hqval only
    PYTHONPATH=$PWD python scripts/emu_bench.py --tinygrad ~/tinygrad # + tinygrad's
    PYTHONPATH=$PWD python scripts/emu_bench.py --run RUN_A --run RUN_B   # step times
    PYTHONPATH=$PWD python scripts/emu_bench.py --compare-rows RUN_A RUN_B
    PYTHONPATH=$PWD python scripts/emu_bench.py --matrix DIR            # cold, then warm

The machine is usually shared: the figures are best-of ``--repeats`` launch times, and
hqval's and tinygrad's runs of a kernel alternate (A B A B), so compare ratios.  The
wave-instruction count of a launch is hqval's dynamic count (the two emulators run the
same code object, so the same instructions); tinygrad's rate is that count over its
time.  ``--matrix DIR`` runs ``hqval run --backend emu`` (every arch unless ``--arch`` is
given) twice in a cache of its own under DIR, empty the first time: the cold and the warm
matrix (hqval's bytecode compiled before either), each timed (wall, and the CPU of the
run and every process it started) with its step times, then their rows compared.  Exit 1
if ``--compare-rows`` or ``--matrix`` finds a differing row, 2 for bad input or a matrix
run that wrote no rows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "emu" / "tinygrad_driver.py"

# (kernel, arch, kind-specific shape): the matrix's emulator sizes (hqval.checks.cell
# EMU_SIZES: GEMV M=7 K=1280, GEMM M=20 K=512 N=32), two generations each
CASES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("gemv_mq4g256v2_r1", "gfx1100", (7, 1280)),
    ("gemv_mq4g256v2_r1", "gfx1201", (7, 1280)),
    ("gemv_mq4c_r1", "gfx1100", (7, 1280)),
    ("gemm_mq4g256v2_wmma_gfx11", "gfx1100", (20, 512, 32)),
    ("gemm_mq4g256v2_wmma_gfx12", "gfx1201", (20, 512, 32)),
)
TOKENS = 32  # prefill_parity's per-token references: one GEMV launch per token, batched


@dataclass
class Launch:
    kernel: str
    arch: str
    shape: tuple[int, ...]
    code_object: bytes
    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    buffers: list[np.ndarray]
    args: list[dict[str, int]]  # {"buf": i} | {"int": v}


def make_launch(spec: Any, arch: str, shape: tuple[int, ...], seed: int = 0) -> Launch:
    """One launch of ``spec`` at ``shape`` with seeded inputs, as the checks make them."""
    from hqval.formats import by_qt
    from hqval.toolchain import compile_kernel

    res = compile_kernel(spec, arch)
    if not res.ok or res.code_object is None:
        raise SystemExit(f"emu_bench: {spec.name} does not compile for {arch}: {res.message}")
    rng = np.random.default_rng(seed)
    fmt = by_qt(spec.qt)
    if spec.kind == "gemv":
        M, K = shape
        blob = fmt.encode((rng.standard_normal((M, K)) * 0.02).astype(np.float32))
        x = rng.standard_normal(K).astype(np.float32)
        y = np.zeros(M, np.float32)
        grid = (-(-M // spec.rows_per_block), 1, 1)
        bufs: list[np.ndarray] = [blob, x, y]
        args = [{"buf": 0}, {"buf": 1}, {"buf": 2}, {"int": M}, {"int": K}]
    elif spec.kind == "gemm":
        M, K, N = shape
        blob = fmt.encode((rng.standard_normal((M, K)) * 0.02).astype(np.float32))
        X = rng.standard_normal((N, K)).astype(np.float16)
        Y = np.zeros((N, M), np.float32)
        bt = spec.batch_tile or 1
        grid = (-(-M // 16), -(-N // (16 * bt)), 1)
        bufs = [blob, X, Y]
        args = [{"buf": 0}, {"buf": 1}, {"buf": 2}, {"int": M}, {"int": K}, {"int": N}]
    else:
        raise SystemExit(f"emu_bench: {spec.name}: kind {spec.kind} is not benchmarked")
    return Launch(spec.name, arch, shape, res.code_object.read_bytes(), spec.symbol, grid,
                  (spec.block, 1, 1), bufs, args)


def run_hqval(launch: Launch, copies: int = 1) -> tuple[float, int, int]:
    """(seconds, wave-instructions, waves) of the launch on hqval's interpreter, ``copies``
    independent copies of it as one batch (``Machine.launch_many``) when > 1.  A fresh
    machine, so nothing is replayed; translation is done before the clock starts."""
    from hqval.emu import Machine

    m = Machine(launch.arch)
    mod = m.load(launch.code_object)
    mod.program(launch.symbol)
    batch = []
    for _ in range(copies):
        addrs = []
        for b in launch.buffers:
            a = m.alloc(b.nbytes)
            m.write(a, b)
            addrs.append(a)
        raw = [addrs[a["buf"]] if "buf" in a else a["int"] for a in launch.args]
        batch.append((launch.grid, launch.block, raw,
                      [(a, b.nbytes) for a, b in zip(addrs, launch.buffers, strict=True)]))
    t0 = time.perf_counter()
    if copies == 1:
        grid, block, args, _ = batch[0]
        stats = [m.launch(mod, launch.symbol, grid, block, args)]
    else:
        stats = m.launch_many(mod, launch.symbol, batch)
    secs = time.perf_counter() - t0
    return secs, sum(s.wave_instructions for s in stats), sum(s.waves for s in stats)


def run_tinygrad(launch: Launch, checkout: str, repeats: int) -> float:
    """Best-of-``repeats`` seconds of the launch on tinygrad's emulator (its own process,
    the checkout's tinygrad first on the path; its first run, which compiles, is dropped)."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "k.co").write_bytes(launch.code_object)
        paths = []
        for i, b in enumerate(launch.buffers):
            np.save(tmp / f"b{i}.npy", b)
            paths.append(str(tmp / f"b{i}.npy"))
        spec = {"checkout": checkout, "code_object": str(tmp / "k.co"),
                "kernel": launch.symbol, "arch": launch.arch, "grid": list(launch.grid),
                "block": list(launch.block), "buffers": paths, "args": launch.args,
                "out": str(tmp / "out.npz"), "repeats": repeats + 1,
                "timing": str(tmp / "timing.json")}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([checkout, str(ROOT)]))
        if shutil.which("clang") is None and shutil.which("clang-19"):
            bindir = tmp / "bin"  # tinygrad's CPU backend calls plain `clang`
            bindir.mkdir()
            (bindir / "clang").symlink_to(str(shutil.which("clang-19")))
            env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        proc = subprocess.run([sys.executable, str(DRIVER)], input=json.dumps(spec),
                              capture_output=True, text=True, env=env, timeout=3600,
                              check=False)
        if proc.returncode != 0:
            raise SystemExit(f"emu_bench: tinygrad's emulator failed on {launch.kernel} "
                             f"({launch.arch}): {proc.stderr.strip()[-800:]}")
        timing = json.loads((tmp / "timing.json").read_text())
        return float(min(timing["all"][1:] or timing["all"]))


def bench(repeats: int, tinygrad: str | None, only: str | None) -> list[dict[str, Any]]:
    from hqval.emu import fastfma
    from hqval.manifest import load_manifest

    manifest = load_manifest(None)
    mode, where = fastfma.status()
    print(f"FMA: {mode} ({where})")
    rows = []
    for name, arch, shape in CASES:
        if only and only not in name:
            continue
        launch = make_launch(manifest.by_name(name), arch, shape)
        best: dict[str, float] = {}
        counts: dict[str, tuple[int, int]] = {}
        for _ in range(repeats):  # A B A B: hqval single, hqval batched, tinygrad
            for label, copies in (("hqval", 1), (f"hqval x{TOKENS} batched", TOKENS)):
                if copies > 1 and not name.startswith("gemv"):
                    continue
                secs, wi, waves = run_hqval(launch, copies)
                best[label] = min(best.get(label, secs), secs)
                counts[label] = (wi, waves)
            if tinygrad:
                secs = run_tinygrad(launch, tinygrad, 1)
                best["tinygrad"] = min(best.get("tinygrad", secs), secs)
        wi1, waves1 = counts["hqval"]
        row = {"kernel": name, "arch": arch, "shape": list(shape), "waves": waves1,
               "wave_instructions": wi1}
        for label, secs in best.items():
            wi = counts[label][0] if label in counts else wi1
            row[label] = {"seconds": secs, "wave_instructions_per_s": wi / secs}
        if "tinygrad" in best:
            row["hqval_over_tinygrad"] = (wi1 / best["hqval"]) / (wi1 / best["tinygrad"])
        rows.append(row)
        line = f"{name:30s} {arch} {waves1:3d} waves {wi1:7d} wave-instr:"
        for label, secs in best.items():
            wi = counts[label][0] if label in counts else wi1
            line += f"  {label} {wi / secs / 1e6:6.3f} M/s ({secs * 1e3:.1f} ms)"
        if "hqval_over_tinygrad" in row:
            line += f"  hqval/tinygrad {row['hqval_over_tinygrad']:.1f}x"
        print(line, flush=True)
    return rows


def _rows(run: Path) -> list[dict[str, Any]]:
    path = run / "rows.jsonl"
    if not path.is_file():
        raise SystemExit(f"emu_bench: {run} has no rows.jsonl (not a run directory)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _steps(run: Path) -> dict[str, Any]:
    """Each step's seconds (a step's row is repeated per arch: the first)."""
    seen: dict[str, Any] = {}
    for r in _rows(run):
        if r.get("kind") == "step" and r.get("check") not in seen:
            seen[str(r.get("check"))] = r.get("measured")
    return seen


def step_times(runs: list[Path]) -> None:
    for run in runs:
        seen = _steps(run)
        print(f"{run}: " + ", ".join(f"{k} {v} s" for k, v in seen.items())
              + f"; total {sum(float(v or 0) for v in seen.values()):.1f} s")


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def matrix(top: Path, arches: list[str], extra: list[str]) -> int:
    """The matrix cold (an empty cache under ``top``) and then warm (the same cache), each
    ``hqval run --backend emu`` in a process of its own; their figures, and their rows
    compared (``compare_rows``)."""
    if top.exists() and any(top.iterdir()):
        print(f"emu_bench: {top} is not empty; give a new directory for --matrix",
              file=sys.stderr)
        return 2
    top.mkdir(parents=True, exist_ok=True)  # the logs go here even when a run writes nothing
    cache = top / "cache"
    # "cold" is hqval's caches empty, not Python's: the package's bytecode is compiled
    # first, as an install compiles it (where PYTHONDONTWRITEBYTECODE is set, every worker
    # process would otherwise compile hqval's modules again, some seconds of a warm run)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "hqval")],
                   check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("HQVAL_CACHE", None)
    figures: dict[str, dict[str, Any]] = {}
    for label in ("cold", "warm"):
        out = top / label
        cmd = [sys.executable, "-m", "hqval", "run", "--backend", "emu", "--cache-dir",
               str(cache), "--out", str(out), *[f"--arch={a}" for a in arches or ["all"]],
               *extra]
        cpu0, t0 = _children_cpu(), time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        (top / f"{label}.log").write_text(proc.stdout + proc.stderr)
        if not (out / "rows.jsonl").is_file():
            print(f"emu_bench: the {label} matrix wrote no rows (exit {proc.returncode}); "
                  f"see {top / f'{label}.log'}", file=sys.stderr)
            return 2
        steps = _steps(out)
        figures[label] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                          "exit": proc.returncode, "steps": steps}
        print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, hqval run exit "
              f"{proc.returncode}; " + ", ".join(f"{k} {v} s" for k, v in steps.items()))
    (top / "matrix.json").write_text(json.dumps(figures, indent=1))
    return compare_rows(top / "cold", top / "warm")


# fields of a row that say when, where or how fast, not what was found
VOLATILE = ("run_id", "seconds", "wall_s", "started", "finished", "elapsed", "timestamp",
            "duration", "wave_instructions_per_s", "host", "pid", "code_object")
# rows that judge the kernels (compile and step rows carry times and cache paths)
JUDGED = ("audit", "check", "mutant", "admit")


def _scrub(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _scrub(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_scrub(v) for v in x]
    return x


def _unshared(row: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A check row without what says its launches ran on another arch's identical code
    (``hqval.checks.cell.same_code``): the row as a run of its own would have written it,
    and that arch ('' when none)."""
    details = dict(row.get("details") or {})
    arch = str(details.pop("same_code_as", "") or "")
    details.pop("launches_run_on", None)
    message = str(row.get("message") or "")
    if arch:
        message = message.removeprefix(f"same code as {arch}").removeprefix("; ")
    return {**row, "details": details, "message": message}, arch


def _uncached(row: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A row without what says it was taken from the check row cache
    (``hqval.checks.rowcache.DETAIL``), and whether it was."""
    details = row.get("details")
    if not isinstance(details, dict) or "cell_cache" not in details:
        return row, False
    return {**row, "details": {k: v for k, v in details.items() if k != "cell_cache"}}, True


def compare_rows(a: Path, b: Path) -> int:
    """Every audit, check, mutant and admission row of run ``a`` against run ``b`` by
    identity, all fields but the volatile ones, what says a row's launches ran on another
    arch's identical code and what says it was taken from the check row cache (both
    counted): 0 if equal, 1 with the first differences
    listed (and 1 if either run has none: nothing compared is no evidence)."""
    shared: dict[Path, int] = {}
    remembered: dict[Path, int] = {}

    def by_id(run: Path) -> dict[str, dict[str, Any]]:
        out = {}
        for r in _rows(run):
            if r.get("kind") not in JUDGED:
                continue
            r, same = _unshared(r) if r.get("kind") == "check" else (r, "")
            shared[run] = shared.get(run, 0) + bool(same)
            r, cached = _uncached(r)
            remembered[run] = remembered.get(run, 0) + cached
            ident = f"{r.get('kind')}:{r.get('identity')}"
            out[ident] = _scrub(r)
        return out
    ra, rb = by_id(a), by_id(b)
    for run, n in shared.items():
        if n:
            print(f"{run}: {n} check rows ran on another arch's identical code")
    for run, n in remembered.items():
        if n:
            print(f"{run}: {n} check rows taken from the check row cache")
    # a field only one run's rows have (a schema addition between them, such as
    # object_sha256) cannot be compared: named once, and the rest of the row compared
    only: set[str] = set()
    for i in set(ra) & set(rb):
        one = set(ra[i]) ^ set(rb[i])
        only |= one
        for k in one:
            ra[i].pop(k, None)
            rb[i].pop(k, None)
    diffs = [i for i in sorted(set(ra) | set(rb)) if ra.get(i) != rb.get(i)]
    if only:
        print(f"fields in only one run's rows (not compared): {', '.join(sorted(only))}")
    print(f"{len(ra)} rows in {a}, {len(rb)} in {b}; {len(diffs)} differ")
    if not ra or not rb:
        return 1
    for ident in diffs[:20]:
        x, y = ra.get(ident), rb.get(ident)
        if x is None or y is None:
            print(f"  {ident}: only in {'b' if x is None else 'a'}")
            continue
        keys = [k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
        print(f"  {ident}: {', '.join(f'{k}: {x.get(k)!r} != {y.get(k)!r}' for k in keys)}"[:600])
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tinygrad", metavar="CHECKOUT",
                   help="a tinygrad checkout (its test/mockgpu/amd/emu.py is run)")
    p.add_argument("--kernel", help="only cases whose kernel name contains this")
    p.add_argument("--run", action="append", type=Path, default=[],
                   help="a run directory whose step times to print (repeatable)")
    p.add_argument("--compare-rows", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"))
    p.add_argument("--json", type=Path, help="write the kernel figures here")
    p.add_argument("--matrix", type=Path, metavar="DIR",
                   help="time the emulator matrix cold and then warm in a new directory")
    p.add_argument("--arch", action="append", default=[],
                   help="with --matrix: an arch to run (repeatable; default all)")
    p.add_argument("--manifest", help="with --matrix: the kernel tree's kernels.yaml")
    a = p.parse_args(argv)
    if a.repeats < 1:
        p.error("--repeats must be at least 1")
    if a.tinygrad and not (Path(a.tinygrad) / "test" / "mockgpu" / "amd" / "emu.py").is_file():
        print(f"emu_bench: {a.tinygrad} has no test/mockgpu/amd/emu.py: give a tinygrad "
              "checkout", file=sys.stderr)
        return 2
    if a.compare_rows:
        return compare_rows(*a.compare_rows)
    if a.matrix:
        return matrix(a.matrix, a.arch, ["--manifest", a.manifest] if a.manifest else [])
    if a.run:
        step_times(a.run)
        return 0
    rows = bench(a.repeats, a.tinygrad, a.kernel)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
