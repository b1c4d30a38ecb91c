// Decode GEMV body for the 136 B / 256-weight family, one template instantiated per
// header decoder (hq4_header.h).  Kernel symbols are made with HQ_GEMV / HQ_GEMV_QKV /
// HQ_GEMV_FORMAT in kernels/gemv_hfq4g256.hip and, deliberately broken, in
// kernels/mutants/.  ABI: docs/ARCHITECTURE.md.
#ifndef HQ4_GEMV_H
#define HQ4_GEMV_H

#include "hq4_header.h"

#ifndef HQ_GEMV_UNROLL
#define HQ_GEMV_UNROLL 4  // groups in flight per lane: loads of all of them precede the math
#endif

// Timing mutants (hqval.timing.mutants): with HQ_TIMING_SLOW = k (1..256) the
// kernel makes a redundant second pass over k/256 of its groups -- the group is loaded
// again (through an index the compiler cannot prove equal, so the loads are real; they
// hit L1/L2), decoded and dotted again -- and adds that result times an opaque zero, so
// every output is unchanged: only slower.  Which groups: a hash of (block, group), the
// same for every lane of a block (no divergence, addresses stay lane-invariant).
// Undefined or 0: compiled out, and the kernel is the real one instruction for
// instruction -- the mutant's unslowed twin.  Not nanosleep: a sleep's cost on the H200
// was not proportional to its length (40 ns per group 0.4%, 300 ns 16%, measured on the H200).
#ifndef HQ_TIMING_SLOW
#define HQ_TIMING_SLOW 0
#endif
#ifndef HQ_TIMING_EXTRA
#define HQ_TIMING_EXTRA 0  // the fine-grained kind, below
#endif
#ifndef HQ_TIMING_CHAIN
#define HQ_TIMING_CHAIN 0  // the latency kind, below
#endif
// The redundant pass must not cost occupancy on NVIDIA (a cliff, not a controllable
// amount): the R=8 twin uses 72 registers, the most that keeps 27648 rows in one wave of
// 26.2 blocks per SM; the mutant is held to the same budget (at least 28 blocks of 32
// threads per SM: 65536 / (28 * 32) = 73 -> 72 registers).
#if HQ_TIMING_SLOW > 0 || HQ_TIMING_EXTRA > 0 || HQ_TIMING_CHAIN > 0
#define HQ_GEMV_BOUNDS HQ_LAUNCH_BOUNDS_MIN(32, 28)
#else
#define HQ_GEMV_BOUNDS HQ_LAUNCH_BOUNDS(32)
#endif
// Timing mutants, the fine-grained kind: with HQ_TIMING_EXTRA = m (1..32) every group
// does m redundant steps of work on values the compiler cannot see through (per-weight
// path: m value-preserving fmas a group-row; tensor cores: m mma a group), so the extra
// work is the same in every warp and needs no test in the loop.
#if HQ_TIMING_EXTRA > 0
static HQ_DEVICE float gemv_extra_work(float acc) {
    float one = 1.0f, zero = 0.0f;
    HQ_OPAQUE(one);
    HQ_OPAQUE(zero);
    #pragma unroll
    for (int j = 0; j < HQ_TIMING_EXTRA; ++j) {
        acc = acc * one + zero;  // exact: x * 1 + 0 == x (a -0 becomes +0)
        HQ_OPAQUE(acc);
    }
    return acc;
}
#endif
// Timing mutants, the latency kind: with HQ_TIMING_CHAIN = n (1..256) every lane ends its
// row with n dependent loads of its own word of a shared-memory array (each index is the
// previous word ANDed with a zero the compilers cannot know, so each load waits for the
// one before), then adds (last word AND zero) = +0.0f: outputs unchanged.  No test and no
// work in the group loop, the same in every lane and warp: the cost is n shared-memory
// round trips after each warp's last group, additive in n while the grid runs in one
// wave.  Shared memory, so the first step costs what the others do: a chain through the
// row's global words cost +2-3% at n = 4 on the H200 (its first load missed L1), then
// +0.1-0.25% a step.  The zero is M >> 31 (M > 0): an empty asm is no barrier to ptxas,
// which folded an asm-laundered constant 0 and with it the whole chain (chain256 +0.0%).
#if HQ_TIMING_CHAIN > 0
static HQ_DEVICE float gemv_timing_chain(int M, float acc) {
#if defined(HQ_CUDA)
    __shared__ unsigned int chain[HQ_WAVE];
#else
    __attribute__((shared)) unsigned int chain[HQ_WAVE];
#endif
    const unsigned int lane = hq_lane();
    chain[lane] = lane;  // each lane reads back only its own word: no barrier needed
    unsigned int z = static_cast<unsigned int>(M) >> 31;  // 0: M is a positive row count
    HQ_OPAQUE_UNIFORM(z);
    unsigned int v = 0u;
    #pragma unroll 1
    for (int j = 0; j < HQ_TIMING_CHAIN; ++j) v = chain[lane + (v & z)];
    return acc + static_cast<float>(v & z);  // exact: acc + 0 (a -0 becomes +0)
}
#endif
static HQ_DEVICE bool hq_timing_slow_pick(unsigned int block, int g) {
    return ((block * 0x9E3779B1u + static_cast<unsigned int>(g) * 0x85EBCA77u) >> 24) <
           static_cast<unsigned int>(HQ_TIMING_SLOW);
}

