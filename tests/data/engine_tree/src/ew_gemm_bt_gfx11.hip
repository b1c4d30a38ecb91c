// Engine-style batch-tiled prefill GEMM on gfx11 WMMA (hqval test tree), qt=44 only: one
// wave32 per 16-row x 32-token tile (BT=2): each lane dequantises row l%16 of the tile once
// per k-tile and feeds it to two WMMAs, one per 16-token half of the batch tile.  The engine
// has no v1 kernel of this structure; its baseline is the plain (BT=1) v1 GEMM.
// Output element i of lane l is row 2i + l/16, token l%16 of its half.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

typedef _Float16 ew_h16 __attribute__((ext_vector_type(16)));
typedef float ew_f8 __attribute__((ext_vector_type(8)));

extern "C" __launch_bounds__(32, 2) __global__ void ew_gemm_mq4g256v2_bt2_wmma_gfx11(
    const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,
    int M, int K, int N) {
    const int m0 = blockIdx.x * 16;
    const int n0 = blockIdx.y * 32;
    const int lane = threadIdx.x;
    const int r = lane & 15;
    const int groups = K / 256;
    const int my_row = (m0 + r < M) ? m0 + r : M - 1;
    const int tok0 = (n0 + r < N) ? n0 + r : N - 1;
    const int tok1 = (n0 + 16 + r < N) ? n0 + 16 + r : N - 1;
    const char* wrow = W + (long long)my_row * EW_ROW_BYTES(groups);
    const _Float16* x0 = X + (long long)tok0 * K;
    const _Float16* x1 = X + (long long)tok1 * K;
    ew_f8 acc0 = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    ew_f8 acc1 = acc0;
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
            ew_h16 a;
            #pragma unroll
            for (int j = 0; j < 8; ++j) {
                a[j] = hs * (_Float16)((lo >> (4 * j)) & 0xFu) + hz;
                a[j + 8] = hs * (_Float16)((hi >> (4 * j)) & 0xFu) + hz;
            }
            const ew_h16 b0 = *reinterpret_cast<const ew_h16*>(x0 + g * 256 + kt * 16);
            const ew_h16 b1 = *reinterpret_cast<const ew_h16*>(x1 + g * 256 + kt * 16);
            acc0 = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b0, acc0);
            acc1 = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b1, acc1);
        }
    }
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + 2 * i + (lane >> 4);
        if (m < M && n0 + r < N) Y[(long long)(n0 + r) * M + m] = acc0[i];
        if (m < M && n0 + 16 + r < N) Y[(long long)(n0 + 16 + r) * M + m] = acc1[i];
    }
}
