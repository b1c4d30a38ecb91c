"""hqval.emu: an RDNA wave interpreter that runs compiled code objects on the CPU.

``Machine(arch)``: ``load(code_object) -> Module``, ``alloc``, ``write``, ``read``,
``free``, ``launch(module, symbol, grid, block, args) -> LaunchStats``.

What it models
  * gfx1010/1030 (RDNA1/2), gfx1100-1103/1150-1152 (RDNA3/3.5), gfx1200/1201 (RDNA4);
    wave32 and wave64 (``-mwavefrontsize64``; WMMA wave32 only).
  * Decoding: llvm-objdump-19's disassembly of the same object (``disasm``); the kernel
    descriptor and NT_AMDGPU_METADATA note (``codeobject``) set up SGPRs (user SGPRs,
    workgroup ids; gfx12 TTMP7/TTMP9), VGPRs (gfx11+: x | y << 10 | z << 20 in v0), the
    kernarg segment (hidden block counts, group sizes, remainders filled in), LDS and
    per-lane scratch sizes, and the f32 denormal mode.
  * Semantics follow the RDNA3/RDNA4 ISA pseudocode: fma is one rounding (``fparith``),
    f16 conversions round to nearest even, v_div_scale/fmas/fixup as documented (so the
    compiler's division sequences are correctly rounded), WMMA per generation's layout
    (``wmma``), v_dot2 and v_fma_mix{lo,hi} in the documented order.
  * Memory: one flat space of separate allocations with guard gaps; every global, LDS and
    scratch access is bounds-checked (``OutOfBounds`` names address, instruction, kernel,
    arch).  Buffer (MUBUF) accesses apply the hardware's num_records check first (out of
    range: loads read 0, stores are dropped, as on the GPU).  Atomics return old values
    lane by lane.  Private memory (gfx11+ scratch_*, gfx10 through the private segment
    buffer) is a per-lane segment of the kernel's private_segment_fixed_size, which also
    holds the stack of non-inlined device functions (s_getpc/s_swappc/s_setpc calls).
    The model is coherent: s_waitcnt and cache maintenance are no-ops.
  * Waves of a launch run in lock step as a numpy batch dimension; the scheduler splits
    them only where branches diverge and merges them where they meet again.

What it does not model
  * Timing, caches, occupancy; transcendental approximations (v_rcp/v_rsq/v_sqrt/v_exp/
    v_log are correctly rounded here, hardware is within ~1 ulp; v_rcp_f32 flushes
    denormals in and out as LLVM assumes); rounding modes other
    than nearest-even; image, GWS and message instructions; wave64 WMMA.  What only
    hardware can settle is listed in docs/emu-semantics.md.  Any instruction without
    semantics raises ``UnsupportedInstruction`` when executed (``Module.unsupported``
    lists them before a launch); nothing is skipped silently.
"""

from hqval.emu.errors import EmuError, OutOfBounds, UnknownArch, UnsupportedInstruction
from hqval.emu.machine import CLASSES, Machine, Module
from hqval.emu.stats import LaunchStats

__all__ = ["CLASSES", "EmuError", "LaunchStats", "Machine", "Module", "OutOfBounds",
           "UnknownArch", "UnsupportedInstruction"]
