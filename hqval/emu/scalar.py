"""Scalar ALU, scalar branches and the program-flow instructions (SOP1/SOP2/SOPC/SOPK/SOPP).

Each ``translate`` returns a closure ``(state, waves) -> next`` where ``next`` is None (fall
through), an instruction index (every selected wave branches) or an index array (waves
diverged)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hqval.codeobject import Instruction
from hqval.emu.errors import BadJump, EmuError, KernelTrap
from hqval.emu.fparith import fp_quiet
from hqval.emu.operands import EXEC, SCC, VCC, Ctx, Sel, WaveState, parse_operand, sreader, swriter

Fn = Callable[[WaveState, Sel], Any]

M32 = np.int64(0xFFFFFFFF)
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)

NOOPS = {
    "s_waitcnt", "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_waitcnt_expcnt",
    "s_waitcnt_depctr", "s_wait_loadcnt", "s_wait_storecnt", "s_wait_kmcnt", "s_wait_dscnt",
    "s_wait_samplecnt", "s_wait_bvhcnt", "s_wait_expcnt", "s_wait_alu", "s_wait_idle",
    "s_wait_loadcnt_dscnt", "s_wait_storecnt_dscnt", "s_nop", "s_delay_alu", "s_clause",
    "s_sendmsg", "s_setprio", "s_sleep", "s_icache_inv", "s_dcache_inv", "s_gl1_inv",
    "s_inst_prefetch", "s_set_inst_prefetch_distance", "s_ttracedata", "s_version",
    "s_barrier_wait", "s_code_end", "buffer_gl0_inv", "buffer_gl1_inv", "buffer_wbinvl1",
    "global_inv", "global_wb", "global_wbinv", "s_dcache_wb", "s_singleuse_vdst",
    # gfx12 cache prefetch hints (the engine's gfx1201 GEMV; clang-20's
    # __builtin_amdgcn_s_prefetch_data): no architectural state changes
    "s_prefetch_data", "s_prefetch_inst", "s_prefetch_data_pc_rel", "s_prefetch_inst_pc_rel",
}

# gfx10 / gfx12 spellings -> the gfx11 names used below
ALIASES = {
    "s_andn2_b32": "s_and_not1_b32", "s_andn2_b64": "s_and_not1_b64",
    "s_orn2_b32": "s_or_not1_b32", "s_orn2_b64": "s_or_not1_b64",
    "s_andn1_saveexec_b32": "s_and_not0_saveexec_b32",
    "s_andn2_saveexec_b32": "s_and_not1_saveexec_b32",
    "s_orn1_saveexec_b32": "s_or_not0_saveexec_b32",
    "s_orn2_saveexec_b32": "s_or_not1_saveexec_b32",
    "s_andn1_saveexec_b64": "s_and_not0_saveexec_b64",
    "s_andn2_saveexec_b64": "s_and_not1_saveexec_b64",
    "s_orn1_saveexec_b64": "s_or_not0_saveexec_b64",
    "s_orn2_saveexec_b64": "s_or_not1_saveexec_b64",
    "s_andn1_wrexec_b32": "s_and_not0_wrexec_b32", "s_andn2_wrexec_b32": "s_and_not1_wrexec_b32",
    "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64",
    "s_flbit_i32_b32": "s_clz_i32_u32", "s_flbit_i32": "s_cls_i32",
    "s_add_co_u32": "s_add_u32", "s_add_co_ci_u32": "s_addc_u32", "s_sub_co_u32": "s_sub_u32",
    "s_sub_co_ci_u32": "s_subb_u32", "s_add_co_i32": "s_add_i32", "s_sub_co_i32": "s_sub_i32",
    "s_addk_co_i32": "s_addk_i32",
}


def _i32(x: Any) -> Any:
    return np.asarray(x, np.uint32).view(np.int32).astype(np.int64)


def _u(x: Any) -> Any:
    return np.asarray(x, np.uint32).astype(np.int64)


def _lo(x: Any) -> Any:
    return (np.asarray(x, np.int64) & M32).astype(np.uint32)


def _sext16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


# 32-bit two-source ops: (a: int64 unsigned view, b, scc) -> (result int64, scc or None)
def _binop32(name: str) -> Callable[[Any, Any, Any], tuple[Any, Any]] | None:
    return _BINOP32.get(name)


def _s(a: Any) -> Any:
    """unsigned 32-bit int64 view -> signed."""
    return np.where(a >= 0x80000000, a - 0x100000000, a)


def _ovf(r: Any) -> tuple[Any, Any]:
    return r, (r > 0x7FFFFFFF) | (r < -0x80000000)


def _bfe_i32(a: Any, b: Any) -> tuple[Any, Any]:
    # S_BFE_I32: "S0.i32 >> S1[4 : 0].u32": an arithmetic shift, so a field reaching past
    # bit 31 is filled with S0's sign
    off, width = b & 31, np.minimum((b >> 16) & 0x7F, 32)
    x = (_s(a) >> off) & ((np.int64(1) << width) - 1)
    sign = np.int64(1) << np.maximum(width - 1, 0)
    r = np.where(width > 0, (x ^ sign) - sign, 0)
    return r, r != 0


def _binop64(name: str) -> Callable[[Any, Any, Any], tuple[Any, Any]] | None:
    u = np.uint64
    table: dict[str, Callable[[Any, Any, Any], tuple[Any, Any]]] = {
        "s_and_b64": lambda a, b, c: ((r := a & b), r != 0),
        "s_or_b64": lambda a, b, c: ((r := a | b), r != 0),
        "s_xor_b64": lambda a, b, c: ((r := a ^ b), r != 0),
        "s_nand_b64": lambda a, b, c: ((r := ~(a & b)), r != 0),
        "s_nor_b64": lambda a, b, c: ((r := ~(a | b)), r != 0),
        "s_xnor_b64": lambda a, b, c: ((r := ~(a ^ b)), r != 0),
        "s_and_not1_b64": lambda a, b, c: ((r := a & ~b), r != 0),
        "s_or_not1_b64": lambda a, b, c: ((r := a | ~b), r != 0),
        "s_cselect_b64": lambda a, b, c: (np.where(c != 0, a, b), None),
        "s_add_nc_u64": lambda a, b, c: (a + b, None),
        "s_sub_nc_u64": lambda a, b, c: (a - b, None),
        "s_mul_u64": lambda a, b, c: (a * b, None),
        "s_bfm_b64": lambda a, b, c: (((u(1) << (a & u(63))) - u(1)) << (b & u(63)), None),
    }
    return table.get(name)


def _shift64(name: str) -> Callable[[Any, Any], Any] | None:
    u = np.uint64
    table: dict[str, Callable[[Any, Any], Any]] = {
        "s_lshl_b64": lambda a, b: a << (b & u(63)),
        "s_lshr_b64": lambda a, b: a >> (b & u(63)),
        "s_ashr_i64": lambda a, b: (a.view(np.int64) >> (b & u(63)).astype(np.int64)).view(u),
    }
    return table.get(name)


_CMP = {"eq": np.equal, "lg": np.not_equal, "ne": np.not_equal, "gt": np.greater,
        "ge": np.greater_equal, "lt": np.less, "le": np.less_equal}


def _branch_target(ins: Instruction, cx: Ctx) -> int:
    simm = ins.words[0] & 0xFFFF
    if simm & 0x8000:
        simm -= 0x10000
    addr = ins.addr + 4 + 4 * simm
    if addr not in cx.index_of:
        raise EmuError(f"branch at 0x{ins.addr:x} in {cx.kernel} targets 0x{addr:x}, "
                       f"which is not an instruction of the kernel")
    return cx.index_of[addr]


def _cond_branch(target: int, cond: Callable[[WaveState, Sel], Any]) -> Fn:
    def run(st: WaveState, w: Sel) -> Any:
        c = cond(st, w)
        if c.all():
            return target
        if not c.any():
            return None
        return c  # the machine turns a mask into per-wave PCs
    run.branch_target = target  # type: ignore[attr-defined]
    return run



_BINOP32: dict[str, Callable[[Any, Any, Any], tuple[Any, Any]]] = {
    "s_add_u32": lambda a, b, c: ((r := a + b), r >> 32),
    "s_addc_u32": lambda a, b, c: ((r := a + b + c), r >> 32),
    "s_sub_u32": lambda a, b, c: (a - b, a < b),
    "s_subb_u32": lambda a, b, c: (a - b - c, a < b + c),
    "s_add_i32": lambda a, b, c: _ovf(_s(a) + _s(b)),
    "s_sub_i32": lambda a, b, c: _ovf(_s(a) - _s(b)),
    "s_mul_i32": lambda a, b, c: (a * b, None),
    "s_mul_hi_u32": lambda a, b, c: ((a * b) >> 32, None),
    "s_mul_hi_i32": lambda a, b, c: ((_s(a) * _s(b)) >> 32, None),
    "s_and_b32": lambda a, b, c: ((r := a & b), r != 0),
    "s_or_b32": lambda a, b, c: ((r := a | b), r != 0),
    "s_xor_b32": lambda a, b, c: ((r := a ^ b), r != 0),
    "s_nand_b32": lambda a, b, c: ((r := ~(a & b) & M32), r != 0),
    "s_nor_b32": lambda a, b, c: ((r := ~(a | b) & M32), r != 0),
    "s_xnor_b32": lambda a, b, c: ((r := ~(a ^ b) & M32), r != 0),
    "s_and_not1_b32": lambda a, b, c: ((r := a & ~b & M32), r != 0),
    "s_or_not1_b32": lambda a, b, c: ((r := (a | ~b) & M32), r != 0),
    "s_lshl_b32": lambda a, b, c: ((r := (a << (b & 31)) & M32), r != 0),
    "s_lshr_b32": lambda a, b, c: ((r := a >> (b & 31)), r != 0),
    "s_ashr_i32": lambda a, b, c: ((r := _s(a) >> (b & 31)), r != 0),
    "s_lshl1_add_u32": lambda a, b, c: ((r := (a << 1) + b), (r >> 32) != 0),
    "s_lshl2_add_u32": lambda a, b, c: ((r := (a << 2) + b), (r >> 32) != 0),
    "s_lshl3_add_u32": lambda a, b, c: ((r := (a << 3) + b), (r >> 32) != 0),
    "s_lshl4_add_u32": lambda a, b, c: ((r := (a << 4) + b), (r >> 32) != 0),
    "s_bfm_b32": lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None),
    "s_bfe_u32": lambda a, b, c: ((r := (a >> (b & 31)) & ((1 << ((b >> 16) & 0x7F)) - 1)),
                                  r != 0),
    "s_bfe_i32": lambda a, b, c: _bfe_i32(a, b),
    "s_min_i32": lambda a, b, c: (np.minimum(_s(a), _s(b)), _s(a) < _s(b)),
    "s_min_u32": lambda a, b, c: (np.minimum(a, b), a < b),
    # S_MAX_I32: "SCC = S0.i32 >= S1.i32" (S_MIN_*: "<")
    "s_max_i32": lambda a, b, c: (np.maximum(_s(a), _s(b)), _s(a) >= _s(b)),
    "s_max_u32": lambda a, b, c: (np.maximum(a, b), a >= b),
    "s_cselect_b32": lambda a, b, c: (np.where(c != 0, a, b), None),
    # S_ABSDIFF_I32: "D0.i32 = S0.i32 - S1.i32" wraps to 32 bits before the abs
    "s_absdiff_i32": lambda a, b, c: ((r := np.abs(_s((_s(a) - _s(b)) & M32))), r != 0),
    "s_pack_ll_b32_b16": lambda a, b, c: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None),
    "s_pack_lh_b32_b16": lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF0000), None),
    "s_pack_hh_b32_b16": lambda a, b, c: ((a >> 16) | (b & 0xFFFF0000), None),
    "s_pack_hl_b32_b16": lambda a, b, c: ((a >> 16) | ((b & 0xFFFF) << 16), None),
}


def _halts(imm: str) -> bool:
    """``s_sethalt IMM`` halts the wave when bit 0 of IMM is set (0 resumes)."""
    try:
        return bool(int(imm, 0) & 1)
    except ValueError:
        return True  # an operand we cannot read: fail closed, as a halt


def translate(ins: Instruction, cx: Ctx) -> tuple[Fn, str] | None:
    """Translate a scalar instruction; returns (closure, class) or None if not scalar."""
    name = ALIASES.get(ins.mnemonic, ins.mnemonic)
    if name in NOOPS:
        return (lambda st, w: None), "other"
    if name in ("s_setreg_b32", "s_setreg_imm32_b32"):
        return _setreg(name, ins, cx), "SALU"
    ops = [parse_operand(o) for o in ins.operands] if name.startswith("s_") else []

    # ---- program flow
    if name == "s_endpgm":
        return (lambda st, w: "end"), "other"
    if name == "s_trap" or (name == "s_sethalt" and ops and _halts(ins.operands[0])):
        def trap(st: WaveState, w: Sel) -> None:
            raise KernelTrap(ins.text, ins.addr, cx.kernel, cx.arch)
        return trap, "other"
    if name in ("s_barrier", "s_barrier_signal"):
        return (lambda st, w: "barrier"), "other"
    if name == "s_branch":
        t = _branch_target(ins, cx)
        return (lambda st, w: t), "BRANCH"
    conds: dict[str, Callable[[WaveState, Sel], Any]] = {
        "s_cbranch_scc0": lambda st, w: st.S[SCC][w] == 0,
        "s_cbranch_scc1": lambda st, w: st.S[SCC][w] != 0,
        "s_cbranch_vccz": lambda st, w: ~st.mask_nonzero(w, VCC),
        "s_cbranch_vccnz": lambda st, w: st.mask_nonzero(w, VCC),
        "s_cbranch_execz": lambda st, w: ~st.mask_nonzero(w, EXEC),
        "s_cbranch_execnz": lambda st, w: st.mask_nonzero(w, EXEC),
    }
    if name in conds:
        return _cond_branch(_branch_target(ins, cx), conds[name]), "BRANCH"
    if name == "s_getpc_b64":
        nxt = ins.addr + ins.size
        d = swriter(ops[0], 64)
        # the code object's own addresses: kernels that getpc only use PC-relative offsets
        return (lambda st, w: d(st, w, np.full(_n(st, w), nxt, np.uint64))), "SALU"
    if name in ("s_setpc_b64", "s_swappc_b64"):
        # jumps to a code address held in SGPRs: calls (swappc saves the return address)
        # and returns; the address must be an instruction of the kernel or its callees
        src = sreader(ops[-1], 64)
        link = swriter(ops[0], 64) if name == "s_swappc_b64" else None
        ret = ins.addr + ins.size
        index_of = cx.index_of

        def jump(st: WaveState, w: Sel) -> Any:
            addrs = np.broadcast_to(np.asarray(src(st, w), np.uint64), (_n(st, w),))
            if link is not None:
                link(st, w, np.full(_n(st, w), ret, np.uint64))
            uniq = np.unique(addrs)
            idx = {}
            for a in uniq.tolist():
                if a not in index_of:
                    raise BadJump(f"{ins.mnemonic} at 0x{ins.addr:x} in {cx.kernel} jumps to "
                                  f"0x{a:x}, which is not an instruction of the kernel or "
                                  f"of a function in its code object", ins.text, ins.addr)
                idx[a] = index_of[a]
            if len(uniq) == 1:
                return idx[uniq.tolist()[0]]
            return np.array([idx[a] for a in addrs.tolist()], np.int64)
        return jump, "BRANCH"
    if name == "s_denorm_mode":
        mode = ops[0].bits(32)

        def set_denorm(st: WaveState, w: Sel) -> None:
            st.denorm32 = bool(mode & 3)
            st.denorm16_64 = bool(mode >> 2 & 3)
        return set_denorm, "SALU"
    if not name.startswith("s_") or name.startswith(("s_load", "s_buffer", "s_store",
                                                     "s_scratch", "s_atomic")):
        return None

    # ---- SOPK
    if name in ("s_movk_i32", "s_cmovk_i32", "s_addk_i32", "s_mulk_i32") or \
            name.startswith("s_cmpk_"):
        k = int(ops[1].value)
        if name.startswith("s_cmpk_"):
            kind = name.split("_")[3]
            kv = np.int64(_sext16(k) if kind == "i32" else k & 0xFFFF)
            cmp = _CMP[name.split("_")[2]]
            a = sreader(ops[0])
            conv = _i32 if kind == "i32" else _u
            return (lambda st, w: _set_scc(st, w, cmp(conv(a(st, w)), kv))), "SALU"
        d = swriter(ops[0])
        dr = sreader(ops[0])
        ks = np.int64(_sext16(k))
        if name == "s_movk_i32":
            v = np.uint32(ks & 0xFFFFFFFF)
            return (lambda st, w: d(st, w, v)), "SALU"
        if name == "s_cmovk_i32":
            v = np.uint32(ks & 0xFFFFFFFF)
            return (lambda st, w: d(st, w, np.where(st.S[SCC][w] != 0, v, dr(st, w)))), "SALU"
        if name == "s_mulk_i32":
            return (lambda st, w: d(st, w, _lo(_i32(dr(st, w)) * ks))), "SALU"

        def addk(st: WaveState, w: Sel) -> None:
            r, c = _ovf(_i32(dr(st, w)) + ks)
            d(st, w, _lo(r))
            _set_scc(st, w, c)
        return addk, "SALU"

    # ---- SOPC
    if name.startswith("s_cmp_") or name.startswith("s_bitcmp"):
        parts = name.split("_")
        a, b = sreader(ops[0], 64 if name.endswith("64") else 32), \
            sreader(ops[1], 64 if name.endswith("64") and not name.startswith("s_bitcmp") else 32)
        if name.startswith("s_bitcmp"):
            want = 1 if parts[1] == "bitcmp1" else 0
            width = 64 if name.endswith("64") else 32
            if width == 64:
                return (lambda st, w: _set_scc(
                    st, w, ((a(st, w) >> (np.asarray(b(st, w), np.uint64) & np.uint64(63)))
                            & np.uint64(1)) == want)), "SALU"
            return (lambda st, w: _set_scc(
                st, w, ((_u(a(st, w)) >> (_u(b(st, w)) & 31)) & 1) == want)), "SALU"
        kind = parts[-1]
        if kind in ("f16", "f32"):
            # SALU float compares (gfx1150+, gfx12): IEEE, "lg" ordered, "n*" unordered-true
            from hqval.emu.vector import _FCMP

            fcmp = _FCMP.get(parts[2])
            if fcmp is None:
                return None
            conv_f = _f16 if kind == "f16" else _f32

            def cmp_float(st: WaveState, w: Sel) -> None:
                with fp_quiet(invalid="ignore"):
                    _set_scc(st, w, fcmp(conv_f(a(st, w)), conv_f(b(st, w))))
            return cmp_float, "SALU"
        cmpf = _CMP.get(parts[2])
        if cmpf is not None:
            cmp = cmpf
            if kind == "u64":
                return (lambda st, w: _set_scc(st, w, cmp(a(st, w), b(st, w)))), "SALU"
            conv = _i32 if kind == "i32" else _u
            return (lambda st, w: _set_scc(st, w, cmp(conv(a(st, w)), conv(b(st, w))))), "SALU"

    # ---- SOP2
    f32 = _binop32(name)
    if f32 is not None:
        d, a, b = swriter(ops[0]), sreader(ops[1]), sreader(ops[2])
        writes_scc = name not in ("s_mul_i32", "s_mul_hi_u32", "s_mul_hi_i32", "s_bfm_b32",
                                  "s_cselect_b32") and not name.startswith("s_pack")

        def sop2(st: WaveState, w: Sel) -> None:
            r, c = f32(_u(a(st, w)), _u(b(st, w)), _u(st.S[SCC][w]))
            if writes_scc:
                _set_scc(st, w, c)
            d(st, w, _lo(r))
        return sop2, "SALU"
    f64 = _binop64(name)
    if f64 is not None:
        d = swriter(ops[0], 64)
        a, b = sreader(ops[1], 64), sreader(ops[2], 64)
        writes_scc = name.split("_")[1] in ("and", "or", "xor", "nand", "nor", "xnor")

        def sop2_64(st: WaveState, w: Sel) -> None:
            r, c = f64(np.asarray(a(st, w), np.uint64), np.asarray(b(st, w), np.uint64),
                       st.S[SCC][w])
            r = np.broadcast_to(np.asarray(r, np.uint64), (_n(st, w),))
            if writes_scc:
                _set_scc(st, w, c)
            d(st, w, r)
        return sop2_64, "SALU"
    sh = _shift64(name)
    if sh is not None:
        d = swriter(ops[0], 64)
        a, b = sreader(ops[1], 64), sreader(ops[2])

        def shift64(st: WaveState, w: Sel) -> None:
            r = sh(np.broadcast_to(np.asarray(a(st, w), np.uint64), (_n(st, w),)),
                   np.asarray(b(st, w), np.uint64))
            _set_scc(st, w, r != 0)
            d(st, w, r)
        return shift64, "SALU"
    if name in ("s_bfe_u64", "s_bfe_i64"):
        d = swriter(ops[0], 64)
        a, b = sreader(ops[1], 64), sreader(ops[2])
        signed = name.endswith("i64")

        def bfe64(st: WaveState, w: Sel) -> None:
            x = np.asarray(a(st, w), np.uint64)
            bb = np.asarray(b(st, w), np.uint64)
            off = bb & np.uint64(63)
            width = np.minimum((bb >> np.uint64(16)) & np.uint64(0x7F), np.uint64(64))
            mask = np.where(width >= 64, M64,
                            (np.uint64(1) << np.minimum(width, np.uint64(63))) - np.uint64(1))
            # S_BFE_I64 shifts S0.i64 arithmetically (sign fills a field past bit 63)
            shifted = (x.view(np.int64) >> off.astype(np.int64)).view(np.uint64) if signed \
                else x >> off
            r = shifted & mask
            if signed:
                sign = np.uint64(1) << np.maximum(width, np.uint64(1)) - np.uint64(1)
                r = np.where(width > 0, (r ^ sign) - sign, np.uint64(0))
            r = np.broadcast_to(np.asarray(r, np.uint64), (_n(st, w),))
            _set_scc(st, w, r != 0)
            d(st, w, r)
        return bfe64, "SALU"
    if name in _SALU_FLOAT:
        return _salu_float(name, ops), "SALU"

    # ---- SOP1
    return _sop1(name, ops, ins)


def _setreg(name: str, ins: Instruction, cx: Ctx) -> Fn:
    """s_setreg to the flat-scratch base (not modelled: private memory is per lane here)
    or to MODE's denormal bits; anything else is unsupported."""
    from hqval.emu.errors import UnsupportedInstruction

    target = ins.operands[0].replace(" ", "")
    inner = target[len("hwreg("):-1].split(",") if target.startswith("hwreg(") else [target]
    reg = inner[0]
    if reg in ("HW_REG_FLAT_SCR_LO", "HW_REG_FLAT_SCR_HI"):
        return lambda st, w: None
    if reg == "HW_REG_MODE":
        offset = int(inner[1], 0) if len(inner) > 1 else 0
        size = int(inner[2], 0) if len(inner) > 2 else 32
        src = sreader(parse_operand(ins.operands[1]))
        if offset < 4 or offset + size > 8:
            raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                         "only MODE's FP_DENORM field is modelled")

        def set_mode(st: WaveState, w: Sel) -> None:
            v = np.asarray(src(st, w), np.uint32).reshape(-1)
            if v.size and not (v == v[0]).all():
                raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                             "waves setting different denormal modes")
            bits = (int(v[0]) if v.size else 0) << offset  # MODE bits 7:4 = FP_DENORM
            mask = ((1 << size) - 1) << offset
            if mask & 0x30:
                st.denorm32 = bool(bits & 0x30)
            if mask & 0xC0:
                st.denorm16_64 = bool(bits & 0xC0)
        return set_mode
    raise UnsupportedInstruction(ins.mnemonic, ins.addr, cx.kernel, cx.arch,
                                 f"hardware register {reg} is not modelled")


