"""Run one disassembly line on a fresh wave state: the per-instruction test harness."""

from __future__ import annotations

from typing import Any

import numpy as np

from hqval.codeobject import parse_text
from hqval.emu import memory, scalar, vector
from hqval.emu.operands import EXEC, Ctx, WaveState


def state(nwaves: int = 1, nvgpr: int = 16, exec_mask: int = 0xFFFFFFFF) -> WaveState:
    st = WaveState(nwaves, nvgpr)
    st.S[EXEC] = exec_mask
    st.set_exec(slice(None))
    return st


def execute(text: str, st: WaveState, arch: str = "gfx1100", words: list[int] | None = None
            ) -> Any:
    gen = 12 if arch.startswith("gfx12") else 11 if arch.startswith("gfx11") else 10
    cx = Ctx(arch=arch, kernel="t", gen=gen, index_of={0: 0, 4: 1, 8: 2})
    ins = parse_text(text, 0, words or [0])
    res = (scalar.translate(ins, cx) or memory.translate(ins, cx)
           or vector.translate(ins, cx, 32))
    if res is None:
        raise AssertionError(f"no semantics for {text!r}")
    return res[0](st, slice(None))


def f32bits(*xs: float) -> np.ndarray:
    return np.array(xs, np.float32).view(np.uint32)
