"""Run ``hqval`` with one fault put into the running process, from outside the product:

    python launch.py kill-before STEP ARGS...   # SIGKILL at the boundary before STEP
    python launch.py kill-inside STEP ARGS...   # SIGKILL right after STEP's first write
    python launch.py collect-nothing - ARGS...  # every check session selects no cell
    python launch.py none - ARGS...             # no fault (a run to damage afterwards)
    python launch.py sigint-inside STEP ARGS... # SIGINT (a user's Ctrl-C) after STEP's
                                                # first write
    python launch.py sigterm-inside STEP ARGS...  # SIGTERM (a cancelled CI job) after
                                                  # STEP's first write

``--sim-gpu`` first (``python launch.py --sim-gpu MODE STEP ARGS...``) stands the
simulated timing device where a hip or cuda backend would be (see ``sim_gpu``);
``--sim-gpu-arch-rows`` the same, timing at the arch's own rows per block.

The kills are a real ``kill -9`` of the whole process.  ``kill-inside report`` kills after
report.html is written, before checkpoint.md and admission.json.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _interrupt() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _terminate() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def sim_gpu(arch_rows: bool = False) -> None:
    """CI has no GPU, and the timing step runs on hardware backends only: stand
    ``hqval.timing.simulate.SimulatedDevice`` (GEMVs computed on the host, a model clock;
    kernels it cannot run are unsupported) where ``--backend hip`` or ``cuda`` opens a
    device (an AMD arch keeps its real compile and audit steps), with a bench small enough
    for it (two small shapes, hot only, no copy, read-floor or torch.mv ceiling).  The run's
    expected cells come from that same plan.  Its rows carry the backend's name; they are
    a stand-in's, for the fault suite only.  The bench times R=1 kernels (the fault tree's),
    or the arch's own rows per block with ``arch_rows``."""
    import dataclasses
    import functools

    import hqval.backends as registry
    from hqval import toolchain
    from hqval.backends.base import Buffer
    from hqval.run import steps
    from hqval.timing.gemv import Shape
    from hqval.timing.harness import TimingConfig
    from hqval.timing.simulate import SimulatedDevice

    class SimGpu(SimulatedDevice):
        def __init__(self, arch: str, name: str) -> None:
            super().__init__(arch=arch)
            self.name = name

        def load(self, spec: Any) -> Any:
            # the hip backend loads the compiled object and its rows name it (sha256):
            # the stand-in names the same object the run compiled, from the same cache
            program = super().load(spec)
            built = toolchain.compile_kernel(spec, self.arch, self.cache_dir)
            if built.ok and built.code_object is not None:
                program.provenance.update(code_object=str(built.code_object),
                                          sha256=toolchain.file_sha256(built.code_object))
            return program

        def view(self, buf: Buffer, offset: int, nbytes: int) -> Buffer:
            handle = self._next  # a guarded launch's argument: a window of its allocation
            self._next += 1
            self._mem[handle] = self._mem[int(buf.handle)][offset:offset + nbytes]
            return Buffer(nbytes=nbytes, handle=handle)

    backend_class = registry.backend_class
    registry.backend_class = (  # type: ignore[assignment]
        lambda name: functools.partial(SimGpu, name=name) if name in steps.HARDWARE
        else backend_class(name))
    timing_plan = steps.timing_plan

    def small_plan(*a: Any, **k: Any) -> Any:
        return dataclasses.replace(
            timing_plan(*a, **k), shapes=[Shape(128, 1024), Shape(64, 512)], modes=["hot"],
            copy=False, read_floor=False, torch=False,
            config=TimingConfig(warmup=2, iterations=40, runs=2),
            **({} if arch_rows else {"rows": [1]}))

    steps.timing_plan = small_plan  # type: ignore[assignment]


def main() -> int:
    if sys.argv[1] in ("--sim-gpu", "--sim-gpu-arch-rows"):
        sim_gpu(arch_rows=sys.argv[1] == "--sim-gpu-arch-rows")
        del sys.argv[1]
    mode, step, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    from hqval.checks import session
    from hqval.cli import main as hqval_main
    from hqval.report import render
    from hqval.run import chain

    run_step = chain.run_step

    def faulty_step(ctx: Any, name: str, fn: Any) -> Any:
        if name == step and mode == "kill-before":
            _die()
        if name == step and mode in ("kill-inside", "sigint-inside", "sigterm-inside"):
            append = ctx.writer.append
            fault = {"kill-inside": _die, "sigint-inside": _interrupt,
                     "sigterm-inside": _terminate}[mode]
            fired: list[bool] = []

            def append_then_die(rows: Any) -> int:
                n = int(append(rows))
                if n and not fired:
                    fired.append(True)
                    fault()
                return n

            ctx.writer.append = append_then_die
            if step == "report":
                render_html = render.render_html

                def html_then_die(*a: Any, **k: Any) -> str:
                    text = render_html(*a, **k)
                    (ctx.writer.path / "report").mkdir(exist_ok=True)
                    (ctx.writer.path / "report" / "report.html").write_text(text)
                    _die()
                    return text

                render.render_html = html_then_die
        return run_step(ctx, name, fn)

    chain.run_step = faulty_step
    if mode == "collect-nothing":
        # the fault is met only where a session starts: rows an earlier run of the same
        # tree left in the check row cache would answer every cell without one
        os.environ["HQVAL_EMU_REPLAY"] = "off"
        run_cells = session.run_cells

        def nothing(*a: Any, **k: Any) -> Any:
            return run_cells(*a, **{**k, "keyword": "no_cell_is_named_this"})

        session.run_cells = nothing
    return hqval_main(args)


if __name__ == "__main__":
    sys.exit(main())