// The activations of one group as one lane sees them (weights 8t..8t+7), prepared once per
// group and shared by the R rows of a block.
#if defined(HQ_CUDA)
// NVIDIA only.  Profiled on an H200 (ncu), the per-weight form below (extract, convert,
// fma with scale and zero, fma with x: 5 instructions per weight) made the kernel
// instruction-bound at 1.4-1.6 TB/s of 4.2 TB/s copy bandwidth.  Here:
//   sum_j (q_j sc + zp) x_j = sc * sum_j q_j x_j + zp * S,   S = sum_j x_j,
// and q_j becomes the float 16 + q_j exactly by placing the nibble in the top four
// mantissa bits of 16.0f (one shift, one lop3; no int->float conversion), so
//   sum_j q_j x_j = sum_j (16 + q_j) x_j - 16 S,
// accumulated from -16 S in one fma chain.  3 instructions per weight plus 2 per
// group-row; S is per group, shared by the R rows.  The rounding differs from
// hq4_dot8's (one extra rounding of S, a cancellation against 16 S), within the
// GEMV parity bound by orders of magnitude; qt=6/44/45 all use this same arithmetic, so
// bit identity between them on equal halves is unchanged.
struct GemvX {
    hq_float4 a, b;
    float s;      // S
    float m16s;   // -16 S (exact given S)
};
static HQ_DEVICE GemvX gemv_x(hq_float4 a, hq_float4 b) {
    const float s = ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w));
    return GemvX{a, b, s, -16.0f * s};
}
static HQ_DEVICE float gemv_q16(unsigned int v) {  // v: nibble at bits 19..22
    return __uint_as_float((v & 0x00780000u) | 0x41800000u);  // 16 + nibble, exactly
}
static HQ_DEVICE float gemv_dot8(unsigned int q, float sc, float zp, const GemvX& x,
                                 float acc) {
    float d = x.m16s;
    d = gemv_q16(q << 19) * x.a.x + d;
    d = gemv_q16(q << 15) * x.a.y + d;
    d = gemv_q16(q << 11) * x.a.z + d;
    d = gemv_q16(q << 7) * x.a.w + d;
    d = gemv_q16(q << 3) * x.b.x + d;
    d = gemv_q16(q >> 1) * x.b.y + d;
    d = gemv_q16(q >> 5) * x.b.z + d;
    d = gemv_q16(q >> 9) * x.b.w + d;
    return sc * d + (zp * x.s + acc);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// NVIDIA sm_80+, R = 8 only: the group dot products on the tensor cores.  The per-weight
// path above stays issue-bound (ncu on the H200: ~56 warp instructions per group-row
// against a budget of ~45 at 75% of copy bandwidth); here one warp turns 8 rows x 256
// weights into 8 mma.sync.m16n8k16 (f16 x f16 -> f32) instead of 2048 fmas.
//
// Operands of mma m16n8k16 (.row.col), lane = 4g + t:
//   A (16x16, weights): a0 = A[g][2t,2t+1]   a1 = A[g+8][2t,2t+1]
//                       a2 = A[g][2t+8,2t+9] a3 = A[g+8][2t+8,2t+9]
//     A row g = block row g, weights of half 0 (payload bytes 0..63); A row g+8 = the same
//     row, half 1 (bytes 64..127).  So each lane decodes only its own row g.
//   B (16x8, activations): b0 = B[2t,2t+1][g], b1 = B[2t+8,2t+9][g]
//     column 0 = hi(x) of half 0, 1 = lo'(x) of half 0, 2 = hi(x) of half 1,
//     3 = lo'(x) of half 1, columns 4..7 repeat 0..3 (lane g reads column g & 3).
//   C (16x8): d0,d1 = C[g][2t,2t+1], d2,d3 = C[g+8][2t,2t+1]; the useful entries are
//     C[g][0..1] (row g, half 0; lanes t = 0, 2) and C[g+8][2..3] (half 1; t = 1, 3).
//     The other entries pair one half's weights with the other half's x and are dropped.
// Nibbles q in 0..15 are exact in fp16: lop3 puts a nibble pair into the mantissas of
// half2(1024, 1024), one f16x2 fma takes 1024 (or 64 after a 1/16 scale) off again.
// x = hi + 2^-11 lo' with hi = f16(x), lo' = f16(2^11 (x - hi)) (x - hi is exact; the
// 2^11 keeps lo' out of the fp16 subnormals, so the split is good to ~2^-22 relative down
// to |x| ~ 2^-14 and to ~2^-35 absolute below); the products q*hi, q*lo' are exact and
// summed with f32 accumulation by the tensor core (not IEEE round-to-nearest at every
// step; reference parity on the H200 <= 4.6e-7 against the bound 1e-4).
// A dot product does not care about k order, so the tile k order is a permutation chosen
// for the loads: lane t holds payload bytes [8t, 8t+8) and [32+8t, 32+8t+8) of each half
// (two 8-byte loads per half; 136 B groups are only 8-byte aligned), i.e. words
// i = 0..3 with weights base_i(t) + 0..7 of the half, base_i(t) = 64(i>>1) + 16t + 8(i&1).
// mma m (0..7) takes word i = m>>1: a0/a1 the nibble pair (j, j+4) with j = 2(m&1),
// a2/a3 the pair (j+1, j+5); B carries x of the same weights, built once per group by
// the whole warp and passed through shared memory (a 32-thread block needs only
// __syncwarp).  Per group and half h the lane that owns C[.][h] adds
//   sc_h * P_h + zp_h * S_h,  P_h = sum q x over the half,  S_h = sum x over the half,
// with (sc_h, zp_h) from Hdr::decode(raw, 64 h): the half is the payload byte offset of
// the tile's weights, the same layout rule as the per-weight path.  qt=6/44/45 share
// every instruction except Hdr::load/decode, so equal halves stay bit-identical.
#define HQ_GEMV_TC 1

static HQ_DEVICE unsigned int gemv_tc_pack_f16x2(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
static HQ_DEVICE void gemv_tc_unpack_f16x2(unsigned int v, float& lo, float& hi) {
    unsigned short a, b;
    asm("mov.b32 {%0, %1}, %2;" : "=h"(a), "=h"(b) : "r"(v));
    lo = hq_half_to_float(a);
    hi = hq_half_to_float(b);
}
static HQ_DEVICE unsigned int gemv_tc_hfma2(unsigned int a, unsigned int b, unsigned int c) {
    unsigned int r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
// Nibbles (j, j+4) of w for j = 0 (sel 0) or j = 1 (sel 1) as an exact half2 (q_j, q_j+4).
// magic = 0x64006400 (half2(1024, 1024)), passed in so it stays in one register.
static HQ_DEVICE unsigned int gemv_tc_q01(unsigned int w, int sel, unsigned int magic) {
    unsigned int v;
    if (sel == 0) {  // 1024 + q
        asm("lop3.b32 %0, %1, 0x000F000F, %2, 0xEA;" : "=r"(v) : "r"(w), "r"(magic));
        return gemv_tc_hfma2(v, 0x3C003C00u, 0xE400E400u);        // v * 1 - 1024
    }
    asm("lop3.b32 %0, %1, 0x00F000F0, %2, 0xEA;" : "=r"(v) : "r"(w), "r"(magic));  // 1024 + 16 q
    return gemv_tc_hfma2(v, 0x2C002C00u, 0xD400D400u);            // v / 16 - 64
}
static HQ_DEVICE void gemv_tc_mma(float& d0, float& d1, float& d2, float& d3, unsigned int a0,
                                  unsigned int a1, unsigned int a2, unsigned int a3,
                                  unsigned int b0, unsigned int b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Loads of the tensor-core path: plain ld.global (not .nc) in volatile asm.  ptxas moves
// .nc (read-only) loads freely and schedules them next to their first use, which left one
// group in flight per warp; an ordinary load is not moved across the __syncwarp that
// follows it, so the pipeline below keeps its loads ahead of the math.
static HQ_DEVICE uint2 gemv_tc_ld64(const unsigned char* __restrict__ p) {
    uint2 r;
    asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}
static HQ_DEVICE hq_float4 gemv_tc_ldx(const float* __restrict__ p) {
    hq_float4 r;
    asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w) : "l"(p));
    return r;
}

// The activations of one group, x[8L, 8L+8) in lane L, split into the B fragment layout
// of shared slot xsu, and S of the lane's half (lanes 0..15 half 0, 16..31 half 1).
// Lane L: half c = L >> 4, L' = L & 15 = 8(i>>1) + 2t + (i&1).  Slot layout: 16 blocks
// b = 4 role + t (role = 2c + part, part 0 = hi, 1 = lo') of four uint4 (word i = chunk
// k), chunk k of block b stored at uint4 b*4 + ((k + (b>>1)) & 3) so the readers' 128-bit
// loads (8 lanes per phase, blocks b..b+7) hit distinct banks.
static HQ_DEVICE float gemv_tc_split_x(hq_float4 va, hq_float4 vb, unsigned int lane,
                                       uint4* xsu) {
    const unsigned int c = lane >> 4, lp = lane & 15u;
    const unsigned int i = ((lp >> 3) << 1) | (lp & 1u), t = (lp >> 1) & 3u;
    const float v[8] = {va.x, va.y, va.z, va.w, vb.x, vb.y, vb.z, vb.w};
    unsigned int hi[4], lo[4];
    #pragma unroll
    for (int j = 0; j < 4; ++j) {  // pair (j, j+4): order b0(m even), b1, b0(m odd), b1
        hi[j] = gemv_tc_pack_f16x2(v[j], v[j + 4]);
        float h0, h1;
        gemv_tc_unpack_f16x2(hi[j], h0, h1);
        lo[j] = gemv_tc_pack_f16x2((v[j] - h0) * 2048.0f, (v[j + 4] - h1) * 2048.0f);
    }
    const unsigned int bh = (2u * c) * 4u + t, bl = (2u * c + 1u) * 4u + t;
    xsu[bh * 4u + ((i + (bh >> 1)) & 3u)] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    xsu[bl * 4u + ((i + (bl >> 1)) & 3u)] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    float sum = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
    #pragma unroll
    for (int off = 1; off < 16; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    return sum;
}

// One group of the 8 rows once its x split is in xsu: 8 mma, then the scale step.
// wd = the lane's payload words (bytes 8t, 8t+4, 32+8t, 32+8t+4 of half 0, then half 1).
template <class Hdr>
HQ_DEVICE float gemv_tc_group(Hq4Raw h, uint4 wlo, uint4 whi, const uint4* xsu, float s,
                              unsigned int lane, float acc) {
    const unsigned int g = lane >> 2, t = lane & 3u, half = t & 1u;
    const unsigned int magic = 0x64006400u;
    const unsigned int b = (g & 3u) * 4u + t;
    uint4 xb[4];
    #pragma unroll
    for (int k = 0; k < 4; ++k) xb[k] = xsu[b * 4u + ((k + (b >> 1)) & 3u)];
    const unsigned int wh0[4] = {wlo.x, wlo.y, wlo.z, wlo.w};
    const unsigned int wh1[4] = {whi.x, whi.y, whi.z, whi.w};
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
    unsigned int last[6] = {0u, 0u, 0u, 0u, 0u, 0u};  // the last mma's operands
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned int xw[4] = {xb[i].x, xb[i].y, xb[i].z, xb[i].w};
        const unsigned int p0 = wh0[i] >> 8, p1 = wh1[i] >> 8;
        // m = 2i: pairs (0,4) and (1,5);  m = 2i+1: pairs (2,6) and (3,7)
        gemv_tc_mma(d0, d1, d2, d3, gemv_tc_q01(wh0[i], 0, magic), gemv_tc_q01(wh1[i], 0, magic),
                    gemv_tc_q01(wh0[i], 1, magic), gemv_tc_q01(wh1[i], 1, magic), xw[0], xw[1]);
        const unsigned int a0 = gemv_tc_q01(p0, 0, magic), a1 = gemv_tc_q01(p1, 0, magic);
        const unsigned int a2 = gemv_tc_q01(p0, 1, magic), a3 = gemv_tc_q01(p1, 1, magic);
        gemv_tc_mma(d0, d1, d2, d3, a0, a1, a2, a3, xw[2], xw[3]);
        if (i == 3) {
            last[0] = a0; last[1] = a1; last[2] = a2; last[3] = a3;
            last[4] = xw[2]; last[5] = xw[3];
        }
    }
#if HQ_TIMING_EXTRA > 0
    // Timing mutants (HQ_TIMING_EXTRA): that many redundant mma per group on the group's
    // own last operands, in two independent chains, added back times an opaque zero.
    {
        float e[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        #pragma unroll
        for (int j = 0; j < HQ_TIMING_EXTRA; ++j) {
            float* c = e + 4 * (j & 1);
            gemv_tc_mma(c[0], c[1], c[2], c[3], last[0], last[1], last[2], last[3], last[4],
                        last[5]);
        }
        float zero = 0.0f;
        HQ_OPAQUE(zero);
        acc = (((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]))) * zero + acc;
    }
#else
    (void)last;
#endif
    const float p = half ? (d2 + d3 * 0x1p-11f) : (d0 + d1 * 0x1p-11f);
    const float sh = __shfl_sync(0xffffffffu, s, half * 16u);
    float sc, zp;
    Hdr::decode(h, half * 64u, sc, zp);
    return sc * p + (zp * sh + acc);
}

// One group straight from global memory (the groups past the last full chunk).
template <class Hdr>
HQ_DEVICE float gemv_tc_direct(const unsigned char* __restrict__ wr, const float* __restrict__ x,
                               int gi, unsigned int lane, uint4* xsu, float acc) {
    const unsigned int t = lane & 3u;
    const unsigned char* __restrict__ gp = wr + gi * Hdr::kGroupBytes;
    const unsigned char* __restrict__ pp = gp + Hdr::kPayloadOffset + 8u * t;
    const Hq4Raw h = Hdr::load(gp, (t & 1u) * 64u);
    const uint2 w0 = gemv_tc_ld64(pp), w1 = gemv_tc_ld64(pp + 32);
    const uint2 w2 = gemv_tc_ld64(pp + 64), w3 = gemv_tc_ld64(pp + 96);
    const float* xp = x + gi * 256 + lane * 8;
    const float s = gemv_tc_split_x(*reinterpret_cast<const hq_float4*>(xp),
                                    *reinterpret_cast<const hq_float4*>(xp + 4), lane, xsu);
    __syncwarp();
    acc = gemv_tc_group<Hdr>(h, make_uint4(w0.x, w0.y, w1.x, w1.y),
                             make_uint4(w2.x, w2.y, w3.x, w3.y), xsu, s, lane, acc);
    __syncwarp();  // xsu is rewritten by the next group
    return acc;
}

#ifndef HQ_GEMV_TC_GROUPS
#define HQ_GEMV_TC_GROUPS 1  // groups per chunk; the next chunk is loaded during this one
#endif

// Timing mutants: the redundant pass over the picked groups of chunk c (see HQ_TIMING_SLOW),
// right after chunk c's math, while xs still holds chunk c's x split: the group's header
// and payload are loaded again and its 8 mma redone (S is left out -- the result is
// discarded -- which keeps the pass inside the twin's 72 registers).
template <class Hdr, int U>
HQ_DEVICE float gemv_tc_redundant(const unsigned char* __restrict__ wr, int c,
                                  unsigned int block, unsigned int lane, uint4 (*xs)[64],
                                  float acc) {
#if HQ_TIMING_SLOW > 0
    #pragma unroll
    for (int u = 0; u < U; ++u) {
        int gi = c * U + u;
        if (hq_timing_slow_pick(block, gi)) {
            HQ_OPAQUE_UNIFORM(gi);
            float zero = 0.0f;
            HQ_OPAQUE(zero);
            const unsigned int t = lane & 3u;
            const unsigned char* __restrict__ gp = wr + gi * Hdr::kGroupBytes;
            const unsigned char* __restrict__ pp = gp + Hdr::kPayloadOffset + 8u * t;
            const Hq4Raw h = Hdr::load(gp, (t & 1u) * 64u);
            const uint2 w0 = gemv_tc_ld64(pp), w1 = gemv_tc_ld64(pp + 32);
            const uint2 w2 = gemv_tc_ld64(pp + 64), w3 = gemv_tc_ld64(pp + 96);
            const float e = gemv_tc_group<Hdr>(h, make_uint4(w0.x, w0.y, w1.x, w1.y),
                                               make_uint4(w2.x, w2.y, w3.x, w3.y), xs[u], zero,
                                               lane, 0.0f);
            acc = e * zero + acc;
        }
    }
#endif
    return acc;
}

// One chunk's operands in registers: headers, payload words, x.
template <int U>
struct GemvTcRegs {
    Hq4Raw h[U];
    uint4 wlo[U], whi[U];
    hq_float4 xa[U], xb[U];
};

template <class Hdr, int U>
HQ_DEVICE void gemv_tc_load(const unsigned char* __restrict__ wr, const float* __restrict__ x,
                            int g0, unsigned int lane, GemvTcRegs<U>& r) {
    const unsigned int t = lane & 3u;
    #pragma unroll
    for (int u = 0; u < U; ++u) {
        const unsigned char* __restrict__ gp = wr + (g0 + u) * Hdr::kGroupBytes;
        const unsigned char* __restrict__ pp = gp + Hdr::kPayloadOffset + 8u * t;
        r.h[u] = Hdr::load(gp, (t & 1u) * 64u);
        const uint2 w0 = gemv_tc_ld64(pp), w1 = gemv_tc_ld64(pp + 32);
        const uint2 w2 = gemv_tc_ld64(pp + 64), w3 = gemv_tc_ld64(pp + 96);
        r.wlo[u] = make_uint4(w0.x, w0.y, w1.x, w1.y);
        r.whi[u] = make_uint4(w2.x, w2.y, w3.x, w3.y);
        const float* xp = x + (g0 + u) * 256 + lane * 8;
        r.xa[u] = gemv_tc_ldx(xp);
        r.xb[u] = gemv_tc_ldx(xp + 4);
    }
}

template <class Hdr, int U>
HQ_DEVICE float gemv_tc_compute(const GemvTcRegs<U>& r, unsigned int lane, uint4 (*xs)[64],
                                float acc) {
    float s[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) s[u] = gemv_tc_split_x(r.xa[u], r.xb[u], lane, xs[u]);
    __syncwarp();
    #pragma unroll
    for (int u = 0; u < U; ++u) acc = gemv_tc_group<Hdr>(r.h[u], r.wlo[u], r.whi[u], xs[u], s[u], lane, acc);
    __syncwarp();  // xs is rewritten by the next chunk
    return acc;
}

// Software pipeline in registers: the loads of chunk c + 1 are issued before the math of
// chunk c and consumed only in the next iteration, so they cannot be scheduled next to
// their use.  The last iteration re-loads its own chunk instead of branching (an L1/L2 hit,
// once per block).  Measured on the H200, cold, R=8, us at 17408x5120 / 27648x5120
// (reports/checkpoints/2026-11-29-h200-gemv-c): loads in the same iteration as their use
// were scheduled next to it, one group in flight per warp (27.7 / 37.1); a cp.async
// pipeline through shared memory was 4x slower (105-169); chunks of 2 / 4 groups need
// 122 / 174 registers and ran 27.2 / 35.8 and 27.0 / 37.9; one group per chunk (72
// registers, 28 warps per SM) 22.7 / 30.5, the default.  Occupancy decides: one warp per
// block and 16.5 (17408 rows) to 26 (27648 rows) blocks per SM.  Unrolled by two (no
// register copies) 22.46 / 30.50 against 23.23 / 30.82 in the same device run; deeper
// rings, L2 prefetch hints and a 64-biased nibble decode measured within +-5%, and a
// TMA (cp.async.bulk) shared-memory pipeline 32.6 / 47.7 (2026-11-29-h200-gemv-d).
template <class Hdr, bool Residual>
HQ_DEVICE void gemv_rows_tc8(const unsigned char* __restrict__ W, const float* __restrict__ x,
                             float* __restrict__ y, int M, int K, unsigned int block) {
    constexpr int U = HQ_GEMV_TC_GROUPS;
    static_assert(U >= 1, "HQ_GEMV_TC_GROUPS >= 1");
    __shared__ uint4 xs[U][64];
    const unsigned int lane = hq_lane();
    const int groups = K >> 8;
    const unsigned long long row_bytes = static_cast<unsigned long long>(groups) * Hdr::kGroupBytes;
    const int row = static_cast<int>(block) * 8 + static_cast<int>(lane >> 2);
    const int lrow = row < M ? row : M - 1;  // tail rows re-read the last row; never stored
    const unsigned char* __restrict__ wr = W + static_cast<unsigned long long>(lrow) * row_bytes;
    const int chunks = groups / U;
    float acc = 0.0f;
    if (chunks > 0) {
        // Two register sets used in turn (the loop is unrolled by two), so the chunk just
        // loaded is never copied from "next" to "current": 16 fewer moves per group.
        GemvTcRegs<U> ra, rb;
        gemv_tc_load<Hdr, U>(wr, x, 0, lane, ra);
        for (int c = 0; c < chunks; c += 2) {
            gemv_tc_load<Hdr, U>(wr, x, (c + 1 < chunks ? c + 1 : c) * U, lane, rb);
            acc = gemv_tc_compute<Hdr, U>(ra, lane, xs, acc);
            acc = gemv_tc_redundant<Hdr, U>(wr, c, block, lane, xs, acc);
            if (c + 1 >= chunks) break;
            gemv_tc_load<Hdr, U>(wr, x, (c + 2 < chunks ? c + 2 : c + 1) * U, lane, ra);
            acc = gemv_tc_compute<Hdr, U>(rb, lane, xs, acc);
            acc = gemv_tc_redundant<Hdr, U>(wr, c + 1, block, lane, xs, acc);
        }
    }
    for (int gi = chunks * U; gi < groups; ++gi) acc = gemv_tc_direct<Hdr>(wr, x, gi, lane, xs[0], acc);
#if HQ_TIMING_CHAIN > 0
    acc = gemv_timing_chain(M, acc);
#endif
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);  // half 0 + half 1 of row lane >> 2
    if ((lane & 3u) == 0 && row < M) y[row] = Residual ? y[row] + acc : acc;
}
#endif  // __CUDA_ARCH__ >= 800
#else
// AMD: the per-weight form (v_bfe/v_cvt are full rate there); this is hq4_dot8 unchanged.
struct GemvX {
    hq_float4 a, b;
};
static HQ_DEVICE GemvX gemv_x(hq_float4 a, hq_float4 b) { return GemvX{a, b}; }
static HQ_DEVICE float gemv_dot8(unsigned int q, float sc, float zp, const GemvX& x,
                                 float acc) {
    return hq4_dot8(q, sc, zp, x.a, x.b, acc);
}
#endif

// Timing mutants: the redundant pass over group g of the per-weight path, if picked (see
// HQ_TIMING_SLOW).
template <class Hdr, int R>
HQ_DEVICE void gemv_redundant(const unsigned char* __restrict__ const* wr,
                              const float* __restrict__ x, int g, unsigned int block,
                              unsigned int boff, unsigned int lane, float* acc) {
    if (!hq_timing_slow_pick(block, g)) return;
    HQ_OPAQUE_UNIFORM(g);
    float zero = 0.0f;
    HQ_OPAQUE(zero);
    const float* xp = x + g * 256 + lane * 8;
    const GemvX xs = gemv_x(*reinterpret_cast<const hq_float4*>(xp),
                            *reinterpret_cast<const hq_float4*>(xp + 4));
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        const unsigned char* __restrict__ gp = wr[r] + g * Hdr::kGroupBytes;
        const Hq4Raw h = Hdr::load(gp, boff);
        const unsigned int q =
            *reinterpret_cast<const unsigned int*>(gp + Hdr::kPayloadOffset + boff);
        float sc, zp;
        Hdr::decode(h, boff, sc, zp);
        acc[r] = gemv_dot8(q, sc, zp, xs, 0.0f) * zero + acc[r];
    }
}

