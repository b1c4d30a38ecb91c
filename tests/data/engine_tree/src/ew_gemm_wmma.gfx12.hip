// Engine-style prefill GEMM on gfx12 WMMA (hqval test tree): Y[n][m] (+)= W[m,:] . X[n,:].
// One wave32 per 16-row x 16-token tile, row-per-lane: lane l reads its own row's headers
// (per-lane loads).  gfx12's operands split K: lane l holds K 8(l/16)..8(l/16)+7 of row /
// token l%16, i.e. payload dword l/16 of each 8-byte k-tile.  The payload's +8 and the
// lane's +4(l/16) are folded into the row's base pointer once, so every payload load is
// base + 136g + 8kt.  Output element i of lane l is row i + 8(l/16), token l%16.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

typedef _Float16 ew_h8 __attribute__((ext_vector_type(8)));
typedef float ew_f8 __attribute__((ext_vector_type(8)));

template <int H, bool RESIDUAL>
static __device__ __forceinline__ void ew_gemm12(const char* __restrict__ W,
                                                 const _Float16* __restrict__ X,
                                                 float* __restrict__ Y, int M, int K, int N) {
    const int m0 = blockIdx.x * 16;
    const int n0 = blockIdx.y * 16;
    const int lane = threadIdx.x;
    const int r = lane & 15;
    const int kofs = 8 * (lane >> 4);
    const int groups = K / 256;
    const int my_row = (m0 + r < M) ? m0 + r : M - 1;
    const int my_tok = (n0 + r < N) ? n0 + r : N - 1;
    const char* wrow = W + (long long)my_row * EW_ROW_BYTES(groups);
    const char* pay = wrow + 8 + 4 * (lane >> 4);  // +8 payload offset folded into the base
    const _Float16* xrow = X + (long long)my_tok * K + kofs;
    ew_f8 acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int g = 0; g < groups; ++g) {
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc0, zp0, sc1, zp1;
        ew_header<H>(gp, 0, sc0, zp0);
        ew_header<H>(gp, 64, sc1, zp1);
        #pragma unroll
        for (int kt = 0; kt < 16; ++kt) {
            const float sc = kt < 8 ? sc0 : sc1;  // payload bytes 8kt.. : half 1 from 64
            const float zp = kt < 8 ? zp0 : zp1;
            const unsigned int w = EW_LOAD_PK(pay + g * EW_GROUP_BYTES + kt * 8);
            ew_h8 a;
            #pragma unroll
            for (int j = 0; j < 8; ++j)
                a[j] = (_Float16)(sc * (float)((w >> (4 * j)) & 0xFu) + zp);
            const ew_h8 b = *reinterpret_cast<const ew_h8*>(xrow + g * 256 + kt * 16);
            acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, acc);
        }
    }
    const int n = n0 + r;
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int m = m0 + i + 8 * (lane >> 4);
        if (m < M && n < N) {
            float* out = Y + (long long)n * M + m;
            *out = RESIDUAL ? *out + acc[i] : acc[i];
        }
    }
}

#define EW_GEMM12_ENTRY(NAME, H, RES)                                                       \
    extern "C" __launch_bounds__(32) __global__ void NAME(                                  \
        const char* __restrict__ W, const _Float16* __restrict__ X, float* __restrict__ Y,  \
        int M, int K, int N) {                                                              \
        ew_gemm12<H, RES>(W, X, Y, M, K, N);                                                \
    }

EW_GEMM12_ENTRY(ew_gemm_hfq4g256_wmma_gfx12, EW_F32, false)
EW_GEMM12_ENTRY(ew_gemm_mq4g256v2_wmma_gfx12, EW_V2, false)
EW_GEMM12_ENTRY(ew_gemm_mq4cg256_wmma_gfx12, EW_C, false)
EW_GEMM12_ENTRY(ew_gemm_hfq4g256_residual_wmma_gfx12, EW_F32, true)
EW_GEMM12_ENTRY(ew_gemm_mq4g256v2_residual_wmma_gfx12, EW_V2, true)
