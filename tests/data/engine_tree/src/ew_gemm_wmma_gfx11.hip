// Engine-style prefill GEMM on gfx11 WMMA (hqval test tree): Y[n][m] (+)= W[m,:] . X[n,:].
// One wave32 per 16-row x 16-token tile.  Row-per-lane: lane l dequantises row l%16 of the
// tile itself, so its header words are per-lane (vector) loads of its own row; lanes 16..31
// mirror lanes 0..15 as gfx11's A operand wants.  Weights are dequantised in f16.
// Output element i of lane l is row 2i + l/16, token l%16.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

typedef _Float16 ew_h16 __attribute__((ext_vector_type(16)));
typedef float ew_f8 __attribute__((ext_vector_type(8)));

template <int H, bool RESIDUAL>
static __device__ __forceinline__ void ew_gemm11(const char* __restrict__ W,
                                                 const _Float16* __restrict__ X,
                                                 float* __restrict__ Y, int M, int K, int N) {
    const int m0 = blockIdx.x * 16;
    const int n0 = blockIdx.y * 16;
    const int lane = threadIdx.x;
    const int r = lane & 15;
    const int groups = K / 256;
    const int my_row = (m0 + r < M) ? m0 + r : M - 1;
    const int my_tok = (n0 + r < N) ? n0 + r : N - 1;
    const char* wrow = W + (long long)my_row * EW_ROW_BYTES(groups);
    const _Float16* xrow = X + (long long)my_tok * K;
    ew_f8 acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc0, zp0, sc1, zp1;
        ew_header<H>(gp, 0, sc0, zp0);   // payload bytes 0..63: half 0
        ew_header<H>(gp, 64, sc1, zp1);  // bytes 64..127: half 1
        const _Float16 hs0 = (_Float16)sc0, hz0 = (_Float16)zp0;
        const _Float16 hs1 = (_Float16)sc1, hz1 = (_Float16)zp1;
        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            // k-tile kt is payload bytes 8kt..8kt+7: half 1 from byte 64 on (kt >= 8)
            const _Float16 hs = kt < 8 ? hs0 : hs1;
            const _Float16 hz = kt < 8 ? hz0 : hz1;
            const unsigned int lo = EW_LOAD_PK(gp + 8 + kt * 8);
            const unsigned int hi = EW_LOAD_PK(gp + 12 + kt * 8);
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
        if (m < M && n < N) {
            float* out = Y + (long long)n * M + m;
            *out = RESIDUAL ? *out + acc[i] : acc[i];
        }
    }
}

#define EW_GEMM11_ENTRY(NAME, H, RES)                                                       \
    extern "C" __launch_bounds__(32, 2) __global__ void NAME(                               \
        const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,  \
        int M, int K, int N) {                                                              \
        ew_gemm11<H, RES>(W, X, Y, M, K, N);                                                \
    }

EW_GEMM11_ENTRY(ew_gemm_hfq4g256_wmma_gfx11, EW_F32, false)
EW_GEMM11_ENTRY(ew_gemm_mq4g256v2_wmma_gfx11, EW_V2, false)
EW_GEMM11_ENTRY(ew_gemm_hfq4g256_residual_wmma_gfx11, EW_F32, true)
EW_GEMM11_ENTRY(ew_gemm_mq4g256v2_residual_wmma_gfx11, EW_V2, true)