// Where row `row` of a GEMV's result goes: y[row] for the plain ABI; the fused and MoE
// kernels (hq4_fused.h) store elsewhere through the same body.
struct HqStoreY {
    float* __restrict__ y;
    HQ_DEVICE float load(int row) const { return y[row]; }
    HQ_DEVICE void store(int row, float v) const { y[row] = v; }
};

template <class Hdr, int R, bool Residual, class Store>
HQ_DEVICE void gemv_rows_to(const unsigned char* __restrict__ W, const float* __restrict__ x,
                            Store out, int M, int K, unsigned int block) {
    constexpr int U = HQ_GEMV_UNROLL;
    constexpr unsigned int GB = Hdr::kGroupBytes;
    const unsigned int lane = hq_lane();
    const int groups = K >> 8;
    const unsigned long long row_bytes = static_cast<unsigned long long>(groups) * GB;
    // Payload rule (section 2): lane t reads the payload dword at byte 4t, weights 8t..8t+7.
    const unsigned int boff = lane * 4u;

    const unsigned char* __restrict__ wr[R];
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        int row = static_cast<int>(block) * R + r;
        row = row < M ? row : M - 1;  // tail rows re-read the last row; never stored
        wr[r] = W + static_cast<unsigned long long>(row) * row_bytes;
    }

    float acc[R];
    #pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;

    int g = 0;
    for (; g + U <= groups; g += U) {
        hq_float4 xa[U], xb[U];
        Hq4Raw h[U][R];
        unsigned int q[U][R];
        #pragma unroll
        for (int u = 0; u < U; ++u) {
            const float* xp = x + (g + u) * 256 + lane * 8;
            xa[u] = *reinterpret_cast<const hq_float4*>(xp);
            xb[u] = *reinterpret_cast<const hq_float4*>(xp + 4);
            #pragma unroll
            for (int r = 0; r < R; ++r) {
                const unsigned char* __restrict__ gp = wr[r] + (g + u) * GB;
                h[u][r] = Hdr::load(gp, boff);
                q[u][r] = *reinterpret_cast<const unsigned int*>(gp + Hdr::kPayloadOffset + boff);
            }
        }
        #pragma unroll
        for (int u = 0; u < U; ++u) {
            const GemvX xs = gemv_x(xa[u], xb[u]);
            #pragma unroll
            for (int r = 0; r < R; ++r) {
                float sc, zp;
                Hdr::decode(h[u][r], boff, sc, zp);
                acc[r] = gemv_dot8(q[u][r], sc, zp, xs, acc[r]);
#if HQ_TIMING_EXTRA > 0
                acc[r] = gemv_extra_work(acc[r]);
#endif
            }
        }
#if HQ_TIMING_SLOW > 0
        #pragma unroll
        for (int u = 0; u < U; ++u) gemv_redundant<Hdr, R>(wr, x, g + u, block, boff, lane, acc);
#endif
    }
    for (; g < groups; ++g) {  // remainder: same arithmetic, one group at a time
        const float* xp = x + g * 256 + lane * 8;
        const GemvX xs = gemv_x(*reinterpret_cast<const hq_float4*>(xp),
                                *reinterpret_cast<const hq_float4*>(xp + 4));
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            const unsigned char* __restrict__ gp = wr[r] + g * GB;
            const Hq4Raw h = Hdr::load(gp, boff);
            const unsigned int q =
                *reinterpret_cast<const unsigned int*>(gp + Hdr::kPayloadOffset + boff);
            float sc, zp;
            Hdr::decode(h, boff, sc, zp);
            acc[r] = gemv_dot8(q, sc, zp, xs, acc[r]);
#if HQ_TIMING_EXTRA > 0
            acc[r] = gemv_extra_work(acc[r]);
#endif
        }
