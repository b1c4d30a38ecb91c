// Engine-style multi-wave LDS-staged prefill GEMM on gfx11 WMMA (hqval test tree): a block
// of four waves computes 16 rows x 64 tokens (16 per wave).  Per group the block copies the
// 16 rows' 136 B groups into LDS together, waits at a barrier, and each wave dequantises
// from LDS (row-per-lane: lane l reads row l%16's header and payload) into its WMMAs.  The
// group loop's exit test sits after the leading barrier, so the compiler cannot rotate it
// and the loop closes with an unconditional back edge.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

typedef _Float16 ew_h16 __attribute__((ext_vector_type(16)));
typedef float ew_f8 __attribute__((ext_vector_type(8)));

#define EW_TILE_DWORDS (16 * EW_GROUP_BYTES / 4)

template <int H>
static __device__ __forceinline__ void ew_gemm_lds(const char* __restrict__ W,
                                                   const _Float16* __restrict__ X,
                                                   float* __restrict__ Y, int M, int K, int N) {
    __shared__ unsigned int tile[EW_TILE_DWORDS];
    const int m0 = blockIdx.x * 16;
    const int wave = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int n0 = blockIdx.y * 64 + wave * 16;
    const int r = lane & 15;
    const int groups = K / 256;
    const int my_tok = (n0 + r < N) ? n0 + r : N - 1;
    const _Float16* xrow = X + (long long)my_tok * K;
    const long long row_bytes = EW_ROW_BYTES(groups);
    ew_f8 acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int g = 0;; ++g) {
        __syncthreads();  // the previous group's tile is no longer read
        if (g >= groups) break;
        for (int i = threadIdx.x; i < EW_TILE_DWORDS; i += 128) {
            const int tr = i / (EW_GROUP_BYTES / 4), td = i % (EW_GROUP_BYTES / 4);
            const int row = (m0 + tr < M) ? m0 + tr : M - 1;
            tile[i] = EW_LOAD_PK(W + row * row_bytes + g * EW_GROUP_BYTES + 4 * td);
        }
        __syncthreads();
        const char* gp = reinterpret_cast<const char*>(tile) + r * EW_GROUP_BYTES;
        float sc0, zp0, sc1, zp1;
        ew_header<H>(gp, 0, sc0, zp0);
        ew_header<H>(gp, 64, sc1, zp1);
        const _Float16 hs0 = (_Float16)sc0, hz0 = (_Float16)zp0;
        const _Float16 hs1 = (_Float16)sc1, hz1 = (_Float16)zp1;
        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            const _Float16 hs = kt < 8 ? hs0 : hs1;  // payload bytes 64.. are half 1
            const _Float16 hz = kt < 8 ? hz0 : hz1;
            const unsigned int lo = *reinterpret_cast<const unsigned int*>(gp + 8 + kt * 8);
            const unsigned int hi = *reinterpret_cast<const unsigned int*>(gp + 12 + kt * 8);
            ew_h16 a;
            #pragma unroll
            for (int j = 0; j < 8; ++j) {
                a[j] = hs * (_Float16)((lo >> (4 * j)) & 0xFu) + hz;
                a[j + 8] = hs * (_Float16)((hi >> (4 * j)) & 0xFu) + hz;
            }
            const ew_h16 b = *reinterpret_cast<const ew_h16*>(xrow + g * 256 + kt * 16);
            acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, acc);
        }
    }
    const int n = n0 + r;
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + 2 * i + (lane >> 4);
        if (m < M && n < N) Y[(long long)n * M + m] = acc[i];
    }
}

extern "C" __launch_bounds__(128) __global__ void ew_gemm_hfq4g256_lds_gfx11(
    const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,
    int M, int K, int N) {
    ew_gemm_lds<EW_F32>(W, X, Y, M, K, N);
}

extern "C" __launch_bounds__(128) __global__ void ew_gemm_mq4g256v2_lds_gfx11(
    const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,
    int M, int K, int N) {
    ew_gemm_lds<EW_V2>(W, X, Y, M, K, N);
}
