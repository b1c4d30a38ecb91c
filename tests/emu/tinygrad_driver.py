"""Run one kernel launch on tinygrad's RDNA emulator (test/mockgpu/amd/emu.py of a tinygrad
checkout), for tests/emu/test_tinygrad_differential.py.  Run as a separate process with the
checkout first on sys.path, so its own tinygrad package (not the oracle wheel) is the one
imported; nothing of tinygrad is copied here.

stdin: JSON {checkout, code_object, kernel, arch, grid, block, buffers: [npy path],
args: [{"buf": i} | {"int": v}], out}.  Writes the buffers after the launch to ``out``
(an .npz, one array per buffer, as uint8)."""

from __future__ import annotations

import ctypes
import json
import sys
import time

import numpy as np


def main() -> int:
    spec = json.load(sys.stdin)
    sys.path.insert(0, spec["checkout"])
    from test.mockgpu.amd.emu import run_asm  # the checkout's emulator

    from hqval.codeobject import CodeObject
    from hqval.emu.machine import kernarg_bytes

    with open(spec["code_object"], "rb") as f:
        raw = f.read()
    co = CodeObject.parse(raw)
    info = co.kernels[spec["kernel"]]
    kd = info.descriptor
    if [n for n, _ in kd.user_sgprs] != ["kernarg_segment_ptr"]:
        print(f"user SGPRs {kd.user_sgprs}: only a kernarg pointer is set up", file=sys.stderr)
        return 2
    text = ctypes.create_string_buffer(co.text + b"\0" * 64)
    entry = ctypes.addressof(text) + info.symbol_address - co.text_address
    host = [np.ascontiguousarray(np.load(p)).view(np.uint8).copy() for p in spec["buffers"]]
    ptrs = [h.ctypes.data for h in host]
    args = [ptrs[a["buf"]] if "buf" in a else a["int"] for a in spec["args"]]
    grid, block = tuple(spec["grid"]), tuple(spec["block"])
    ka = kernarg_bytes(info, args, grid, block)
    kbuf = ctypes.create_string_buffer(bytes(ka) + b"\0" * 256)
    kaddr = ctypes.addressof(kbuf)
    arch = "rdna4" if spec["arch"].startswith("gfx12") else "rdna3"
    # "repeats" (scripts/emu_bench.py): run the launch that many times, keep the first
    # run's buffers, and write the fastest run's seconds to "timing" (JSON)
    times = []
    saved = None
    for _ in range(int(spec.get("repeats", 1))):
        t0 = time.perf_counter()
        run_asm(entry, len(co.text), *grid, *block, kaddr, kd.rsrc2,
                scratch_size=kd.private_segment_fixed_size, arch=arch,
                user_data=[kaddr & 0xFFFFFFFF, kaddr >> 32])
        times.append(time.perf_counter() - t0)
        if saved is None:
            saved = [h.copy() for h in host]
    np.savez(spec["out"], *(saved or host))
    if spec.get("timing"):
        with open(spec["timing"], "w") as f:
            json.dump({"seconds": min(times), "all": times}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