#if HQ_TIMING_SLOW > 0
        gemv_redundant<Hdr, R>(wr, x, g, block, boff, lane, acc);
#endif
    }
#if HQ_TIMING_CHAIN > 0
    acc[0] = gemv_timing_chain(M, acc[0]);
#endif

    #pragma unroll
    for (int r = 0; r < R; ++r) {
        const float s = hq_wave_sum(acc[r]);
        const int row = static_cast<int>(block) * R + r;
        if (lane == 0 && row < M) out.store(row, Residual ? out.load(row) + s : s);
    }
}

template <class Hdr, int R, bool Residual>
HQ_DEVICE void gemv_rows(const unsigned char* __restrict__ W, const float* __restrict__ x,
                         float* __restrict__ y, int M, int K, unsigned int block) {
#if defined(HQ_GEMV_TC)
    if constexpr (R == 8) {  // NVIDIA sm_80+: tensor cores (above)
        gemv_rows_tc8<Hdr, Residual>(W, x, y, M, K, block);
        return;
    }
#endif
    gemv_rows_to<Hdr, R, Residual>(W, x, HqStoreY{y}, M, K, block);
}

// Fused QKV, one launch for three projections of the same x (ABI in docs/ARCHITECTURE.md):
// NAME(Wq, Wk, Wv, x, yq, yk, yv, Mq, Mk, Mv, K); grid.x = ceil(Mq/R)+ceil(Mk/R)+ceil(Mv/R);
// blocks [0, bq) compute yq, the next ceil(Mk/R) yk, the rest yv.
template <class Hdr, int R>
HQ_DEVICE void gemv_qkv(const unsigned char* __restrict__ Wq, const unsigned char* __restrict__ Wk,
                        const unsigned char* __restrict__ Wv, const float* __restrict__ x,
                        float* __restrict__ yq, float* __restrict__ yk, float* __restrict__ yv,
                        int Mq, int Mk, int Mv, int K) {
    const unsigned int bq = static_cast<unsigned int>((Mq + R - 1) / R);
    const unsigned int bk = static_cast<unsigned int>((Mk + R - 1) / R);
    const unsigned int b = hq_block_x();
    if (b < bq) {
        gemv_rows<Hdr, R, false>(Wq, x, yq, Mq, K, b);
    } else if (b < bq + bk) {
        gemv_rows<Hdr, R, false>(Wk, x, yk, Mk, K, b - bq);
    } else {
        gemv_rows<Hdr, R, false>(Wv, x, yv, Mv, K, b - bq - bk);
    }
}

