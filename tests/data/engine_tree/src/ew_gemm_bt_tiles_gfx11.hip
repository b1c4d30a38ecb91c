// Engine-style batch-tiled residual prefill GEMM on gfx11 WMMA (hqval test tree), qt=44:
// one wave32 per 16-row x (16*EW_BT)-token tile, EW_BT accumulator chains fed by one
// dequantised A fragment per k-tile, Y += W.X.  A block's prologue (a token index per tile)
// and epilogue (8 bounds-checked read-modify-write stores per tile and lane) grow with
// EW_BT and are spent once per block whatever K is: at a K of two groups they outweigh the
// group loop's header decode, so only the marginal cost of a group-row tells the header's
// price.  EW_EXTRA_DEQUANT (a broken copy) dequantises every k-tile a second time.
// Output element i of lane l is row 2i + l/16, token l%16 of its tile.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

#ifndef EW_BT
#define EW_BT 8
#endif
#ifndef EW_GEMM_BT_NAME
#define EW_GEMM_BT_NAME ew_gemm_mq4g256v2_residual_bt8_wmma_gfx11
#endif

typedef _Float16 ew_h16 __attribute__((ext_vector_type(16)));
typedef float ew_f8 __attribute__((ext_vector_type(8)));

static __device__ __forceinline__ ew_h16 ew_tile(unsigned int lo, unsigned int hi,
                                                 _Float16 hs, _Float16 hz) {
    ew_h16 a;
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        a[j] = hs * (_Float16)((lo >> (4 * j)) & 0xFu) + hz;
        a[j + 8] = hs * (_Float16)((hi >> (4 * j)) & 0xFu) + hz;
    }
    return a;
}

extern "C" __launch_bounds__(32, 2) __global__ void EW_GEMM_BT_NAME(
    const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,
    int M, int K, int N) {
    const int m0 = blockIdx.x * 16;
    const int n0 = blockIdx.y * (16 * EW_BT);
    if (m0 >= M || n0 >= N) return;
    const int lane = threadIdx.x;
    const int r = lane & 15;
    const int groups = K / 256;
    const int my_row = (m0 + r < M) ? m0 + r : M - 1;
    const char* wrow = W + (long long)my_row * EW_ROW_BYTES(groups);
    int tok[EW_BT];
    #pragma unroll
    for (int b = 0; b < EW_BT; ++b) {
        const int t = n0 + 16 * b + r;
        tok[b] = (t < N) ? t : 0;
    }
    ew_f8 acc[EW_BT];
    #pragma unroll
    for (int b = 0; b < EW_BT; ++b) acc[b] = ew_f8{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc0, zp0, sc1, zp1;
        ew_header<EW_V2>(gp, 0, sc0, zp0);
        ew_header<EW_V2>(gp, 64, sc1, zp1);
        const _Float16 hs0 = (_Float16)sc0, hz0 = (_Float16)zp0;
        const _Float16 hs1 = (_Float16)sc1, hz1 = (_Float16)zp1;
        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            const _Float16 hs = kt < 8 ? hs0 : hs1;  // payload bytes 64.. are half 1
            const _Float16 hz = kt < 8 ? hz0 : hz1;
            const unsigned int lo = EW_LOAD_PK(gp + 8 + kt * 8);
            const unsigned int hi = EW_LOAD_PK(gp + 12 + kt * 8);
            ew_h16 a = ew_tile(lo, hi, hs, hz);
#ifdef EW_EXTRA_DEQUANT
            // the same fragment decoded again from values the compiler cannot reuse
            const unsigned int lo2 = __builtin_amdgcn_readfirstlane(0) + lo;
            const unsigned int hi2 = __builtin_amdgcn_readfirstlane(0) + hi;
            const ew_h16 a2 = ew_tile(lo2, hi2, hs, hz);
            #pragma unroll
            for (int j = 0; j < 16; ++j) a[j] = (a[j] + a2[j]) * (_Float16)0.5f;
#endif
            #pragma unroll
            for (int b = 0; b < EW_BT; ++b) {
                const ew_h16 xb =
                    *reinterpret_cast<const ew_h16*>(X + (long long)tok[b] * K + g * 256 + kt * 16);
                acc[b] = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, xb, acc[b]);
            }
        }
    }
    #pragma unroll
    for (int b = 0; b < EW_BT; ++b) {
        const int n = n0 + 16 * b + r;
        if (n >= N) continue;
        #pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int m = m0 + 2 * i + (lane >> 4);
            if (m < M) Y[(long long)n * M + m] += acc[b][i];
        }
    }
}