def _f16(x: Any) -> Any:
    return (np.asarray(x, np.uint32) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)


def _f32(x: Any) -> Any:
    return np.asarray(x, np.uint32).view(np.float32)


_SALU_FLOAT = {"s_add_f32", "s_sub_f32", "s_mul_f32", "s_max_f32", "s_min_f32", "s_fmac_f32",
               "s_max_num_f32", "s_min_num_f32",
               "s_fmaak_f32", "s_fmamk_f32", "s_cvt_f32_i32", "s_cvt_f32_u32",
               "s_cvt_i32_f32", "s_cvt_u32_f32", "s_cvt_f32_f16", "s_cvt_f16_f32",
               "s_cvt_hi_f32_f16"}


def _salu_float(name: str, ops: list[Any]) -> Fn:
    fn = _salu_float_fn(name, ops)

    def quiet_fp(st: WaveState, w: Sel) -> Any:
        with fp_quiet(all="ignore"):
            return fn(st, w)
    return quiet_fp


def _salu_float_fn(name: str, ops: list[Any]) -> Fn:
    from hqval.emu.fparith import (
        cvt_f32_to_i32,
        cvt_f32_to_u32,
        f16_to_f32,
        f32_to_f16,
        fma_f32,
        max_isa,
        min_isa,
    )

    d = swriter(ops[0])
    srcs = [sreader(o, 32, True) for o in ops[1:]]

    def f(st: WaveState, w: Sel, i: int) -> Any:
        return _f32(np.broadcast_to(np.asarray(srcs[i](st, w), np.uint32), (_n(st, w),)))

    def out(st: WaveState, w: Sel, r: Any) -> None:
        d(st, w, np.asarray(r, np.float32).view(np.uint32))

    # SALU floats exist on gfx1150+ (S_MAX_F32: the IEEE-mode max) and gfx12
    # (S_MAX_NUM_F32: the NUM kind)
    binary: dict[str, Callable[[Any, Any], Any]] = {
        "s_add_f32": np.add, "s_sub_f32": np.subtract, "s_mul_f32": np.multiply,
        "s_max_f32": lambda a, b: max_isa(a, b, True),
        "s_min_f32": lambda a, b: min_isa(a, b, True),
        "s_max_num_f32": lambda a, b: max_isa(a, b, False),
        "s_min_num_f32": lambda a, b: min_isa(a, b, False)}
    if name in binary:
        op = binary[name]
        return lambda st, w: out(st, w, op(f(st, w, 0), f(st, w, 1)))
    if name == "s_fmac_f32":
        dr = sreader(ops[0])
        return lambda st, w: out(st, w, fma_f32(f(st, w, 0), f(st, w, 1),
                                                _f32(np.asarray(dr(st, w), np.uint32))))
    if name == "s_fmaak_f32":
        return lambda st, w: out(st, w, fma_f32(f(st, w, 0), f(st, w, 1), f(st, w, 2)))
    if name == "s_fmamk_f32":  # D = S0 * K + S1, written "D, S0, K, S1"
        return lambda st, w: out(st, w, fma_f32(f(st, w, 0), f(st, w, 1), f(st, w, 2)))
    raw = srcs[0]

    def src_bits(st: WaveState, w: Sel) -> Any:
        return np.broadcast_to(np.asarray(raw(st, w), np.uint32), (_n(st, w),))
    if name == "s_cvt_f32_i32":
        return lambda st, w: out(st, w, src_bits(st, w).view(np.int32).astype(np.float32))
    if name == "s_cvt_f32_u32":
        return lambda st, w: out(st, w, src_bits(st, w).astype(np.float32))
    if name == "s_cvt_i32_f32":
        return lambda st, w: d(st, w, cvt_f32_to_i32(_f32(src_bits(st, w))))
    if name == "s_cvt_u32_f32":
        return lambda st, w: d(st, w, cvt_f32_to_u32(_f32(src_bits(st, w))))
    if name in ("s_cvt_f32_f16", "s_cvt_hi_f32_f16"):
        shift = 16 if "hi" in name else 0
        return lambda st, w: out(st, w, f16_to_f32(
            ((src_bits(st, w) >> shift) & 0xFFFF).astype(np.uint16).view(np.float16)))
    # s_cvt_f16_f32
    dr = sreader(ops[0])
    return lambda st, w: d(st, w, (np.asarray(dr(st, w), np.uint32) & 0xFFFF0000)
                           | f32_to_f16(_f32(src_bits(st, w))).view(np.uint16))


