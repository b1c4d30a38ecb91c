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

#if defined(HQ_CUDA)
// NVIDIA only: int->float conversion (I2F) issues at a quarter of the FMA rate, and with
// eight per payload dword it, not memory, limited this kernel on an H200 (1.4-1.7 TB/s of
// 4.2 TB/s copy bandwidth).  A nibble q in [0, 15] ORed into the mantissa of 2^23 is the
// float 2^23 + q exactly and subtracting 2^23 leaves q exactly, so every weight and every
// rounding after it is bit-identical to hq4_dot8's; qt=1/44/45 still share this body.
static HQ_DEVICE float gemv_dot8(unsigned int q, float sc, float zp, hq_float4 x0, hq_float4 x1,
                                 float acc) {
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        const float qf = __uint_as_float(((q >> (4 * j)) & 0xFu) | 0x4B000000u) - 8388608.0f;
        const float w = qf * sc + zp;
        acc = w * xs[j] + acc;
    }
    return acc;
}
#else
#define gemv_dot8 hq4_dot8  // AMD: v_cvt_f32_ubyte/v_bfe are full rate; code unchanged
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
            #pragma unroll
            for (int r = 0; r < R; ++r) {
                float sc, zp;
                Hdr::decode(h[u][r], boff, sc, zp);
                acc[r] = gemv_dot8(q[u][r], sc, zp, xa[u], xb[u], acc[r]);
            }
        }
    }
    for (; g < groups; ++g) {  // remainder: same arithmetic, one group at a time
        const float* xp = x + g * 256 + lane * 8;
        const hq_float4 xa = *reinterpret_cast<const hq_float4*>(xp);
        const hq_float4 xb = *reinterpret_cast<const hq_float4*>(xp + 4);
        #pragma unroll
        for (int r = 0; r < R; ++r) {
            const unsigned char* __restrict__ gp = wr[r] + g * GB;
            const Hq4Raw h = Hdr::load(gp, boff);
            const unsigned int q =
                *reinterpret_cast<const unsigned int*>(gp + Hdr::kPayloadOffset + boff);
            float sc, zp;
            Hdr::decode(h, boff, sc, zp);
            acc[r] = gemv_dot8(q, sc, zp, xa, xb, acc[r]);
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
