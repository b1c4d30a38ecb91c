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
// GEMV parity bound by orders of magnitude; qt=1/44/45 all use this same arithmetic, so
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

template <class Hdr, int R, bool Residual>
HQ_DEVICE void gemv_rows(const unsigned char* __restrict__ W, const float* __restrict__ x,
                         float* __restrict__ y, int M, int K, unsigned int block) {
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
            }
        }
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
        }
    }

    #pragma unroll
    for (int r = 0; r < R; ++r) {
        const float s = hq_wave_sum(acc[r]);
        const int row = static_cast<int>(block) * R + r;
        if (lane == 0 && row < M) y[row] = Residual ? y[row] + s : s;
    }
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
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(const unsigned char* __restrict__ W,           \
                                             const float* __restrict__ x,                   \
                                             float* __restrict__ y, int M, int K) {         \
        gemv_rows<HDR, R, RES>(W, x, y, M, K, hq_block_x());                                \
    }

#define HQ_GEMV_QKV(NAME, HDR, R)                                                           \
    HQ_GLOBAL void HQ_LAUNCH_BOUNDS(32) NAME(                                               \
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
