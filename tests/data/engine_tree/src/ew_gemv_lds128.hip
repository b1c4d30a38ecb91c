// Engine-style block-128 decode GEMV (hqval test tree): four wave32s per block, one output
// row per wave (rows_per_block 4), and each group's 256 x values staged once per block in
// LDS.  Rows past M still take part in the barriers; they only skip the store.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include "ew_decode.h"

template <int H, bool RESIDUAL>
static __device__ __forceinline__ void ew_gemv_lds(const char* __restrict__ W,
                                                   const float* __restrict__ x,
                                                   float* __restrict__ y, int M, int K) {
    __shared__ float xs[256];
    const int tid = threadIdx.x;
    // The wave index is uniform across the wave: readfirstlane says so to the compiler, so
    // the row's header address stays scalar.
    const int wave = __builtin_amdgcn_readfirstlane(tid >> 5);
    const int lane = tid & 31;
    const int row = blockIdx.x * 4 + wave;
    const bool live = row < M;
    const int groups = K / 256;
    const char* wrow = W + (long long)(live ? row : M - 1) * EW_ROW_BYTES(groups);
    const int boff = lane * 4;
    float acc = 0.0f;
    for (int g = 0; g < groups; ++g) {
        xs[tid] = x[g * 256 + tid];
        xs[tid + 128] = x[g * 256 + tid + 128];
        __syncthreads();
        const char* gp = wrow + g * EW_GROUP_BYTES;
        float sc, zp;
        ew_header<H>(gp, boff, sc, zp);
        const unsigned int pk = EW_LOAD_PK(gp + 8 + boff);
        const float4 xa = *reinterpret_cast<const float4*>(xs + lane * 8);
        const float4 xb = *reinterpret_cast<const float4*>(xs + lane * 8 + 4);
        acc += ew_dot8(pk, sc, zp, xa, xb);
        __syncthreads();
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor(acc, off);
    if (live && lane == 0) y[row] = RESIDUAL ? y[row] + acc : acc;
}

#define EW_LDS_ENTRY(NAME, H, RES)                                                          \
    __launch_bounds__(128) extern "C" __global__ void NAME(const char* __restrict__ W,      \
                                                           const float* __restrict__ x,     \
                                                           float* __restrict__ y, int M,    \
                                                           int K) {                         \
        ew_gemv_lds<H, RES>(W, x, y, M, K);                                                 \
    }

EW_LDS_ENTRY(ew_gemv_hfq4g256_lds128, EW_F32, false)
EW_LDS_ENTRY(ew_gemv_mq4g256v2_lds128, EW_V2, false)