def _n(st: WaveState, w: Sel) -> int:
    return st.n if isinstance(w, slice) else len(w)


def _set_scc(st: WaveState, w: Sel, c: Any) -> None:
    st.S[SCC][w] = np.asarray(c, bool)


_SAVEEXEC = {
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
    "nand": lambda s, e: ~(s & e), "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e),
    "and_not0": lambda s, e: ~s & e, "and_not1": lambda s, e: s & ~e,
    "or_not0": lambda s, e: ~s | e, "or_not1": lambda s, e: s | ~e,
}


def _sop1(name: str, ops: list[Any], ins: Instruction) -> tuple[Fn, str] | None:
    if name.endswith(("_saveexec_b32", "_wrexec_b32", "_saveexec_b64", "_wrexec_b64")):
        kind = name[2:].rsplit("_", 2)[0]
        op = _SAVEEXEC.get(kind)
        if op is None:
            return None
        wide = name.endswith("_b64")
        dtype = np.uint64 if wide else np.uint32
        d, a = swriter(ops[0], 64 if wide else 32), sreader(ops[1], 64 if wide else 32)
        exec_r = sreader(parse_operand("exec" if wide else "exec_lo"), 64 if wide else 32)
        exec_w = swriter(parse_operand("exec" if wide else "exec_lo"), 64 if wide else 32)
        wr = "_wrexec_" in name

        def saveexec(st: WaveState, w: Sel) -> None:
            old = np.asarray(exec_r(st, w), dtype).copy()
            new = np.asarray(op(np.asarray(a(st, w), dtype), old), dtype)
            if not wr:
                d(st, w, old)
            exec_w(st, w, new)
            _set_scc(st, w, new != 0)
            if wr:
                d(st, w, new)
        return saveexec, "SALU"
    width = 64 if name.endswith("_b64") else 32
    if name in ("s_mov_b32", "s_mov_b64", "s_cmov_b32", "s_cmov_b64"):
        d, a = swriter(ops[0], width), sreader(ops[1], width)
        if name.startswith("s_cmov"):
            dr = sreader(ops[0], width)
            return (lambda st, w: d(st, w, np.where(st.S[SCC][w] != 0, a(st, w),
                                                    dr(st, w)))), "SALU"
        return (lambda st, w: d(st, w, a(st, w))), "SALU"
    if name in ("s_not_b32", "s_not_b64"):
        d, a = swriter(ops[0], width), sreader(ops[1], width)

        def snot(st: WaveState, w: Sel) -> None:
            r = ~np.asarray(a(st, w))
            _set_scc(st, w, np.broadcast_to(r != 0, (_n(st, w),)))
            d(st, w, r)
        return snot, "SALU"
    one: dict[str, Callable[[Any], tuple[Any, bool]]] = {
        "s_brev_b32": lambda x: (_brev32(x), False),
        "s_bcnt1_i32_b32": lambda x: (_popcount(x), True),
        "s_bcnt0_i32_b32": lambda x: (32 - _popcount(x), True),
        "s_ctz_i32_b32": lambda x: (_ctz(x), False),
        "s_clz_i32_u32": lambda x: (_clz(x), False),
        "s_sext_i32_i8": lambda x: (((x & 0xFF) ^ 0x80) - 0x80, False),
        "s_sext_i32_i16": lambda x: (((x & 0xFFFF) ^ 0x8000) - 0x8000, False),
        "s_abs_i32": lambda x: (np.abs(_s(x)), True),
    }
    if name in one:
        fn = one[name]
        d, a = swriter(ops[0]), sreader(ops[1])

        def unary(st: WaveState, w: Sel) -> None:
            r, sets = fn(np.broadcast_to(_u(a(st, w)), (_n(st, w),)))
            if sets:
                _set_scc(st, w, r != 0)
            d(st, w, _lo(r))
        return unary, "SALU"
    if name in ("s_bcnt1_i32_b64", "s_bcnt0_i32_b64"):
        d, a = swriter(ops[0]), sreader(ops[1], 64)

        def bcnt64(st: WaveState, w: Sel) -> None:
            x = np.broadcast_to(np.asarray(a(st, w), np.uint64), (_n(st, w),))
            r = _popcount((x & np.uint64(0xFFFFFFFF)).astype(np.int64)) + \
                _popcount((x >> np.uint64(32)).astype(np.int64))
            if name.startswith("s_bcnt0"):
                r = 64 - r
            _set_scc(st, w, r != 0)
            d(st, w, _lo(r))
        return bcnt64, "SALU"
    if name in ("s_bitset0_b32", "s_bitset1_b32"):
        d, dr, a = swriter(ops[0]), sreader(ops[0]), sreader(ops[1])
        if name == "s_bitset1_b32":
            return (lambda st, w: d(st, w, _lo(_u(dr(st, w)) | (1 << (_u(a(st, w)) & 31))))), \
                "SALU"
        return (lambda st, w: d(st, w, _lo(_u(dr(st, w)) & ~(1 << (_u(a(st, w)) & 31))))), "SALU"
    return None


def _popcount(x: Any) -> Any:
    x = np.asarray(x, np.int64)
    return np.unpackbits(x.astype("<u4").view(np.uint8).reshape(*x.shape, 4), axis=-1) \
        .sum(axis=-1).astype(np.int64)


def _ctz(x: Any) -> Any:
    x = np.asarray(x, np.int64)
    low = x & -x
    r = np.where(x == 0, -1, np.log2(np.maximum(low, 1)).astype(np.int64))
    return r


def _clz(x: Any) -> Any:
    x = np.asarray(x, np.int64)
    hi = np.floor(np.log2(np.maximum(x, 1))).astype(np.int64)
    return np.where(x == 0, -1, 31 - hi)


def _brev32(x: Any) -> Any:
    x = np.asarray(x, np.int64).astype("<u4")
    b = np.unpackbits(x.view(np.uint8).reshape(*x.shape, 4), axis=-1, bitorder="little")
    return np.packbits(b[..., ::-1], axis=-1, bitorder="little").view("<u4")[..., 0] \
        .astype(np.int64)