#define HQ_GEMV(NAME, HDR, R, RES)                                                          \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(const unsigned char* __restrict__ W,                 \
                                             const float* __restrict__ x,                   \
                                             float* __restrict__ y, int M, int K) {         \
        gemv_rows<HDR, R, RES>(W, x, y, M, K, hq_block_x());                                \
    }

#define HQ_GEMV_QKV(NAME, HDR, R)                                                           \
    HQ_GLOBAL void HQ_GEMV_BOUNDS NAME(                                                     \
        const unsigned char* __restrict__ Wq, const unsigned char* __restrict__ Wk,         \
        const unsigned char* __restrict__ Wv, const float* __restrict__ x,                  \
        float* __restrict__ yq, float* __restrict__ yk, float* __restrict__ yv,             \
        int Mq, int Mk, int Mv, int K) {                                                    \
        gemv_qkv<HDR, R>(Wq, Wk, Wv, x, yq, yk, yv, Mq, Mk, Mv, K);                          \
    }

#define HQ_GEMV_FORMAT(PREFIX, HDR)                  \
    HQ_GEMV(PREFIX##_r1, HDR, 1, false)              \
    HQ_GEMV(PREFIX##_r2, HDR, 2, false)              \
    HQ_GEMV(PREFIX##_r4, HDR, 4, false)              \
    HQ_GEMV(PREFIX##_r8, HDR, 8, false)              \
    HQ_GEMV(PREFIX##_residual_r1, HDR, 1, true)      \
    HQ_GEMV(PREFIX##_residual_r2, HDR, 2, true)      \
    HQ_GEMV_QKV(PREFIX##_qkv_r1, HDR, 1)             \
    HQ_GEMV_QKV(PREFIX##_qkv_r2, HDR, 2)

#endif  // HQ4_GEMV_H
